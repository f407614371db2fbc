// Pipelining (RFC 9112 §9.3.2): responses in request order, request bodies
// (Content-Length and chunked) read and thrown away so the next request is
// parsed from the right byte, requests split at every byte, 100-continue.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "http_harness.h"

namespace vigil {
namespace {

using test::Client;
using test::Response;
using test::VigilServer;

class HttpPipeline : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < 10; ++i)
      server_.write("html/" + std::to_string(i) + ".txt", "file " + std::to_string(i) + "\n");
    ASSERT_TRUE(server_.start("server {\n listen 127.0.0.1:" + std::to_string(port_) +
                              ";\n root html;\n}\n"))
        << server_.output();
    port_ = server_.port();
  }
  VigilServer server_;
  int port_ = 0;
};

TEST_F(HttpPipeline, ResponsesComeInRequestOrder) {
  Client c(port_);
  std::string all;
  for (int i = 0; i < 10; ++i) all += test::simple_get("/" + std::to_string(i) + ".txt");
  all += test::simple_get("/missing");
  all += "HEAD /3.txt HTTP/1.1\r\nHost: x\r\n\r\n";
  all += test::simple_get("/9.txt");
  ASSERT_TRUE(c.send(all));
  for (int i = 0; i < 10; ++i) {
    Response r = c.read_response();
    ASSERT_TRUE(r.complete) << i;
    EXPECT_EQ(r.body, "file " + std::to_string(i) + "\n");
  }
  EXPECT_EQ(c.read_response().status, 404);
  Response head = c.read_response(true);
  EXPECT_EQ(head.status, 200);
  EXPECT_EQ(head.header("content-length"), "7");
  EXPECT_EQ(c.read_response().body, "file 9\n");
}

TEST_F(HttpPipeline, BodiesWithContentLengthAndChunkedAreSkipped) {
  Client c(port_);
  std::string all;
  all += "POST /1.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\nGET /2.txt ";
  all += test::simple_get("/3.txt");
  all +=
      "POST /4.txt HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5\r\nGET /\r\n3;ext=1\r\nabc\r\n0\r\nTrailer: t\r\n\r\n";
  all += test::simple_get("/5.txt");
  ASSERT_TRUE(c.send(all));
  EXPECT_EQ(c.read_response().status, 405);
  EXPECT_EQ(c.read_response().body, "file 3\n");
  EXPECT_EQ(c.read_response().status, 405);
  EXPECT_EQ(c.read_response().body, "file 5\n");
}

TEST_F(HttpPipeline, BodyArrivingLaterIsReadBeforeTheAnswer) {
  Client c(port_);
  ASSERT_TRUE(c.send("POST /1.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n"));
  std::string body(100000, 'b');
  // In pieces, with pauses: the server waits for all of it.
  for (std::size_t off = 0; off < body.size(); off += 25000) {
    ::usleep(20000);
    ASSERT_TRUE(c.send(std::string_view(body).substr(off, 25000)));
  }
  ASSERT_TRUE(c.send(test::simple_get("/6.txt")));
  EXPECT_EQ(c.read_response().status, 405);
  EXPECT_EQ(c.read_response().body, "file 6\n");

  // Chunked, also in pieces, ending with the next request in the same write.
  ASSERT_TRUE(c.send("POST /1.txt HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"));
  for (int i = 0; i < 5; ++i) {
    ::usleep(10000);
    ASSERT_TRUE(c.send("10\r\n0123456789abcdef\r\n"));
  }
  ASSERT_TRUE(c.send("0\r\n\r\n" + test::simple_get("/7.txt")));
  EXPECT_EQ(c.read_response().status, 405);
  EXPECT_EQ(c.read_response().body, "file 7\n");
}

TEST_F(HttpPipeline, RequestsArrivingOneByteAtATime) {
  Client c(port_);
  int one = 1;
  ::setsockopt(c.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  const std::string req =
      "GET /8.txt HTTP/1.1\r\nHost: example\r\nUser-Agent: slow\r\n\r\n" +
      std::string("POST /1.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc") +
      test::simple_get("/2.txt");
  for (char ch : req) {
    ASSERT_TRUE(c.send(std::string_view(&ch, 1)));
    ::usleep(500);
  }
  Response r = c.read_response();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "file 8\n");
  EXPECT_EQ(c.read_response().status, 405);
  EXPECT_EQ(c.read_response().body, "file 2\n");
}

TEST_F(HttpPipeline, ExpectContinueGetsAnInterimResponse) {
  Client c(port_);
  ASSERT_TRUE(
      c.send("POST /1.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n"
             "Expect: 100-continue\r\n\r\n"));
  Response cont = c.read_response(true);
  EXPECT_EQ(cont.status_line, "HTTP/1.1 100 Continue");
  ASSERT_TRUE(c.send("data" + test::simple_get("/4.txt")));
  EXPECT_EQ(c.read_response().status, 405);
  EXPECT_EQ(c.read_response().body, "file 4\n");
}

TEST_F(HttpPipeline, ManyClientsAtOnce) {
  std::vector<std::thread> threads;
  std::atomic<int> good{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      Client c(port_);
      for (int i = 0; i < 50; ++i) {
        const int n = (t + i) % 10;
        if (!c.send(test::simple_get("/" + std::to_string(n) + ".txt"))) return;
        if (c.read_response().body == "file " + std::to_string(n) + "\n") ++good;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(good.load(), 400);
}

}  // namespace
}  // namespace vigil
