// The SMTP front end of the mail proxy with smtplib as the client.
#include "integration/mail_harness.h"

namespace vigil::test {
namespace {

class MailSmtp : public MailTest {
 protected:
  bool start_smtp(const std::string& extra = "") {
    return start(" server {\n  listen 127.0.0.1:0;\n  protocol smtp;\n" + extra + " }\n");
  }
};

TEST_F(MailSmtp, AuthPlainXclientAndAMessage) {
  ASSERT_TRUE(start_smtp()) << server_.output();
  expect_client("smtp", server_.port());
  EXPECT_TRUE(peers_saw("AUTH method=plain user=alice pass=secret proto=smtp")) << peers_output();
  // xclient on (the default): EHLO with our name, XCLIENT, then the client's EHLO.
  EXPECT_TRUE(peers_saw("SMTP-BACKEND EHLO proxy.test")) << peers_output();
  EXPECT_TRUE(peers_saw("SMTP-BACKEND XCLIENT ADDR=127.0.0.1 LOGIN=alice NAME=[UNAVAILABLE]"))
      << peers_output();
  EXPECT_TRUE(peers_saw("SMTP-BACKEND EHLO client.example")) << peers_output();
  EXPECT_TRUE(peers_saw("SMTP-DATA hello through vigil")) << peers_output();
  EXPECT_EQ(server_.stop(), 0);
}

TEST_F(MailSmtp, AuthLoginWithoutXclientAndWithProxySmtpAuth) {
  ASSERT_TRUE(start_smtp("  xclient off;\n  proxy_smtp_auth on;\n")) << server_.output();
  expect_client("smtp_login", server_.port());
  EXPECT_TRUE(peers_saw("AUTH method=login user=alice pass=secret")) << peers_output();
  // AUTH PLAIN of "\0alice\0secret" to the backend.
  EXPECT_TRUE(peers_saw("SMTP-BACKEND AUTH PLAIN AGFsaWNlAHNlY3JldA==")) << peers_output();
  EXPECT_EQ(peers_output().find("XCLIENT"), std::string::npos) << peers_output();
  EXPECT_EQ(server_.stop(), 0);
}

TEST_F(MailSmtp, FailuresAuthErrorCodeAndMailBeforeAuth) {
  ASSERT_TRUE(start_smtp()) << server_.output();
  expect_client("smtp_bad_login", server_.port());
  expect_client("smtp_wait", server_.port());
  expect_client("smtp_mail_before_auth", server_.port());
  EXPECT_EQ(server_.stop(), 0);
}

TEST_F(MailSmtp, AuthNoneSendsTheEnvelopeToAuthHttpAndTheBackend) {
  ASSERT_TRUE(start_smtp("  smtp_auth login plain none;\n")) << server_.output();
  expect_client("smtp_none", server_.port());
  // auth_http is asked with the envelope (nginx's Auth-SMTP-From/To), Auth-Method none.
  EXPECT_TRUE(peers_saw("AUTH method=none user= pass= proto=smtp")) << peers_output();
  EXPECT_TRUE(
      peers_saw("AUTH-SMTP helo=client.example from=mail FROM:<alice@example.com> "
                "to=rcpt TO:<bob@example.com>"))
      << peers_output();
  // The backend: EHLO, XCLIENT without LOGIN, the client's EHLO, then the
  // client's MAIL and RCPT lines as sent, then the relayed message.
  EXPECT_TRUE(peers_saw("SMTP-BACKEND XCLIENT ADDR=127.0.0.1 NAME=[UNAVAILABLE]"))
      << peers_output();
  EXPECT_TRUE(peers_saw("SMTP-BACKEND mail FROM:<alice@example.com>")) << peers_output();
  EXPECT_TRUE(peers_saw("SMTP-BACKEND rcpt TO:<bob@example.com>")) << peers_output();
  EXPECT_TRUE(peers_saw("SMTP-DATA hello without auth")) << peers_output();
  // A sequence error, and an envelope the auth server refuses.
  expect_client("smtp_none_refused", server_.port());
  EXPECT_TRUE(peers_saw("from=mail FROM:<mallory@example.com>")) << peers_output();
  EXPECT_EQ(server_.stop(), 0);
}

TEST_F(MailSmtp, EhloListsCapabilitiesAndAuth) {
  ASSERT_TRUE(start_smtp(
      "  smtp_capabilities \"SIZE 10485760\" 8BITMIME;\n  smtp_auth login plain cram-md5;\n"))
      << server_.output();
  Client c(server_.port());
  ASSERT_TRUE(c.ok());
  const std::string greeting = "220 proxy.test ESMTP ready\r\n";
  EXPECT_EQ(read_n(c.fd(), greeting.size(), 3000), greeting);
  ASSERT_TRUE(c.send("EHLO me\r\n"));
  const std::string ehlo =
      "250-proxy.test\r\n250-SIZE 10485760\r\n250-8BITMIME\r\n250 AUTH PLAIN LOGIN CRAM-MD5\r\n";
  EXPECT_EQ(read_n(c.fd(), ehlo.size(), 3000), ehlo);
  ASSERT_TRUE(c.send("QUIT\r\n"));
  EXPECT_EQ(read_n(c.fd(), 100, 3000), "221 2.0.0 Bye\r\n");
  EXPECT_EQ(server_.stop(), 0);
}

TEST_F(MailSmtp, GreetingDelayRejectsEarlyTalkers) {
  ASSERT_TRUE(start_smtp("  smtp_greeting_delay 500ms;\n")) << server_.output();
  {
    Client c(server_.port());
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE(c.send("EHLO spammer\r\n"));
    EXPECT_EQ(read_n(c.fd(), 100, 3000), "554 5.7.1 Client was rejected before greeting\r\n");
    EXPECT_TRUE(server_.wait_output("client was rejected before greeting")) << server_.output();
  }
  // A patient client gets the greeting and goes on as usual.
  expect_client("smtp", server_.port());
  EXPECT_EQ(server_.stop(), 0);
}

}  // namespace
}  // namespace vigil::test
