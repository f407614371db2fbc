// mail_limit_conn: sessions per client address in each worker.
#include "integration/mail_harness.h"

namespace vigil::test {
namespace {

TEST_F(MailTest, LimitConnPerClientAddress) {
  // An http server for /metrics too: its listener comes first (modules' order).
  ASSERT_TRUE(start(" mail_limit_conn 2;\n server {\n  listen 127.0.0.1:0;\n  protocol pop3;\n }\n",
                    "http {\n server {\n  listen 127.0.0.1:0;\n  location = /metrics { metrics; }\n }\n}\n"))
      << server_.output();
  const int http_port = server_.port(0);
  const int port = server_.port(1);
  Client a(port), b(port);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(read_n(a.fd(), 16, 3000), "+OK POP3 ready\r\n");
  EXPECT_EQ(read_n(b.fd(), 16, 3000), "+OK POP3 ready\r\n");
  {
    Client c(port);
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(read_n(c.fd(), 100, 3000), "-ERR too many connections\r\n");  // then closed
  }
  EXPECT_TRUE(server_.wait_output("limiting connections by mail_limit_conn 2, client: 127.0.0.1"))
      << server_.output();
  // A session that ends frees its place.
  ASSERT_TRUE(a.send("QUIT\r\n"));
  EXPECT_EQ(read_n(a.fd(), 100, 3000), "+OK\r\n");
  EXPECT_TRUE(wait_until([&] {
    Client d(port);
    // QUIT's answer is sent before the session ends, and the end frees the place.
    return d.ok() && read_n(d.fd(), 16, 3000) == "+OK POP3 ready\r\n" && d.send("QUIT\r\n") &&
           read_n(d.fd(), 100, 3000) == "+OK\r\n";
  }, 5000)) << server_.output();
  expect_client("pop3", port);  // the second place, while b is still open
  // The counters of /metrics: 5 sessions (a, b, c, d, the client), one
  // refused, one login accepted and relayed.
  Response r = get(http_port, simple_get("/metrics"));
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("vigil_mail_sessions_total 5\n"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("vigil_mail_limited_total 1\n"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("vigil_mail_auth_ok_total 1\n"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("vigil_mail_relayed_total 1\n"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("vigil_mail_auth_failed_total 0\n"), std::string::npos) << r.body;
  EXPECT_EQ(server_.stop(), 0);
}

}  // namespace
}  // namespace vigil::test
