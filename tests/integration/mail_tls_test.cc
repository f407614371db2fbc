// TLS in the mail proxy: "listen ... ssl" and STARTTLS / STLS (starttls on |
// only), with the ssl_* directives stream and http use; client certificates
// (ssl_verify_client) and the Auth-SSL-* lines of the auth_http request.
#include "integration/mail_harness.h"
#include "integration/tls_harness.h"

namespace vigil::test {
namespace {

class MailTls : public MailTest {
 protected:
  void SetUp() override {
    MailTest::SetUp();
    if (HasFatalFailure()) return;
    const std::string conf = server_.path("conf");
    ASSERT_TRUE(make_ca(conf, "ca"));
    ASSERT_TRUE(make_cert(conf, "mail", "proxy.test", "ca"));
  }
  static std::string certs() {
    return " ssl_certificate mail.crt;\n ssl_certificate_key mail.key;\n";
  }
};

TEST_F(MailTls, ImapOnAnSslPort) {
  ASSERT_TRUE(start(certs() + " server {\n  listen 127.0.0.1:0 ssl;\n  protocol imap;\n }\n"))
      << server_.output();
  expect_client("imap_ssl", server_.port());
  EXPECT_TRUE(peers_saw("IMAP-BACKEND 1 LOGIN \"alice\" \"secret\"")) << peers_output();
  EXPECT_EQ(server_.stop(), 0);
}

TEST_F(MailTls, StarttlsOnInAllThreeProtocols) {
  ASSERT_TRUE(start(certs() + " starttls on;\n"
                              " server {\n  listen 127.0.0.1:0;\n  protocol imap;\n }\n"
                              " server {\n  listen 127.0.0.1:0;\n  protocol pop3;\n }\n"
                              " server {\n  listen 127.0.0.1:0;\n  protocol smtp;\n }\n"))
      << server_.output();
  expect_client("imap_starttls", server_.port(0));
  expect_client("pop3_stls", server_.port(1));
  expect_client("smtp_starttls", server_.port(2));
  // The auth request says the client is on TLS.
  EXPECT_TRUE(peers_saw("SMTP-DATA hello through vigil")) << peers_output();
  EXPECT_EQ(server_.stop(), 0);
}

TEST_F(MailTls, StarttlsOnlyRefusesPlainLogins) {
  ASSERT_TRUE(start(certs() + " starttls only;\n"
                              " server {\n  listen 127.0.0.1:0;\n  protocol imap;\n }\n"
                              " server {\n  listen 127.0.0.1:0;\n  protocol smtp;\n }\n"))
      << server_.output();
  {
    Client c(server_.port(0));
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(read_n(c.fd(), 18, 3000), "* OK IMAP4 ready\r\n");
    ASSERT_TRUE(c.send("a1 CAPABILITY\r\n"));
    const std::string caps =
        "* CAPABILITY IMAP4 IMAP4rev1 UIDPLUS STARTTLS LOGINDISABLED\r\n"
        "a1 OK CAPABILITY completed\r\n";
    EXPECT_EQ(read_n(c.fd(), caps.size(), 3000), caps);
    ASSERT_TRUE(c.send("a2 LOGIN alice secret\r\n"));
    // nginx's answer: an invalid command (LOGINDISABLED told the client).
    const std::string bad = "a2 BAD invalid command\r\n";
    EXPECT_EQ(read_n(c.fd(), bad.size(), 3000), bad);
  }
  {
    Client c(server_.port(1));
    ASSERT_TRUE(c.ok());
    const std::string greeting = "220 proxy.test ESMTP ready\r\n";
    EXPECT_EQ(read_n(c.fd(), greeting.size(), 3000), greeting);
    ASSERT_TRUE(c.send("EHLO me\r\nAUTH PLAIN AGFsaWNlAHNlY3JldA==\r\n"));
    const std::string want =
        "250-proxy.test\r\n250 STARTTLS\r\n"
        "530 5.7.0 Must issue a STARTTLS command first\r\n";
    EXPECT_EQ(read_n(c.fd(), want.size(), 3000), want);
  }
  // After STARTTLS the login goes through.
  expect_client("imap_starttls", server_.port(0));
  expect_client("smtp_starttls", server_.port(1));
  EXPECT_EQ(server_.stop(), 0);
}

// `openssl x509 -noout <what>` of a certificate, the text after "=".
std::string x509_field(const std::string& dir, const std::string& file,
                       const std::vector<std::string>& what) {
  std::vector<std::string> argv{"openssl", "x509", "-in", file, "-noout"};
  argv.insert(argv.end(), what.begin(), what.end());
  auto [rc, out] = run(argv, dir);
  EXPECT_EQ(rc, 0) << out;
  auto eq = out.find('=');
  if (eq == std::string::npos) return out;
  std::string v = out.substr(eq + 1);
  while (!v.empty() && (v.back() == '\n' || v.back() == '\r')) v.pop_back();
  return v;
}

// nginx bounds a mail handshake by the server's `timeout`
// (ngx_mail_ssl_init_connection): a client that opens the SSL port and says
// nothing is closed then, not after a fixed 60 s.
TEST_F(MailTls, HandshakeWithoutItsOwnTimeoutEndsAtTheServersTimeout) {
  ASSERT_TRUE(start(certs() +
                    " server {\n  listen 127.0.0.1:0 ssl;\n  protocol imap;\n  timeout 1s;\n }\n"))
      << server_.output();
  Client silent(server_.port());
  ASSERT_TRUE(silent.ok());
  // A generous bound, well under the 60 s a wrong default would give.
  EXPECT_TRUE(silent.closed_within(15000)) << server_.output();
  EXPECT_TRUE(server_.wait_output("client timed out in SSL handshake", 5000)) << server_.output();
  expect_client("imap_ssl", server_.port());
  EXPECT_EQ(server_.stop(), 0);
}

TEST_F(MailTls, ClientCertificateHeadersToAuthHttp) {
  const std::string conf = server_.path("conf");
  ASSERT_TRUE(make_cert(conf, "client", "client.test", "ca"));
  ASSERT_TRUE(make_ca(conf, "rogue"));
  ASSERT_TRUE(make_cert(conf, "stranger", "stranger.test", "rogue"));
  ASSERT_TRUE(start(certs() +
                    " auth_http_pass_client_cert on;\n"
                    " ssl_client_certificate ca.crt;\n"
                    " server {\n  listen 127.0.0.1:0 ssl;\n  protocol imap;\n"
                    "  ssl_verify_client on;\n }\n"
                    " server {\n  listen 127.0.0.1:0;\n  protocol imap;\n  starttls on;\n"
                    "  ssl_verify_client optional;\n  auth_http_pass_client_cert off;\n }\n"
                    " server {\n  listen 127.0.0.1:0 ssl;\n  protocol imap;\n }\n"
                    " server {\n  listen 127.0.0.1:0 ssl;\n  protocol pop3;\n"
                    "  ssl_verify_client on;\n }\n"
                    " server {\n  listen 127.0.0.1:0 ssl;\n  protocol smtp;\n"
                    "  ssl_verify_client optional;\n }\n"))
      << server_.output();
  const std::string crt = conf + "/client.crt", key = conf + "/client.key";
  // The serial as OpenSSL prints it (hex), the SHA-1 fingerprint in lower
  // case without colons (nginx's $ssl_client_fingerprint).
  const std::string serial = x509_field(conf, crt, {"-serial"});
  std::string fp;
  for (char ch : x509_field(conf, crt, {"-fingerprint", "-sha1"})) {
    if (ch != ':') fp += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  }
  ASSERT_EQ(fp.size(), 40u) << fp;
  const std::string facts =
      "verify=SUCCESS subject=CN=client.test issuer=CN=ca serial=" + serial + " fingerprint=" + fp;

  // ssl_verify_client on, a good certificate: everything, the PEM too (the
  // auth server checks that its SHA-1 is the fingerprint).
  expect_client("imap_ssl_cert", server_.port(0), {crt, key});
  EXPECT_TRUE(peers_saw("AUTH-SSL on protocol=TLSv1.3 cipher=TLS_")) << peers_output();
  EXPECT_TRUE(peers_saw(facts + " cert=" + fp)) << peers_output();
  // None, or one of another CA: the protocol's error instead of the greeting.
  expect_client("ssl_refused", server_.port(0), {"* BYE No required SSL certificate"});
  expect_client("ssl_refused", server_.port(0),
                {"* BYE SSL certificate error", conf + "/stranger.crt", conf + "/stranger.key"});
  // POP3's and SMTP's words for the same (optional: none is fine, a bad one is not).
  expect_client("ssl_refused", server_.port(3), {"-ERR No required SSL certificate"});
  expect_client(
      "ssl_refused", server_.port(4),
      {"421 4.7.1 SSL certificate error", conf + "/stranger.crt", conf + "/stranger.key"});
  EXPECT_TRUE(server_.wait_output("client sent no required SSL certificate", 5000));
  EXPECT_TRUE(server_.wait_output("client SSL certificate verify error", 5000));

  // After STARTTLS, optional: the facts without the PEM (pass_client_cert
  // off in that server); without a certificate, NONE and nothing else.
  expect_client("imap_starttls", server_.port(1), {crt, key});
  EXPECT_TRUE(peers_saw(facts + " cert=-")) << peers_output();
  expect_client("imap_starttls", server_.port(1));
  EXPECT_TRUE(peers_saw("verify=NONE subject=- issuer=- serial=- fingerprint=- cert=-"))
      << peers_output();
  // Without ssl_verify_client: only Auth-SSL and the protocol and cipher.
  expect_client("imap_ssl", server_.port(2));
  EXPECT_TRUE(peers_saw("verify=- subject=- issuer=- serial=- fingerprint=- cert=-"))
      << peers_output();
  EXPECT_EQ(server_.stop(), 0);
}

}  // namespace
}  // namespace vigil::test
