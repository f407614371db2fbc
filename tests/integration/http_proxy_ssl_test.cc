// proxy_pass https:// and the proxy_ssl_* directives against a real nginx
// with TLS (proxy_ssl_harness.h): the handshake and its failures, the
// certificate check with nginx's inheritance of the directives, SNI and
// proxy_ssl_name, and the client certificate.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>

#include "integration/proxy_ssl_harness.h"

namespace vigil::test {
namespace {

std::string addr(int port) {
  return "127.0.0.1:" + std::to_string(port);
}

TEST_F(ProxySsl, GetThroughHttps) {
  ASSERT_TRUE(start_vigil("location / { proxy_pass https://" + addr(tls_) + "; }")) << v_.output();
  Response r = get("/index.html");
  ASSERT_EQ(r.status, 200) << r.head << v_.output();
  EXPECT_EQ(r.body, "nginx tls\n");
  auto h = hits(1);
  ASSERT_EQ(h.size(), 1u) << nginx_.read("logs/access.log");
  EXPECT_EQ(h[0].protocol, "TLSv1.3");
  EXPECT_EQ(h[0].request, "GET /index.html HTTP/1.0");
  EXPECT_EQ(h[0].sni, "-") << "proxy_ssl_server_name is off by default";
}

// proxy_ssl_verify and proxy_ssl_trusted_certificate set at the http level,
// changed at the server and location levels, as nginx inherits them. The
// upstream is named "localhost": the default proxy_ssl_name, which the
// certificate carries.
TEST_F(ProxySsl, VerifyWithInheritance) {
  ASSERT_TRUE(
      start_vigil("proxy_ssl_trusted_certificate " + pki("ca.crt") +
                      ";\n"
                      "location /good/ { proxy_pass https://localhost/; }\n"
                      "location /wrong/ { proxy_ssl_trusted_certificate " +
                      pki("wrongca.crt") +
                      "; proxy_pass https://localhost/; }\n"
                      "location /off/ { proxy_ssl_verify off; proxy_ssl_trusted_certificate " +
                      pki("wrongca.crt") + "; proxy_pass https://localhost/; }\n",
                  // max_fails=0: the refused handshake must not take the server out for the others.
                  "upstream localhost { server " + addr(tls_) +
                      " max_fails=0; }\n"
                      "proxy_ssl_verify on; proxy_ssl_trusted_certificate " +
                      pki("wrongca.crt") + ";\n"))
      << v_.output();
  EXPECT_EQ(get("/good/index.html").body, "nginx tls\n") << v_.output();
  Response wrong = get("/wrong/index.html");
  EXPECT_EQ(wrong.status, 502) << wrong.head;
  EXPECT_TRUE(v_.wait_output(
      "upstream SSL certificate verify error: (20:unable to get local issuer certificate) while "
      "SSL handshaking to upstream"))
      << v_.output();
  EXPECT_NE(v_.output().find("upstream: \"https://" + addr(tls_) + "/index.html\""),
            std::string::npos)
      << v_.output();
  EXPECT_EQ(get("/off/index.html").body, "nginx tls\n");
  // The refused handshake never reached nginx's HTTP layer: two requests logged.
  ASSERT_EQ(hits(2).size(), 2u);
  const std::string log = nginx_.read("logs/access.log");
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 2) << log;
}

TEST_F(ProxySsl, VerifyWithoutTrustedCertificateIsAConfigurationError) {
  v_.write_conf(
      "daemon off;\nmaster_process off;\nerror_log stderr info;\nevents { }\nhttp {\n"
      "server { listen 127.0.0.1:0; location / { proxy_ssl_verify on;\n"
      "  proxy_pass https://" +
      addr(tls_) + "; } }\n}\n");
  auto [rc, out] = run({kVigil, "-t", "-p", v_.dir(), "-c", v_.conf_path()});
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("no proxy_ssl_trusted_certificate for proxy_ssl_verify"), std::string::npos)
      << out;
}

// SNI only with proxy_ssl_server_name on, and the name is proxy_ssl_name's:
// other.test makes nginx choose its other.test server (and certificate),
// which is also the name the certificate is checked against.
TEST_F(ProxySsl, ServerNameAndSslName) {
  ASSERT_TRUE(start_vigil(
      "proxy_ssl_trusted_certificate " + pki("ca.crt") +
          ";\n"
          "location /sni/ { proxy_ssl_server_name on; proxy_pass https://localhost/; }\n"
          // nginx picks the certificate by SNI, the server block by Host.
          "location /other/ { proxy_ssl_server_name on; proxy_ssl_name other.test;\n"
          "  proxy_set_header Host other.test;\n"
          "  proxy_ssl_verify on; proxy_pass https://localhost/; }\n"
          "location /nosni/ { proxy_ssl_name other.test; proxy_ssl_verify on;\n"
          "  proxy_pass https://localhost/; }\n"
          "location /ip/ { proxy_ssl_server_name on; proxy_pass https://" +
          addr(tls_) +
          "/; }\n"
          "location /ipverify/ { proxy_ssl_verify on; proxy_pass https://" +
          addr(tls_) +
          "/; }\n"
          "location /var/ { proxy_ssl_server_name on; proxy_ssl_name $http_x_name;\n"
          "  proxy_pass https://" +
          addr(tls_) + "/; }\n",
      "upstream localhost { server " + addr(tls_) + " max_fails=0; }\n"))
      << v_.output();
  EXPECT_EQ(get("/sni/index.html").body, "nginx tls\n") << v_.output();
  EXPECT_EQ(get("/other/index.html").body, "other\n") << v_.output();
  // No SNI: nginx's default server answers with the localhost certificate,
  // which is not other.test's.
  EXPECT_EQ(get("/nosni/index.html").status, 502);
  EXPECT_TRUE(
      v_.wait_output("upstream SSL certificate does not match \"other.test\" while SSL "
                     "handshaking to upstream"))
      << v_.output();
  // An IP literal is never sent as SNI (RFC 6066 §3).
  EXPECT_EQ(get("/ip/index.html").body, "nginx tls\n");
  // proxy_ssl_name with a variable, evaluated per connection.
  EXPECT_EQ(get("/var/index.html", "X-Name: other.test\r\n").body, "nginx tls\n");
  // An IP address is checked as one: the certificate names only localhost.
  // (Last: the failure takes the address's implicit group out for a while.)
  EXPECT_EQ(get("/ipverify/index.html").status, 502);
  EXPECT_TRUE(v_.wait_output("upstream SSL certificate does not match \"127.0.0.1\""))
      << v_.output();
  auto h = hits(4);
  ASSERT_EQ(h.size(), 4u);
  EXPECT_EQ(h[0].sni, "localhost");
  EXPECT_EQ(h[1].sni, "other.test");
  EXPECT_EQ(h[2].sni, "-");
  EXPECT_EQ(h[3].sni, "other.test");
}

TEST_F(ProxySsl, ClientCertificate) {
  ASSERT_TRUE(start_vigil("location /none/ { proxy_pass https://" + addr(mtls_) +
                          "/; }\n"
                          "location /cert/ { proxy_ssl_certificate " +
                          pki("client.crt") + "; proxy_ssl_certificate_key " + pki("client.key") +
                          "; proxy_pass https://" + addr(mtls_) + "/; }\n"))
      << v_.output();
  // nginx finishes the handshake and refuses at the HTTP level: 400 passed on.
  Response none = get("/none/");
  EXPECT_EQ(none.status, 400);
  EXPECT_NE(none.body.find("No required SSL certificate was sent"), std::string::npos) << none.body;
  Response cert = get("/cert/");
  EXPECT_EQ(cert.status, 200) << cert.head;
  EXPECT_EQ(cert.body, "client CN=client\n");
}

// A plain HTTP server on the port proxy_pass calls https: the handshake
// fails at once (nginx answers the ClientHello with a 400 in clear text),
// 502, never a hang.
TEST_F(ProxySsl, PlainServerOnTheHttpsPortIs502) {
  ASSERT_TRUE(start_vigil("location / { proxy_connect_timeout 5s; proxy_pass https://" +
                          addr(plain_) + "; }"))
      << v_.output();
  const auto t0 = std::chrono::steady_clock::now();
  Response r = get("/");
  EXPECT_EQ(r.status, 502) << r.head;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(4));
  EXPECT_TRUE(v_.wait_output("while SSL handshaking to upstream")) << v_.output();
  EXPECT_NE(v_.output().find("[error]"), std::string::npos);
}

// A peer that accepts and never answers the ClientHello: proxy_connect_timeout
// bounds the handshake, 504 as for a connect timeout.
TEST_F(ProxySsl, HandshakeTimeoutIs504) {
  Backend silent([](BackendConn&, const BackendRequest&) { return false; });  // never a request
  ASSERT_TRUE(start_vigil("location / { proxy_connect_timeout 300ms; proxy_pass https://" +
                          silent.address() + "; }"))
      << v_.output();
  Response r = get("/");
  EXPECT_EQ(r.status, 504) << r.head;
  EXPECT_TRUE(v_.wait_output(
      "upstream timed out (110: Connection timed out) while SSL handshaking to upstream"))
      << v_.output();
}

// The next server after a failed handshake: the wrong one first (round
// robin starts there), then the good one; the client sees only the answer.
TEST_F(ProxySsl, FailedHandshakeTriesTheNextServer) {
  ASSERT_TRUE(
      start_vigil("location / { proxy_pass https://pair; }",
                  "upstream pair { server " + addr(plain_) + "; server " + addr(tls_) + "; }\n"))
      << v_.output();
  for (int i = 0; i < 4; ++i) {
    Response r = get("/index.html");
    EXPECT_EQ(r.status, 200) << i << r.head << v_.output();
    EXPECT_EQ(r.body, "nginx tls\n");
  }
}

}  // namespace
}  // namespace vigil::test
