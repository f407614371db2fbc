// TLS in the mail proxy: "listen ... ssl" and STARTTLS / STLS (starttls on |
// only), with the ssl_* directives stream and http use.
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
  ASSERT_TRUE(start(certs() +
                    " starttls on;\n"
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
  ASSERT_TRUE(start(certs() +
                    " starttls only;\n"
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
    const std::string want = "250-proxy.test\r\n250 STARTTLS\r\n"
                             "530 5.7.0 Must issue a STARTTLS command first\r\n";
    EXPECT_EQ(read_n(c.fd(), want.size(), 3000), want);
  }
  // After STARTTLS the login goes through.
  expect_client("imap_starttls", server_.port(0));
  expect_client("smtp_starttls", server_.port(1));
  EXPECT_EQ(server_.stop(), 0);
}

}  // namespace
}  // namespace vigil::test
