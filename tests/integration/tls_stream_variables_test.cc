// The TLS variables of stream servers ("listen ... ssl"), ssl_alpn, and a
// client certificate check that ends the session with $status 500, on a
// real vigil.
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <string>

#include "tls_harness.h"

namespace vigil::test {
namespace {

class TlsStreamVariables : public ::testing::Test {
 protected:
  // A stream server with TLS on port_ answering `ret`, with `more`.
  bool start(const std::string& ret, const std::string& more = "") {
    if (!s_.pki_ok() || !make_cert(s_.dir(), "client", "client.test", "ca")) return false;
    return s_.start_raw(
        "daemon off;\nmaster_process off;\nerror_log stderr info;\npid logs/vigil.pid;\n"
        "events { }\nstream {\n  log_format status $status;\n"
        "  server {\n    listen 127.0.0.1:" + std::to_string(plain_) +
        ";\n    listen 127.0.0.1:" + std::to_string(port_) + " ssl;\n    ssl_certificate ../server.crt;\n    ssl_certificate_key ../server.key;\n"
        "    access_log logs/status.log status;\n    return \"" + ret + "\";\n" + more +
        "\n  }\n}\n");
  }
  // The answer to a TLS client with options `o` (empty when the handshake fails).
  std::string answer(const TlsOptions& o) {
    TlsClient c(port_, o);
    if (!c.handshake()) return "";
    (void)c.closed_within(5000);
    return c.buffer();
  }
  std::string wait_status_log(std::size_t lines) {
    std::string text;
    wait_for([&] {
      text = read_file(s_.dir() + "/logs/status.log");
      return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')) >= lines;
    });
    return text;
  }

  TlsServer s_;
  int port_ = free_port();   // "listen ... ssl"
  int plain_ = free_port();  // the same server without TLS
};

TEST_F(TlsStreamVariables, ProtocolCipherNameAndSession) {
  ASSERT_TRUE(start("$ssl_protocol|$ssl_cipher|$ssl_server_name|$ssl_session_reused|"
                    "$ssl_session_id|$ssl_client_verify"))
      << s_.output();
  const std::string got = answer({.sni = "localhost", .max_version = TLS1_2_VERSION});
  EXPECT_TRUE(std::regex_match(got, std::regex(R"(TLSv1\.2\|[A-Z0-9-]+\|localhost\|\.\|[0-9A-F]*\|NONE)")))
      << got;
  EXPECT_EQ(wait_status_log(1), "200\n");
  EXPECT_EQ(s_.stop(), 0);
}

// TLS is a property of the address: the server's plain address serves
// plain connections, whose TLS variables have no value.
TEST_F(TlsStreamVariables, PlainAddressOfATlsServer) {
  ASSERT_TRUE(start("$ssl_protocol:$ssl_session_id:$ssl_client_verify")) << s_.output();
  Client c(plain_);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(read_n(c.fd(), 2), "::");
  EXPECT_EQ(answer({}).substr(0, 4), "TLSv");
  EXPECT_EQ(wait_status_log(2), "200\n200\n");
  EXPECT_EQ(s_.stop(), 0);
}

TEST_F(TlsStreamVariables, AlpnIsOfferedAndTold) {
  ASSERT_TRUE(start("X $ssl_alpn_protocol X", "    ssl_alpn first second;")) << s_.output();
  EXPECT_EQ(answer({.alpn = {"first"}}), "X first X");
  EXPECT_EQ(answer({.alpn = {"wrong", "second"}}), "X second X");
  EXPECT_EQ(answer({}), "X  X");
  // No protocol in common: the handshake fails (RFC 7301 §3.2), $status 500.
  EXPECT_EQ(answer({.alpn = {"wrong"}}), "");
  EXPECT_EQ(wait_status_log(4), "200\n200\n200\n500\n");
  EXPECT_EQ(s_.stop(), 0);
}

TEST_F(TlsStreamVariables, ClientCertificateRequiredAndTold) {
  ASSERT_TRUE(start("$ssl_client_verify:$ssl_client_s_dn:$ssl_client_i_dn",
                    "    ssl_verify_client on;\n    ssl_client_certificate ../ca.crt;"))
      << s_.output();
  // Without a certificate the session ends before `return`.
  EXPECT_EQ(answer({}), "");
  const std::string got =
      answer({.cert = s_.dir() + "/client.crt", .key = s_.dir() + "/client.key"});
  EXPECT_EQ(got, "SUCCESS:CN=client.test:CN=ca");
  EXPECT_EQ(wait_status_log(2), "500\n200\n");
  EXPECT_EQ(s_.stop(), 0);
}

}  // namespace
}  // namespace vigil::test
