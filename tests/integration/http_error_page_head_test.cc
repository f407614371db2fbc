// error_page for a request whose head was read but whose fields were
// refused (an invalid or duplicate Host, a bad Content-Length, Content-Length
// with chunked): as nginx, the server's error_page for the status runs with
// the request's URI, and the connection still closes after it. No body of
// such a request is read.
#include <gtest/gtest.h>

#include <string>

#include "http_harness.h"

namespace vigil::test {
namespace {

class ErrorPageHead : public ::testing::Test {
 protected:
  void SetUp() override {
    port_ = free_port();
    other_ = free_port();
    ASSERT_TRUE(server_.start(
        "server { listen 127.0.0.1:" + std::to_string(port_) +
        "; server_name on; absolute_redirect on; error_page 400 /return301;\n"
        "location /return301 { return 301 /redirect; } }\n"
        "server { listen 127.0.0.1:" +
        std::to_string(other_) +
        "; server_name other; error_page 400 /p?x=1;\n"
        "location /p { return 200 \"page $uri $args\\n\"; } }"))
        << server_.output();
  }

  VigilServer server_;
  int port_ = 0;
  int other_ = 0;
};

// An invalid Host: the page's redirect names the local address, as no host
// was given (http_absolute_redirect.t's "invalid host").
TEST_F(ErrorPageHead, InvalidHostGetsThePage) {
  Client c(port_);
  ASSERT_TRUE(c.send("GET /return301 HTTP/1.0\r\nHost: .\r\n\r\n"));
  Response r = c.read_response();
  EXPECT_EQ(r.status, 301);
  EXPECT_EQ(r.header("location"), "http://127.0.0.1:" + std::to_string(port_) + "/redirect");
  EXPECT_TRUE(c.closed_within(5000));
  EXPECT_TRUE(server_.wait_output("client sent invalid header")) << server_.output();
}

// The other refusals of the head's fields: the status stays 400, the body
// is the page's, and the connection closes; a body announced is not read
// (the bytes after the head are not taken for a request either).
TEST_F(ErrorPageHead, RefusedFieldsGetThePage) {
  for (const std::string head :
       {"GET /a HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
        "GET /a HTTP/1.1\r\nHost: a\r\nContent-Length: x\r\n\r\n",
        "GET /a HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n"
        "5\r\nhello\r\n0\r\n\r\nGET /b HTTP/1.1\r\nHost: a\r\n\r\n"}) {
    Client c(other_);
    ASSERT_TRUE(c.send(head));
    Response r = c.read_response();
    EXPECT_EQ(r.status, 400) << head;
    EXPECT_EQ(r.body, "page /p x=1\n") << head;
    EXPECT_EQ(r.header("connection"), "close") << head;
    EXPECT_TRUE(c.closed_within(5000)) << head;
    EXPECT_EQ(c.extra(), "") << head;
  }
}

}  // namespace
}  // namespace vigil::test
