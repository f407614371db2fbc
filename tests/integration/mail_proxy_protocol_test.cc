// The mail proxy on "listen ... proxy_protocol": the header is read before
// the greeting, auth_http gets its addresses (Proxy-Protocol-* fields),
// set_real_ip_from makes its source the client (Client-IP and the PROXY line
// to the backend), and a broken header closes the connection unanswered.
#include "integration/mail_harness.h"

namespace vigil::test {
namespace {

class MailProxyProtocol : public MailTest {};

const std::string kHeader = "PROXY TCP4 192.0.2.1 192.0.2.2 123 5678\\r\\n";

TEST_F(MailProxyProtocol, TheHeaderComesFirstAndAuthHttpGetsIt) {
  ASSERT_TRUE(start(" proxy_protocol on;\n server {\n  listen 127.0.0.1:0 proxy_protocol;\n"
                    "  protocol imap;\n }\n"))
      << server_.output();
  expect_client("imap_proxy_protocol", server_.port(), {kHeader});
  // Not trusted: the client stays the peer, the header's addresses go to
  // the auth server beside it.
  EXPECT_TRUE(peers_saw("AUTH method=plain user=alice pass=secret proto=imap attempt=1 "
                        "client=127.0.0.1 "))
      << peers_output();
  EXPECT_TRUE(peers_saw("AUTH-PP addr=192.0.2.1 port=123 server=192.0.2.2:5678"))
      << peers_output();
  EXPECT_TRUE(peers_saw("IMAP-BACKEND PROXY TCP4 127.0.0.1 127.0.0.1 ")) << peers_output();
  EXPECT_EQ(server_.stop(), 0);
}

TEST_F(MailProxyProtocol, SetRealIpFromMakesTheHeaderTheClient) {
  ASSERT_TRUE(start(" proxy_protocol on;\n server {\n  listen 127.0.0.1:0 proxy_protocol;\n"
                    "  protocol imap;\n  set_real_ip_from 127.0.0.1/32;\n }\n"))
      << server_.output();
  expect_client("imap_proxy_protocol", server_.port(), {kHeader});
  EXPECT_TRUE(peers_saw("client=192.0.2.1 ")) << peers_output();
  EXPECT_TRUE(peers_saw("IMAP-BACKEND PROXY TCP4 192.0.2.1 127.0.0.1 123 " +
                        std::to_string(server_.port())))
      << peers_output();
  EXPECT_TRUE(server_.wait_output("client logged in, client: 192.0.2.1")) << server_.output();
  EXPECT_EQ(server_.stop(), 0);
}

TEST_F(MailProxyProtocol, ABrokenHeaderGetsNoGreeting) {
  ASSERT_TRUE(start(" server {\n  listen 127.0.0.1:0 proxy_protocol;\n  protocol imap;\n }\n"))
      << server_.output();
  Client c(server_.port());
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c.send("a LOGIN alice secret\r\n"));
  EXPECT_TRUE(c.closed_within(5000));
  EXPECT_EQ(c.extra(), "");
  EXPECT_TRUE(server_.wait_output("broken header: \"a LOGIN alice secret")) << server_.output();
  EXPECT_EQ(server_.stop(), 0);
}

}  // namespace
}  // namespace vigil::test
