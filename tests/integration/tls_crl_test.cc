// Certificate revocation lists: ssl_crl for client certificates and
// proxy_ssl_crl for the upstream's, with lists made by `openssl ca` from the
// test's own CA (an empty list, then one that revokes a client, then one that
// also revokes the server's certificate).
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "tls_harness.h"

namespace vigil {
namespace {

using test::Response;
using test::TlsClient;
using test::TlsOptions;
using test::TlsServer;

class Crl : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(s_.pki_ok());
    ASSERT_TRUE(test::make_cert(s_.dir(), "alice", "alice", "ca"));
    ASSERT_TRUE(test::make_cert(s_.dir(), "bob", "bob", "ca"));
    std::ofstream(s_.dir() + "/ca.conf")
        << "[ ca ]\ndefault_ca = testca\n[ testca ]\ndatabase = index.txt\n"
           "crlnumber = crlnumber\ndefault_md = sha256\ndefault_crl_days = 2\n";
    std::ofstream(s_.dir() + "/index.txt");
    std::ofstream(s_.dir() + "/crlnumber") << "1000\n";
    ASSERT_TRUE(gencrl("empty.crl"));
    ASSERT_TRUE(revoke("alice.crt"));
    ASSERT_TRUE(gencrl("alice.crl"));
    ASSERT_TRUE(revoke("server.crt"));
    ASSERT_TRUE(gencrl("all.crl"));
    s_.write("html/index.html", "tls backend\n");
  }
  bool ca(std::vector<std::string> args) {
    std::vector<std::string> a = {"ca",     "-config", "ca.conf", "-keyfile",
                                  "ca.key", "-cert",   "ca.crt"};
    a.insert(a.end(), args.begin(), args.end());
    return test::openssl_cli(s_.dir(), a);
  }
  bool gencrl(const std::string& out) { return ca({"-gencrl", "-out", out}); }
  bool revoke(const std::string& cert) { return ca({"-revoke", cert}); }

  // A TLS server asking for client certificates, with `crl` as its
  // revocation list; X-Verify shows the verification's result, on the 400
  // too.
  void start_verify(const std::string& crl) {
    port_ = test::free_port();
    ASSERT_TRUE(s_.start(
        "access_log off;\n" +
        test::tls_server_block(port_,
                               "ssl_verify_client on;\n  ssl_client_certificate "
                               "../ca.crt;\n  ssl_crl ../" +
                                   crl + ";\n  add_header X-Verify $ssl_client_verify always;")))
        << s_.output();
  }
  Response get_as(const std::string& who) {
    TlsOptions o;
    o.cert = s_.path(who + ".crt");
    o.key = s_.path(who + ".key");
    TlsClient c(port_, o);
    if (!c.handshake()) return {};
    if (!c.send(test::simple_get("/"))) return {};
    return c.read_response();
  }

  TlsServer s_;
  int port_ = 0;
};

TEST_F(Crl, AnEmptyListRevokesNobody) {
  start_verify("empty.crl");
  Response r = get_as("alice");
  EXPECT_EQ(r.status, 200) << r.head;
  EXPECT_EQ(r.header("x-verify"), "SUCCESS");
}

// The revoked certificate is refused as any certificate that fails
// verification: 400, with the reason in $ssl_client_verify and the log.
TEST_F(Crl, ARevokedClientCertificateFailsVerification) {
  start_verify("alice.crl");
  Response alice = get_as("alice");
  EXPECT_EQ(alice.status, 400) << alice.head;
  EXPECT_EQ(alice.header("x-verify"), "FAILED:certificate revoked");
  EXPECT_TRUE(s_.wait_output("certificate revoked")) << s_.output();
  Response bob = get_as("bob");
  EXPECT_EQ(bob.status, 200) << bob.head;
  EXPECT_EQ(bob.header("x-verify"), "SUCCESS");
}

// proxy_ssl_crl: the backend's certificate checked against the list; a
// revoked one fails the handshake (502), as an unverifiable one does.
TEST_F(Crl, ProxySslCrlChecksTheUpstreamCertificate) {
  const int backend = test::free_port();
  const int front = test::free_port();
  const std::string up = "https://127.0.0.1:" + std::to_string(backend) + "/";
  ASSERT_TRUE(s_.start("access_log off;\n" + test::tls_server_block(backend) +
                       "server {\n  listen 127.0.0.1:" + std::to_string(front) +
                       ";\n  proxy_ssl_verify on;\n  proxy_ssl_trusted_certificate ../ca.crt;\n"
                       "  proxy_ssl_name localhost;\n"
                       "  location /ok/ { proxy_ssl_crl ../alice.crl; proxy_pass " +
                       up + "; }\n  location /revoked/ { proxy_ssl_crl ../all.crl; proxy_pass " +
                       up + "; }\n  location /none/ { proxy_pass " + up + "; }\n}\n"))
      << s_.output();
  Response ok = test::get(front, test::simple_get("/ok/index.html"));
  EXPECT_EQ(ok.status, 200) << ok.head << s_.output();
  EXPECT_EQ(ok.body, "tls backend\n");
  Response revoked = test::get(front, test::simple_get("/revoked/index.html"));
  EXPECT_EQ(revoked.status, 502) << revoked.head;
  EXPECT_TRUE(s_.wait_output("(23:certificate revoked)")) << s_.output();
  EXPECT_EQ(test::get(front, test::simple_get("/none/index.html")).status, 200);
}

TEST_F(Crl, AnUnreadableListIsAConfigurationError) {
  s_.write("conf/bad.crl", "not a revocation list\n");
  s_.write("conf/vigil.conf", "events {}\nhttp {\n" +
                                  test::tls_server_block(test::free_port(),
                                                         "ssl_verify_client on;\n"
                                                         "  ssl_client_certificate ../ca.crt;\n"
                                                         "  ssl_crl bad.crl;") +
                                  "}\n");
  auto [rc, out] = test::run({test::kVigil, "-p", s_.dir(), "-c", "conf/vigil.conf", "-t"});
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("X509_LOOKUP_load_file(\"" + s_.dir() + "/conf/bad.crl\") failed"),
            std::string::npos)
      << out;
}

}  // namespace
}  // namespace vigil
