// Client certificates (ssl_verify_client, ssl_client_certificate,
// ssl_verify_depth): accepted, missing, signed by another CA, and the
// optional modes, answered as nginx does (400 with the reason).
#include <gtest/gtest.h>

#include <string>

#include "tls_harness.h"

namespace vigil {
namespace {

using test::Response;
using test::TlsClient;
using test::TlsOptions;
using test::TlsServer;

class ClientCerts : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(s_.pki_ok());
    // A client certificate from our CA, and one from a CA the server does not know.
    ASSERT_TRUE(test::make_cert(s_.dir(), "alice", "alice", "ca"));
    ASSERT_TRUE(test::make_ca(s_.dir(), "otherca"));
    ASSERT_TRUE(test::make_cert(s_.dir(), "mallory", "mallory", "otherca"));
    s_.write("html/index.html", "secret\n");
  }
  void start(const std::string& mode, const std::string& more = "") {
    port_ = test::free_port();
    ASSERT_TRUE(s_.start("access_log off;\n" +
                         test::tls_server_block(port_, "ssl_verify_client " + mode +
                                                           ";\n  ssl_client_certificate ../ca.crt;"
                                                           "\n  ssl_verify_depth 2;" +
                                                           more)))
        << s_.output();
  }
  Response get(const std::string& who, const std::string& path = "/") {
    TlsOptions o;
    if (!who.empty()) {
      o.cert = s_.path(who + ".crt");
      o.key = s_.path(who + ".key");
    }
    TlsClient c(port_, o);
    if (!c.handshake()) return {};
    if (!c.send(test::simple_get(path))) return {};
    return c.read_response();
  }

  TlsServer s_;
  int port_ = 0;
};

TEST_F(ClientCerts, OnAcceptsOurCaAndRefusesMissingOrForeign) {
  start("on");
  Response ok = get("alice");
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(ok.body, "secret\n");

  Response none = get("");
  EXPECT_EQ(none.status, 400);
  EXPECT_NE(none.body.find("No required SSL certificate was sent"), std::string::npos) << none.body;
  EXPECT_EQ(none.header("connection"), "close");

  Response foreign = get("mallory");
  EXPECT_EQ(foreign.status, 400);
  EXPECT_NE(foreign.body.find("The SSL certificate error"), std::string::npos) << foreign.body;
  EXPECT_TRUE(s_.wait_output("client SSL certificate verify error")) << s_.output();
}

TEST_F(ClientCerts, OptionalAllowsNoneButNotAForeignOne) {
  start("optional");
  EXPECT_EQ(get("").status, 200);
  EXPECT_EQ(get("alice").status, 200);
  EXPECT_EQ(get("mallory").status, 400);
}

TEST_F(ClientCerts, OptionalNoCaAcceptsAnUnknownIssuer) {
  start("optional_no_ca");
  EXPECT_EQ(get("mallory").status, 200);
  EXPECT_EQ(get("alice").status, 200);
  EXPECT_EQ(get("").status, 200);
}

// nginx's $ssl_client_* variables, for a certificate that verifies, one
// from an unknown issuer (let through by optional_no_ca) and none.
TEST_F(ClientCerts, ClientCertificateVariables) {
  start("optional_no_ca",
        "\n  location /v { return 200 \"$ssl_client_verify|$ssl_client_s_dn|"
        "$ssl_client_i_dn_legacy|$ssl_client_v_remain|$ssl_client_fingerprint\"; }");
  Response alice = get("alice", "/v");
  ASSERT_EQ(alice.status, 200);
  EXPECT_EQ(alice.body.rfind("SUCCESS|CN=alice|/CN=ca|", 0), 0u) << alice.body;
  const std::string fingerprint = alice.body.substr(alice.body.rfind('|') + 1);
  EXPECT_EQ(fingerprint.size(), 40u) << alice.body;
  EXPECT_EQ(fingerprint.find_first_not_of("0123456789abcdef"), std::string::npos) << alice.body;
  const std::string days = alice.body.substr(0, alice.body.rfind('|'));
  EXPECT_GT(std::stoi(days.substr(days.rfind('|') + 1)), 0) << alice.body;

  Response mallory = get("mallory", "/v");
  ASSERT_EQ(mallory.status, 200);
  EXPECT_EQ(mallory.body.rfind("FAILED:", 0), 0u) << mallory.body;
  EXPECT_NE(mallory.body.find("|CN=mallory|/CN=otherca|"), std::string::npos) << mallory.body;

  Response none = get("", "/v");
  ASSERT_EQ(none.status, 200);
  EXPECT_EQ(none.body, "NONE||||");
}

// $ssl_client_escaped_cert decodes to $ssl_client_raw_cert; $ssl_curves
// lists the groups the client offered, the negotiated one among them.
TEST_F(ClientCerts, EscapedCertificateAndOfferedCurves) {
  start("optional_no_ca",
        "\n  location /raw { return 200 $ssl_client_raw_cert; }"
        "\n  location /esc { return 200 $ssl_client_escaped_cert; }"
        "\n  location /curves { return 200 \"$ssl_curve|$ssl_curves\"; }");
  Response raw = get("alice", "/raw");
  Response esc = get("alice", "/esc");
  ASSERT_EQ(raw.status, 200);
  ASSERT_EQ(esc.status, 200);
  EXPECT_EQ(raw.body.rfind("-----BEGIN CERTIFICATE-----\n", 0), 0u) << raw.body;
  EXPECT_EQ(esc.body.find_first_of("\n /+=:"), std::string::npos) << esc.body;
  std::string decoded;
  for (std::size_t i = 0; i < esc.body.size(); ++i) {
    if (esc.body[i] == '%' && i + 2 < esc.body.size()) {
      decoded += static_cast<char>(std::stoi(esc.body.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      decoded += esc.body[i];
    }
  }
  EXPECT_EQ(decoded, raw.body);

  Response curves = get("alice", "/curves");
  ASSERT_EQ(curves.status, 200);
  const std::string chosen = curves.body.substr(0, curves.body.find('|'));
  const std::string offered = ":" + curves.body.substr(curves.body.find('|') + 1) + ":";
  EXPECT_FALSE(chosen.empty()) << curves.body;
  EXPECT_NE(offered.find(":" + chosen + ":"), std::string::npos) << curves.body;
}

TEST_F(ClientCerts, TheServerSendsItsAcceptableCaNames) {
  start("on");
  TlsClient c(port_);
  ASSERT_TRUE(c.handshake()) << c.error();
  STACK_OF(X509_NAME)* names = SSL_get_client_CA_list(c.ssl());
  ASSERT_NE(names, nullptr);
  ASSERT_EQ(sk_X509_NAME_num(names), 1);
  char cn[64] = {};
  X509_NAME_get_text_by_NID(sk_X509_NAME_value(names, 0), NID_commonName, cn, sizeof cn);
  EXPECT_STREQ(cn, "ca");
}

TEST_F(ClientCerts, VerifyClientWithoutACaFileIsAConfigurationError) {
  s_.write("conf/vigil.conf",
           "events {}\nhttp {\n" +
               test::tls_server_block(test::free_port(), "ssl_verify_client on;") + "}\n");
  auto [rc, out] = test::run({test::kVigil, "-p", s_.dir(), "-c", "conf/vigil.conf", "-t"});
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("no ssl_client_certificate for ssl_verify_client"), std::string::npos) << out;
}

// A Host naming another server block than the one SNI chose, when client
// certificates are checked by one of them: 421 Misdirected Request (RFC 9110
// §15.5.20), as nginx answers; the same names, or no verification, are served.
TEST_F(ClientCerts, HostOtherThanSniIsMisdirected) {
  port_ = test::free_port();
  ASSERT_TRUE(s_.start("access_log off;\n" +
                       test::tls_server_block(port_,
                                              "ssl_verify_client on;\n"
                                              "  ssl_client_certificate ../ca.crt;",
                                              "localhost") +
                       test::tls_server_block(port_, "", "other.test") +
                       test::tls_server_block(port_, "", "third.test")))
      << s_.output();
  auto request = [&](const std::string& sni, const std::string& host) {
    TlsOptions o;
    o.sni = sni;
    o.cert = s_.path("alice.crt");
    o.key = s_.path("alice.key");
    TlsClient c(port_, o);
    if (!c.handshake()) return Response{};
    if (!c.send(test::simple_get("/", host))) return Response{};
    return c.read_response();
  };
  EXPECT_EQ(request("localhost", "localhost").status, 200);
  Response r = request("localhost", "other.test");
  EXPECT_EQ(r.status, 421) << r.head;
  EXPECT_EQ(r.status_line, "HTTP/1.1 421 Misdirected Request");
  EXPECT_TRUE(s_.wait_output(
      "client attempted to request the server name different from the one that was negotiated"))
      << s_.output();
  // The Host's server checks certificates, the SNI's did not: 421 too.
  EXPECT_EQ(request("other.test", "localhost").status, 421);
  // Neither checks: Host chooses, as without TLS.
  EXPECT_EQ(request("other.test", "third.test").status, 200);
  // Host is the SNI name in another case and with a port: the same server.
  EXPECT_EQ(request("localhost", "LocalHost:443").status, 200);
}

}  // namespace
}  // namespace vigil
