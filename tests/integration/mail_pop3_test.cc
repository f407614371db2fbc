// The POP3 front end of the mail proxy with poplib as the client.
#include "integration/mail_harness.h"

namespace vigil::test {
namespace {

class MailPop3 : public MailTest {
 protected:
  bool start_pop3(const std::string& extra = "") {
    return start(" server {\n  listen 127.0.0.1:0;\n  protocol pop3;\n" + extra + " }\n");
  }
};

TEST_F(MailPop3, UserPassStatQuit) {
  ASSERT_TRUE(start_pop3()) << server_.output();
  expect_client("pop3", server_.port());
  EXPECT_TRUE(peers_saw("AUTH method=plain user=alice pass=secret proto=pop3")) << peers_output();
  EXPECT_TRUE(peers_saw("POP3-BACKEND USER alice")) << peers_output();
  EXPECT_TRUE(peers_saw("POP3-BACKEND PASS secret")) << peers_output();
  EXPECT_TRUE(peers_saw("POP3-BACKEND STAT")) << peers_output();
  EXPECT_EQ(server_.stop(), 0);
}

TEST_F(MailPop3, ApopSendsTheSaltToTheAuthServer) {
  ASSERT_TRUE(start_pop3("  pop3_auth plain apop;\n")) << server_.output();
  expect_client("pop3_apop", server_.port());
  EXPECT_TRUE(peers_saw("AUTH method=apop user=alice")) << peers_output();
  EXPECT_EQ(server_.stop(), 0);
}

TEST_F(MailPop3, FailedLogin) {
  ASSERT_TRUE(start_pop3()) << server_.output();
  expect_client("pop3_bad_login", server_.port());
  EXPECT_EQ(server_.stop(), 0);
}

TEST_F(MailPop3, CapaAndAuthList) {
  ASSERT_TRUE(start_pop3("  pop3_capabilities TOP USER;\n  pop3_auth plain login;\n"))
      << server_.output();
  Client c(server_.port());
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(read_n(c.fd(), 16, 3000), "+OK POP3 ready\r\n");
  ASSERT_TRUE(c.send("CAPA\r\n"));
  const std::string caps = "+OK Capability list follows\r\nTOP\r\nUSER\r\nSASL PLAIN LOGIN\r\n.\r\n";
  EXPECT_EQ(read_n(c.fd(), caps.size(), 3000), caps);
  ASSERT_TRUE(c.send("AUTH\r\n"));
  // nginx's order, CAPA's too: PLAIN, LOGIN, CRAM-MD5, EXTERNAL.
  const std::string list = "+OK methods supported:\r\nPLAIN\r\nLOGIN\r\n.\r\n";
  EXPECT_EQ(read_n(c.fd(), list.size(), 3000), list);
  ASSERT_TRUE(c.send("PASS before-user\r\n"));
  EXPECT_EQ(read_n(c.fd(), 22, 3000), "-ERR invalid command\r\n");
  ASSERT_TRUE(c.send("QUIT\r\n"));
  EXPECT_EQ(read_n(c.fd(), 100, 3000), "+OK\r\n");
  EXPECT_EQ(server_.stop(), 0);
}

TEST_F(MailPop3, AuthListsEveryMechanismInNginxsOrder) {
  ASSERT_TRUE(start_pop3("  pop3_auth plain apop cram-md5 external;\n")) << server_.output();
  Client c(server_.port());
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c.send("AUTH\r\n"));
  // apop is no SASL mechanism; plain brings LOGIN.
  const std::string list =
      "+OK methods supported:\r\nPLAIN\r\nLOGIN\r\nCRAM-MD5\r\nEXTERNAL\r\n.\r\n";
  std::string got = read_n(c.fd(), 1024, 3000);
  got.erase(0, got.find("+OK methods"));  // after the greeting
  EXPECT_EQ(got, list);
  EXPECT_EQ(server_.stop(), 0);
}

}  // namespace
}  // namespace vigil::test
