// The IMAP front end of the mail proxy with imaplib as the client.
#include "integration/mail_harness.h"

namespace vigil::test {
namespace {

class MailImap : public MailTest {
 protected:
  bool start_imap(const std::string& extra = "") {
    return start(" server {\n  listen 127.0.0.1:0;\n  protocol imap;\n" + extra + " }\n");
  }
};

TEST_F(MailImap, LoginSelectLogoutThroughTheBackend) {
  ASSERT_TRUE(start_imap("  auth_http_header X-Test imap-header;\n")) << server_.output();
  expect_client("imap", server_.port());
  // The auth request as nginx sends it, and the backend login with the
  // password the auth server gave.
  EXPECT_TRUE(
      peers_saw("AUTH method=plain user=alice pass=secret proto=imap attempt=1 "
                "client=127.0.0.1 host=[UNAVAILABLE] x=imap-header path=/auth"))
      << peers_output();
  EXPECT_TRUE(peers_saw("IMAP-BACKEND 1 LOGIN \"alice\" \"secret\"")) << peers_output();
  EXPECT_TRUE(peers_saw("SELECT INBOX")) << peers_output();
  EXPECT_TRUE(server_.wait_output("client logged in, client: 127.0.0.1, login: \"alice\""))
      << server_.output();
  EXPECT_EQ(server_.stop(), 0);
}

TEST_F(MailImap, LoginWithLiterals) {
  ASSERT_TRUE(start_imap()) << server_.output();
  expect_client("imap_literal", server_.port());
  EXPECT_TRUE(peers_saw("AUTH method=plain user=alice pass=secret proto=imap")) << peers_output();
  EXPECT_TRUE(peers_saw("IMAP-BACKEND 1 LOGIN \"alice\" \"secret\"")) << peers_output();
  EXPECT_EQ(server_.stop(), 0);
}

TEST_F(MailImap, ALiteralLargerThanTheBufferIsRefused) {
  ASSERT_TRUE(start_imap("  imap_client_buffer 1k;\n")) << server_.output();
  expect_client("imap_literal_too_long", server_.port());
  EXPECT_TRUE(server_.wait_output("client sent too long command")) << server_.output();
  EXPECT_EQ(server_.stop(), 0);
}

TEST_F(MailImap, ProxyProtocolHeaderToTheBackend) {
  ASSERT_TRUE(start_imap("  proxy_protocol on;\n")) << server_.output();
  expect_client("imap", server_.port());
  // "PROXY TCP4 <client> <local> <client port> <local port>", before the LOGIN.
  const std::string want = "IMAP-BACKEND PROXY TCP4 127.0.0.1 127.0.0.1 ";
  ASSERT_TRUE(peers_saw(want)) << peers_output();
  const std::string out = peers_output();
  const std::size_t at = out.find(want);
  const std::string line = out.substr(at, out.find('\n', at) - at);
  EXPECT_TRUE(std::regex_match(line, std::regex(".* \\d+ " + std::to_string(server_.port()))))
      << line;
  EXPECT_LT(at, out.find("IMAP-BACKEND 1 LOGIN")) << out;
  EXPECT_EQ(server_.stop(), 0);
}

TEST_F(MailImap, AuthenticatePlainAndCramMd5) {
  ASSERT_TRUE(start_imap("  imap_auth plain cram-md5;\n")) << server_.output();
  expect_client("imap_authenticate", server_.port());
  expect_client("imap_cram", server_.port());
  EXPECT_TRUE(peers_saw("AUTH method=cram-md5 user=alice")) << peers_output();
  EXPECT_EQ(server_.stop(), 0);
}

TEST_F(MailImap, CapabilitiesFollowTheDirectives) {
  ASSERT_TRUE(start_imap("  imap_capabilities IMAP4rev1 SPECIAL-USE;\n  imap_auth login;\n"))
      << server_.output();
  Client c(server_.port());
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(read_n(c.fd(), 18, 3000), "* OK IMAP4 ready\r\n");
  ASSERT_TRUE(c.send("a1 CAPABILITY\r\n"));
  const std::string want =
      "* CAPABILITY IMAP4rev1 SPECIAL-USE AUTH=LOGIN\r\na1 OK CAPABILITY completed\r\n";
  EXPECT_EQ(read_n(c.fd(), want.size(), 3000), want);
  EXPECT_EQ(server_.stop(), 0);
}

TEST_F(MailImap, FailedLoginClosesWithoutAuthWait) {
  ASSERT_TRUE(start_imap()) << server_.output();
  expect_client("imap_bad_login", server_.port());
  EXPECT_TRUE(
      server_.wait_output("client login failed: \"Invalid login or password\" while in "
                          "http auth state"))
      << server_.output();
  EXPECT_EQ(server_.stop(), 0);
}

TEST_F(MailImap, AuthWaitLetsTheClientTryAgain) {
  ASSERT_TRUE(start_imap()) << server_.output();
  expect_client("imap_wait_retry", server_.port());
  EXPECT_TRUE(peers_saw("user=alice pass=secret proto=imap attempt=2")) << peers_output();
  EXPECT_EQ(server_.stop(), 0);
}

TEST_F(MailImap, BackendRefusalIsHiddenUnlessProxyPassErrorMessage) {
  ASSERT_TRUE(start_imap()) << server_.output();
  expect_client("imap_backend_refuses", server_.port(), {"internal server error"});
  EXPECT_TRUE(server_.wait_output("upstream sent invalid response")) << server_.output();
  EXPECT_EQ(server_.stop(), 0);
  ASSERT_TRUE(start_imap("  proxy_pass_error_message on;\n")) << server_.output();
  expect_client("imap_backend_refuses", server_.port(), {"backend says no"});
  EXPECT_EQ(server_.stop(), 0);
}

TEST_F(MailImap, StrictLinesAndMaxErrors) {
  ASSERT_TRUE(start_imap("  max_errors 2;\n  imap_client_buffer 128;\n")) << server_.output();
  {
    Client c(server_.port());
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(read_n(c.fd(), 18, 3000), "* OK IMAP4 ready\r\n");
    ASSERT_TRUE(c.send("a1 FROB\r\n"));
    EXPECT_EQ(read_n(c.fd(), 24, 3000), "a1 BAD invalid command\r\n");
    ASSERT_TRUE(c.send("no-command-here\r\n"));
    // The second error reaches max_errors: answered, then closed.
    EXPECT_EQ(read_n(c.fd(), 100, 3000), "* BAD invalid command\r\n");
  }
  {
    Client c(server_.port());
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(read_n(c.fd(), 18, 3000), "* OK IMAP4 ready\r\n");
    ASSERT_TRUE(c.send("a1 LOGIN " + std::string(200, 'x') + "\r\n"));
    EXPECT_EQ(read_n(c.fd(), 100, 3000), "* BAD line is too long\r\n");
    EXPECT_TRUE(server_.wait_output("client sent too long command")) << server_.output();
  }
  {
    Client c(server_.port());
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(read_n(c.fd(), 18, 3000), "* OK IMAP4 ready\r\n");
    // A literal is taken (LoginWithLiterals), but a NUL in it is refused,
    // and so is a login with a CR or LF, which a quoted string to the
    // backend could not carry.
    ASSERT_TRUE(c.send("a1 LOGIN {5}\r\n"));
    EXPECT_EQ(read_n(c.fd(), 12, 3000), "+ go ahead\r\n");
    ASSERT_TRUE(c.send(std::string("al\0ce x\r\n", 10)));
    EXPECT_EQ(read_n(c.fd(), 23, 3000), "* BAD invalid command\r\n");
  }
  {
    Client c(server_.port());
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(read_n(c.fd(), 18, 3000), "* OK IMAP4 ready\r\n");
    ASSERT_TRUE(c.send("a2 LOGIN {5+}\r\nal\r\ne x\r\n"));
    EXPECT_EQ(read_n(c.fd(), 24, 3000), "a2 BAD invalid command\r\n");
  }
  EXPECT_EQ(server_.stop(), 0);
}

TEST_F(MailImap, ClientTimeout) {
  ASSERT_TRUE(start_imap("  timeout 300ms;\n")) << server_.output();
  Client c(server_.port());
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(read_n(c.fd(), 100, 5000), "* OK IMAP4 ready\r\n");  // then EOF
  EXPECT_TRUE(server_.wait_output("client timed out")) << server_.output();
  EXPECT_EQ(server_.stop(), 0);
}

TEST_F(MailImap, ConfigurationErrors) {
  const std::string base = "daemon off;\nevents {}\nmail {\n";
  struct Case {
    std::string body, error;
  } cases[] = {
      {"server { listen 127.0.0.1:1; protocol imap; }", "no \"auth_http\" is defined for server"},
      {"auth_http 127.0.0.1:1; server { listen 127.0.0.1:1; }", "unknown mail protocol for server"},
      {"auth_http 127.0.0.1:1; server { listen 127.0.0.1:1; protocol imap; imap_auth apop; }",
       "invalid value \"apop\""},
      {"auth_http 127.0.0.1:1; server { listen 127.0.0.1:1; protocol smtp; starttls maybe; }",
       "invalid value \"maybe\""},
      {"auth_http 127.0.0.1:1; server { protocol pop3; }", "no \"listen\" is defined for server"},
      {"auth_http 127.0.0.1:1; server { listen 127.0.0.1:1; protocol imap; imap_auth none; }",
       "invalid value \"none\""},
      {"auth_http 127.0.0.1:1; auth_http_pass_client_cert yes; server { listen 127.0.0.1:1; }",
       "invalid value \"yes\""},
      {"auth_http https://127.0.0.1/a; server { listen 127.0.0.1:1; protocol imap; }",
       "https is not supported in \"auth_http\""},
  };
  for (const Case& k : cases) {
    server_.write_conf(base + k.body + "\n}\n");
    auto [rc, out] = run({kVigil, "-p", server_.dir(), "-c", "conf/vigil.conf", "-t"});
    EXPECT_NE(rc, 0) << k.body;
    EXPECT_NE(out.find(k.error), std::string::npos) << k.body << "\n" << out;
  }
}

}  // namespace
}  // namespace vigil::test
