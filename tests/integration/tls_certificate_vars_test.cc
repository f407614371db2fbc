// Certificates named with variables: ssl_certificate / ssl_certificate_key
// chosen per handshake (http and stream servers), proxy_ssl_certificate /
// proxy_ssl_certificate_key chosen per request or session (http and stream
// proxies), "data:" values, encrypted keys, and failures that fail the one
// handshake with an error line (nginx-tests ssl_certificate.t,
// proxy_ssl_certificate_vars.t, stream_proxy_ssl_certificate_vars.t,
// proxy_ssl_certificate_empty.t).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "tls_harness.h"

namespace vigil {
namespace {

using test::Response;
using test::TlsClient;
using test::TlsOptions;
using test::TlsServer;

class CertificateVars : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(s_.pki_ok());
    ASSERT_TRUE(test::make_cert(s_.dir(), "one", "one", "ca"));
    ASSERT_TRUE(test::make_cert(s_.dir(), "two", "two", "ca"));
    ASSERT_TRUE(test::make_cert(s_.dir(), "alice", "alice", "ca"));
    s_.write("html/index.html", "tls\n");
  }

  static std::string common() {
    return "daemon off;\nmaster_process off;\nerror_log stderr info;\npid logs/vigil.pid;\n"
           "events { }\n";
  }

  // The server certificate's common name for a handshake naming `sni`;
  // "" when the handshake fails.
  std::string cn_for(int port, const std::string& sni) {
    TlsClient c(port, {.sni = sni});
    if (!c.handshake()) return "";
    return c.peer_cn();
  }

  // A TLS backend asking for (and checking) client certificates from ca.crt,
  // telling what it got.
  std::string verifying_backend(int port) {
    return "server {\n  listen 127.0.0.1:" + std::to_string(port) +
           " ssl;\n  server_name localhost;\n  root html;\n"
           "  ssl_certificate ../server.crt;\n  ssl_certificate_key ../server.key;\n"
           "  ssl_verify_client optional;\n  ssl_client_certificate ../ca.crt;\n"
           "  add_header X-Verify $ssl_client_verify;\n"
           "  add_header X-Name $ssl_client_s_dn;\n}\n";
  }

  TlsServer s_;
};

// The certificate named by the client's SNI; a name with no file fails that
// handshake only, with the file in the error log.
TEST_F(CertificateVars, ServerCertificateFollowsServerName) {
  const int port = test::free_port();
  ASSERT_TRUE(
      s_.start("access_log off;\n"
               "server {\n  listen 127.0.0.1:" +
               std::to_string(port) +
               " ssl;\n  server_name localhost;\n  root html;\n"
               "  ssl_certificate ../$ssl_server_name.crt;\n"
               "  ssl_certificate_key ../$ssl_server_name.key;\n}\n"))
      << s_.output();
  EXPECT_EQ(cn_for(port, "one"), "one");
  EXPECT_EQ(cn_for(port, "two"), "two");
  EXPECT_EQ(cn_for(port, "nx"), "");
  EXPECT_TRUE(s_.wait_output("nx.crt\": BIO_new_file() failed")) << s_.output();
  // The worker lives on.
  TlsClient c(port, {.sni = "one"});
  ASSERT_TRUE(c.handshake()) << c.error();
  ASSERT_TRUE(c.send(test::simple_get("/")));
  EXPECT_EQ(c.read_response().body, "tls\n");
}

// The names are those of the server SNI chose; a server without
// certificates keeps the default server's (evaluated for the chosen one).
TEST_F(CertificateVars, EachServerHasItsOwnNames) {
  const int port = test::free_port();
  const std::string p = std::to_string(port);
  ASSERT_TRUE(
      s_.start("access_log off;\n"
               "map $ssl_server_name $cert { default one; }\n"
               "server {\n  listen 127.0.0.1:" +
               p +
               " ssl;\n  server_name first;\n  root html;\n"
               "  ssl_certificate ../$cert.crt;\n  ssl_certificate_key ../$cert.key;\n}\n"
               "server {\n  listen 127.0.0.1:" +
               p +
               " ssl;\n  server_name second;\n  root html;\n"
               "  ssl_certificate ../two.crt;\n  ssl_certificate_key ../$cert.key;\n"
               "}\n"
               "server {\n  listen 127.0.0.1:" +
               p +
               " ssl;\n  server_name third;\n  root html;\n"
               "  ssl_certificate ../server.crt;\n  ssl_certificate_key ../server.key;\n"
               "}\n"
               "server {\n  listen 127.0.0.1:" +
               p + " ssl;\n  server_name none;\n  root html;\n}\n"))
      << s_.output();
  EXPECT_EQ(cn_for(port, "first"), "one");
  // two.crt with one.key: the pair does not match, the handshake fails.
  EXPECT_EQ(cn_for(port, "second"), "");
  EXPECT_TRUE(s_.wait_output("key values mismatch")) << s_.output();
  EXPECT_EQ(cn_for(port, "third"), "localhost");
  EXPECT_EQ(cn_for(port, "none"), "one");
}

// "data:$var": the PEM itself, here from a map; and an encrypted key read
// with ssl_password_file.
TEST_F(CertificateVars, DataValuesAndEncryptedKeys) {
  ASSERT_TRUE(test::openssl_cli(s_.dir(), {"pkey", "-in", "two.key", "-aes128", "-passout",
                                           "pass:secret", "-out", "two.enc.key"}));
  std::ostringstream pem;
  pem << std::ifstream(s_.dir() + "/one.crt").rdbuf();
  std::ostringstream key;
  key << std::ifstream(s_.dir() + "/one.key").rdbuf();
  s_.write("conf/passwords", "wrong\nsecret\n");
  const int port = test::free_port();
  const std::string p = std::to_string(port);
  ASSERT_TRUE(
      s_.start("access_log off;\n"
               "map $ssl_server_name $pem { default \"" +
               pem.str() +
               "\"; }\n"
               "map $ssl_server_name $key { default \"" +
               key.str() +
               "\"; }\n"
               "map $ssl_server_name $enc { default enc; }\n"
               "server {\n  listen 127.0.0.1:" +
               p +
               " ssl;\n  server_name data;\n  root html;\n"
               "  ssl_certificate data:$pem;\n  ssl_certificate_key data:$key;\n}\n"
               "server {\n  listen 127.0.0.1:" +
               p +
               " ssl;\n  server_name encrypted;\n  root html;\n"
               "  ssl_certificate ../two.crt;\n  ssl_certificate_key ../two.$enc.key;\n"
               "  ssl_password_file passwords;\n}\n"))
      << s_.output();
  EXPECT_EQ(cn_for(port, "data"), "one");
  EXPECT_EQ(cn_for(port, "encrypted"), "two");
}

// proxy_ssl_certificate with variables: the client certificate the request
// names; an empty name sends none; a missing file fails the upstream
// handshake (502).
TEST_F(CertificateVars, ProxyClientCertificateFollowsTheRequest) {
  const int backend = test::free_port();
  const int front = test::free_port();
  const std::string up = "https://127.0.0.1:" + std::to_string(backend) + "/";
  ASSERT_TRUE(s_.start("access_log off;\n" + verifying_backend(backend) +
                       "server {\n  listen 127.0.0.1:" + std::to_string(front) +
                       ";\n  proxy_ssl_session_reuse off;\n"
                       "  proxy_ssl_certificate ../$arg_c.crt;\n"
                       "  proxy_ssl_certificate_key ../$arg_c.key;\n"
                       "  location / { proxy_pass " +
                       up +
                       "; }\n"
                       "  location /none/ { proxy_pass " +
                       up +
                       ";\n    proxy_ssl_certificate $arg_c;\n"
                       "    proxy_ssl_certificate_key $arg_c;\n  }\n}\n"))
      << s_.output();
  Response alice = test::get(front, test::simple_get("/index.html?c=alice"));
  EXPECT_EQ(alice.status, 200) << alice.head << s_.output();
  EXPECT_EQ(alice.header("x-verify"), "SUCCESS");
  EXPECT_EQ(alice.header("x-name"), "CN=alice");
  Response one = test::get(front, test::simple_get("/index.html?c=one"));
  EXPECT_EQ(one.header("x-name"), "CN=one");
  Response none = test::get(front, test::simple_get("/none/index.html"));
  EXPECT_EQ(none.status, 200) << none.head;
  EXPECT_EQ(none.header("x-verify"), "NONE");
  Response nx = test::get(front, test::simple_get("/index.html?c=nx"));
  EXPECT_EQ(nx.status, 502) << nx.head;
  EXPECT_TRUE(s_.wait_output("nx.crt\": BIO_new_file() failed")) << s_.output();
}

// proxy_ssl_certificate "" cancels an inherited client certificate.
TEST_F(CertificateVars, EmptyProxyCertificateCancelsTheInheritedOne) {
  const int backend = test::free_port();
  const int front = test::free_port();
  const std::string up = "https://127.0.0.1:" + std::to_string(backend) + "/";
  ASSERT_TRUE(s_.start("access_log off;\n" + verifying_backend(backend) +
                       "server {\n  listen 127.0.0.1:" + std::to_string(front) +
                       ";\n  proxy_ssl_session_reuse off;\n"
                       "  proxy_ssl_certificate ../alice.crt;\n"
                       "  proxy_ssl_certificate_key ../alice.key;\n"
                       "  location / { proxy_pass " +
                       up +
                       "; }\n"
                       "  location /cancel/ { proxy_pass " +
                       up +
                       ";\n    proxy_ssl_certificate \"\";\n"
                       "    proxy_ssl_certificate_key \"\";\n  }\n}\n"))
      << s_.output();
  Response alice = test::get(front, test::simple_get("/index.html"));
  EXPECT_EQ(alice.header("x-verify"), "SUCCESS") << alice.head << s_.output();
  Response cancel = test::get(front, test::simple_get("/cancel/index.html"));
  EXPECT_EQ(cancel.status, 200) << cancel.head;
  EXPECT_EQ(cancel.header("x-verify"), "NONE");
}

// Stream: the server certificate by SNI, and the upstream client
// certificate by a map of the session's port.
TEST_F(CertificateVars, StreamServerAndProxyCertificates) {
  const int backend = test::free_port();
  const int plain = test::free_port();
  const int tls_front = test::free_port();
  const int alice_front = test::free_port();
  const int none_front = test::free_port();
  ASSERT_TRUE(s_.start_raw(
      common() + "http {\n  access_log off;\n" + verifying_backend(backend) +
      "  server { listen 127.0.0.1:" + std::to_string(plain) + "; root html; }\n}\n" +
      "stream {\n"
      "  map $server_port $who {\n    " +
      std::to_string(alice_front) +
      " alice;\n    default \"\";\n  }\n"
      "  server {\n    listen 127.0.0.1:" +
      std::to_string(tls_front) + " ssl;\n    proxy_pass 127.0.0.1:" + std::to_string(plain) +
      ";\n    ssl_certificate ../$ssl_server_name.crt;\n"
      "    ssl_certificate_key ../$ssl_server_name.key;\n  }\n"
      "  server {\n    listen 127.0.0.1:" +
      std::to_string(alice_front) + ";\n    proxy_pass 127.0.0.1:" + std::to_string(backend) +
      ";\n    proxy_ssl on;\n    proxy_ssl_session_reuse off;\n"
      "    proxy_ssl_certificate ../$who.crt;\n    proxy_ssl_certificate_key ../$who.key;\n"
      "  }\n"
      "  server {\n    listen 127.0.0.1:" +
      std::to_string(none_front) + ";\n    proxy_pass 127.0.0.1:" + std::to_string(backend) +
      ";\n    proxy_ssl on;\n    proxy_ssl_session_reuse off;\n"
      "    proxy_ssl_certificate $who;\n    proxy_ssl_certificate_key $who;\n"
      "  }\n}\n"))
      << s_.output();
  EXPECT_EQ(cn_for(tls_front, "two"), "two");
  EXPECT_EQ(cn_for(tls_front, "nx"), "");
  EXPECT_TRUE(s_.wait_output("nx.crt\": BIO_new_file() failed")) << s_.output();
  Response alice = test::get(alice_front, test::simple_get("/index.html"));
  EXPECT_EQ(alice.header("x-name"), "CN=alice") << alice.head << s_.output();
  // "$who" is empty here: no client certificate.
  Response none = test::get(none_front, test::simple_get("/index.html"));
  EXPECT_EQ(none.status, 200) << none.head;
  EXPECT_EQ(none.header("x-verify"), "NONE");
}

// An unknown variable is a configuration error naming the directive's line.
TEST_F(CertificateVars, UnknownVariableIsAConfigurationError) {
  s_.write("conf/vigil.conf", "events {}\nhttp {\nserver {\n  listen 127.0.0.1:" +
                                  std::to_string(test::free_port()) +
                                  " ssl;\n  ssl_certificate $nosuch.crt;\n"
                                  "  ssl_certificate_key $nosuch.key;\n}\n}\n");
  auto [rc, out] = test::run({test::kVigil, "-p", s_.dir(), "-c", "conf/vigil.conf", "-t"});
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("unknown \"nosuch\" variable"), std::string::npos) << out;
  EXPECT_NE(out.find("vigil.conf:5"), std::string::npos) << out;
}

}  // namespace
}  // namespace vigil
