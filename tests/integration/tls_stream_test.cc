// TLS in the stream proxy: termination ("listen ... ssl") in front of a
// plain backend, TLS to the upstream (proxy_ssl) with verification, SNI and
// proxy_ssl_name, and both at once. The backends are vigil's own HTTP
// servers in the same configuration.
#include <gtest/gtest.h>

#include <csignal>

#include <string>

#include "tls_harness.h"

namespace vigil {
namespace {

using test::Response;
using test::TlsClient;
using test::TlsServer;

struct Ports {
  int http = test::free_port();   // plain HTTP backend
  int https = test::free_port();  // TLS HTTP backend
  int front = test::free_port();  // the stream server under test
};

std::string backends(const Ports& p) {
  return "http {\n  access_log off;\n"
         "  server { listen 127.0.0.1:" +
         std::to_string(p.http) +
         "; root html; location = /metrics { metrics; } }\n"
         "  server { listen 127.0.0.1:" +
         std::to_string(p.https) +
         " ssl; server_name localhost; root html;\n"
         "    add_header X-Name \"$ssl_server_name,\";\n"
         "    ssl_certificate ../server.crt; ssl_certificate_key ../server.key; }\n"
         "  server { listen 127.0.0.1:" +
         std::to_string(p.https) +
         " ssl; server_name other.test; root html;\n"
         "    ssl_certificate ../other.crt; ssl_certificate_key ../other.key; }\n}\n";
}

class TlsStream : public ::testing::Test {
 protected:
  // The backends, and a stream server on p_.front (terminating TLS with
  // "listen ... ssl" when `ssl`) proxying to 127.0.0.1:upstream, with the
  // directives `more`.
  bool start(bool ssl, int upstream, const std::string& more) {
    if (!s_.pki_ok() || !test::make_cert(s_.dir(), "other", "other.test", "ca")) return false;
    std::string big(4 << 20, 'z');
    for (std::size_t i = 0; i < big.size(); i += 4096)
      big[i] = static_cast<char>('a' + i / 4096 % 26);
    s_.write("html/index.html", "backend\n");
    s_.write("html/big.bin", big);
    return s_.start_raw(
        "daemon off;\nmaster_process off;\nerror_log stderr info;\npid logs/vigil.pid;\n"
        "events { }\n" +
        backends(p_) + "stream {\n  server {\n    listen 127.0.0.1:" + std::to_string(p_.front) +
        (ssl ? " ssl" : "") + ";\n    proxy_pass 127.0.0.1:" + std::to_string(upstream) + ";\n" +
        more + "\n  }\n}\n");
  }

  TlsServer s_;
  Ports p_;
};

TEST_F(TlsStream, TerminationInFrontOfAPlainBackend) {
  ASSERT_TRUE(start(true, p_.http,
                    "    ssl_certificate ../server.crt;\n    ssl_certificate_key ../server.key;"))
      << s_.output();
  TlsClient c(p_.front, {.ca_file = s_.ca()});
  ASSERT_TRUE(c.handshake()) << c.error();
  EXPECT_EQ(c.peer_cn(), "localhost");
  ASSERT_TRUE(c.send(test::simple_get("/")));
  EXPECT_EQ(c.read_response().body, "backend\n");
  // 4 MiB through the relay and both buffers, intact.
  ASSERT_TRUE(c.send(test::simple_get("/big.bin")));
  Response r = c.read_response(false, 20000);
  ASSERT_TRUE(r.complete);
  EXPECT_EQ(r.body, s_.read("html/big.bin"));
}

TEST_F(TlsStream, UpstreamTlsVerifiedWithSniAndName) {
  ASSERT_TRUE(start(false, p_.https,
                    "    proxy_ssl on;\n    proxy_ssl_verify on;\n"
                    "    proxy_ssl_trusted_certificate ../ca.crt;\n"
                    "    proxy_ssl_server_name on;\n    proxy_ssl_name other.test;\n"
                    "    proxy_ssl_protocols TLSv1.2 TLSv1.3;\n"
                    "    proxy_ssl_session_reuse on;"))
      << s_.output();
  // SNI other.test makes the backend present other.test's certificate, which
  // is what proxy_ssl_name asks to verify.
  for (int i = 0; i < 3; ++i) {
    Response r = test::get(p_.front, test::simple_get("/"));
    EXPECT_EQ(r.body, "backend\n") << i << "\n" << s_.output();
  }
}

// The name sent as SNI is proxy_ssl_name's (or proxy_pass's) host without a
// port, and none when it is an IP literal (RFC 6066 §3); the backend echoes
// what it got (nginx-tests stream_proxy_ssl_name.t).
TEST_F(TlsStream, UpstreamSniIsAHostNameWithoutPort) {
  for (const char* name : {"", "localhost:123"}) {
    ASSERT_TRUE(start(false, p_.https,
                      std::string("    proxy_ssl on;\n    proxy_ssl_server_name on;\n") +
                          (*name != 0 ? std::string("    proxy_ssl_name ") + name + ";" : "")))
        << s_.output();
    Response r = test::get(p_.front, test::simple_get("/"));
    EXPECT_EQ(r.header("x-name"), *name != 0 ? "localhost," : ",") << name << "\n" << r.head;
    s_.stop();
  }
}

std::uint64_t reused_total(int http_port) {
  Response r = test::get(http_port, test::simple_get("/metrics"));
  const std::string name = "\nvigil_tls_sessions_reused_total ";
  const std::size_t at = r.body.find(name);
  return at == std::string::npos ? ~0ull : std::stoull(r.body.substr(at + name.size()));
}

class TlsStreamReuse : public TlsStream, public ::testing::WithParamInterface<bool> {};

// proxy_ssl_session_reuse: the second and third connections to the upstream
// resume (counted on both ends, both in this process: 2 x 2); off, none does.
TEST_P(TlsStreamReuse, UpstreamSessionsAreResumed) {
  ASSERT_TRUE(start(false, p_.https,
                    std::string("    proxy_ssl on;\n    proxy_ssl_session_reuse ") +
                        (GetParam() ? "on" : "off") + ";"))
      << s_.output();
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(test::get(p_.front, test::simple_get("/")).body, "backend\n");
  }
  EXPECT_EQ(reused_total(p_.http), GetParam() ? 4u : 0u);
}

INSTANTIATE_TEST_SUITE_P(Reuse, TlsStreamReuse, ::testing::Bool(),
                         [](const auto& p) { return p.param ? "on" : "off"; });

// A TLS upstream that answers and closes: the client sees the answer and
// then EOF, and a graceful stop is not held up by the session. The backend
// shares the proxy's event loop, so its response, close_notify and FIN are
// all in the upstream socket by the time the proxy reads: one read of the
// TLS side meets the bytes and the end together (nginx-tests
// stream_proxy_ssl_name.t).
TEST_F(TlsStream, UpstreamTlsCloseAfterResponseEndsTheSession) {
  ASSERT_TRUE(start(false, p_.https, "    proxy_ssl on;\n    proxy_ssl_session_reuse off;"))
      << s_.output();
  for (int i = 0; i < 3; ++i) {
    test::Client c(p_.front);
    ASSERT_TRUE(c.send("GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"));
    EXPECT_TRUE(c.closed_within(5000)) << i << "\n" << s_.output();
    EXPECT_NE(c.extra().find("\r\n\r\nbackend\n"), std::string::npos) << c.extra();
  }
  s_.signal(SIGQUIT);
  EXPECT_EQ(s_.wait_exit(5000), 0) << s_.output();
}

TEST_F(TlsStream, UpstreamCertificateNotMatchingTheNameIsRefused) {
  // No SNI: the backend's default certificate (localhost) is not other.test.
  ASSERT_TRUE(start(false, p_.https,
                    "    proxy_ssl on;\n    proxy_ssl_verify on;\n"
                    "    proxy_ssl_trusted_certificate ../ca.crt;\n"
                    "    proxy_ssl_name other.test;"))
      << s_.output();
  test::Client c(p_.front);
  ASSERT_TRUE(c.send(test::simple_get("/")));
  EXPECT_TRUE(c.closed_within(5000));
  EXPECT_EQ(c.extra(), "") << "nothing of the backend's reached the client";
  EXPECT_TRUE(s_.wait_output(
      "SSL handshake failed (upstream SSL certificate does not match \"other.test\") while "
      "connecting to upstream"))
      << s_.output();
}

TEST_F(TlsStream, TerminationAndUpstreamTlsTogether) {
  ASSERT_TRUE(start(true, p_.https,
                    "    ssl_certificate ../other.crt;\n    ssl_certificate_key ../other.key;\n"
                    "    proxy_ssl on;"))
      << s_.output();
  TlsClient c(p_.front);
  ASSERT_TRUE(c.handshake()) << c.error();
  EXPECT_EQ(c.peer_cn(), "other.test");
  ASSERT_TRUE(c.send(test::simple_get("/")));
  EXPECT_EQ(c.read_response().body, "backend\n");
}

}  // namespace
}  // namespace vigil
