// Timeouts through the timer tree (client_header_timeout, keepalive_timeout,
// client_body_timeout, send_timeout), configured to 1s, and a slow reader
// that gets its whole response in the end.
#include <gtest/gtest.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <chrono>
#include <string>

#include "http_harness.h"

namespace vigil {
namespace {

using test::Client;
using test::Response;
using test::VigilServer;
using Clock = std::chrono::steady_clock;

long ms_since(Clock::time_point t) {
  return static_cast<long>(
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count());
}

std::string pattern(std::size_t n) {
  std::string s(n, 'x');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + (i * 7 + i / 4096) % 26);
  return s;
}

class HttpTimeouts : public ::testing::Test {
 protected:
  void SetUp() override {
    server_.write("html/index.html", "index\n");
    big_ = pattern(16 << 20);
    server_.write("html/big.bin", big_);
  }
  bool start(const std::string& extra) {
    if (!server_.start(extra + "\nserver {\n listen 127.0.0.1:" + std::to_string(port_) +
                         ";\n root html;\n}\n")) return false;
    port_ = server_.port();
    return port_ > 0;
  }
  VigilServer server_;
  int port_ = 0;
  std::string big_;
};

TEST_F(HttpTimeouts, SlowHeaderIsClosedWithoutAnAnswer) {
  ASSERT_TRUE(start("client_header_timeout 1s;")) << server_.output();
  Client c(port_);
  auto t0 = Clock::now();
  ASSERT_TRUE(c.send("GET / HTTP/1.1\r\nHo"));
  EXPECT_TRUE(c.closed_within(4000));
  EXPECT_GE(ms_since(t0), 900);
  EXPECT_EQ(c.extra(), "") << "nginx sends nothing to a client too slow to send its header";

  // A connection that never sends a byte goes the same way.
  Client idle(port_);
  t0 = Clock::now();
  EXPECT_TRUE(idle.closed_within(4000));
  EXPECT_GE(ms_since(t0), 900);
  EXPECT_TRUE(server_.wait_output("client timed out")) << server_.output();
}

TEST_F(HttpTimeouts, ClientSendingHeadersForeverIsClosed) {
  ASSERT_TRUE(start("client_header_timeout 1s; large_client_header_buffers 64 8k;"))
      << server_.output();
  Client c(port_);
  auto t0 = Clock::now();
  ASSERT_TRUE(c.send("GET / HTTP/1.1\r\nHost: x\r\n"));
  // A header line every 100 ms: each is progress, but the header as a whole
  // must be done within client_header_timeout.
  bool closed = false;
  for (int i = 0; i < 40 && !closed; ++i) {
    if (!c.send("X-" + std::to_string(i) + ": y\r\n")) closed = true;
    if (c.closed_within(100)) closed = true;
  }
  EXPECT_TRUE(closed || c.closed_within(2000));
  EXPECT_LT(ms_since(t0), 3500);
}

TEST_F(HttpTimeouts, IdleKeepAliveConnectionIsClosed) {
  ASSERT_TRUE(start("keepalive_timeout 1s;")) << server_.output();
  Client c(port_);
  ASSERT_TRUE(c.send(test::simple_get("/")));
  EXPECT_EQ(c.read_response().status, 200);
  auto t0 = Clock::now();
  EXPECT_TRUE(c.closed_within(4000));
  EXPECT_GE(ms_since(t0), 900);
}

TEST_F(HttpTimeouts, KeepaliveTimeoutZeroDisablesKeepAlive) {
  ASSERT_TRUE(start("keepalive_timeout 0;")) << server_.output();
  Client c(port_);
  ASSERT_TRUE(c.send(test::simple_get("/")));
  EXPECT_EQ(c.read_response().header("connection"), "close");
  EXPECT_TRUE(c.closed_within(2000));
}

TEST_F(HttpTimeouts, StalledBodyIsClosed) {
  ASSERT_TRUE(start("client_body_timeout 1s;")) << server_.output();
  Client c(port_);
  ASSERT_TRUE(c.send("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789"));
  auto t0 = Clock::now();
  EXPECT_TRUE(c.closed_within(4000));
  EXPECT_GE(ms_since(t0), 900);
}

TEST_F(HttpTimeouts, ReaderThatNeverReadsIsDroppedAfterSendTimeout) {
  ASSERT_TRUE(start("send_timeout 1s; sendfile on;")) << server_.output();
  Client c(port_);
  int small = 4096;
  ::setsockopt(c.fd(), SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  ASSERT_TRUE(c.send(test::simple_get("/big.bin")));
  // Read nothing: the server's writes stall, then time out.
  EXPECT_TRUE(server_.wait_output("client timed out sending the response", 5000))
      << server_.output();
  std::string got = test::read_n(c.fd(), big_.size() + 1000, 3000);
  EXPECT_LT(got.size(), big_.size()) << "the response cannot have been sent whole";
  // The worker is fine.
  EXPECT_EQ(test::get(port_, test::simple_get("/")).status, 200);
}

class HttpSlowReader : public HttpTimeouts, public ::testing::WithParamInterface<const char*> {};

TEST_P(HttpSlowReader, GetsTheWholeResponseLater) {
  ASSERT_TRUE(start(std::string("send_timeout 10s; ") + GetParam())) << server_.output();
  Client c(port_);
  // 16 MiB is more than the socket buffers on both sides hold: the server
  // has to wait for this client to read.
  ASSERT_TRUE(c.send(test::simple_get("/big.bin") + test::simple_get("/index.html")));
  // Meanwhile other clients are served: the worker never blocks on this one.
  // Once the first 64 KiB wait unread in this client's socket, the server
  // has a response it cannot finish sending.
  ASSERT_TRUE(test::wait_for([&] {
    int queued = 0;
    return ::ioctl(c.fd(), FIONREAD, &queued) == 0 && queued >= 65536;
  }));
  auto t0 = Clock::now();
  EXPECT_EQ(test::get(port_, test::simple_get("/index.html")).body, "index\n");
  EXPECT_LT(ms_since(t0), 1000);
  Response r = c.read_response(false, 30000);
  ASSERT_TRUE(r.complete);
  EXPECT_EQ(r.status, 200);
  EXPECT_TRUE(r.body == big_) << "got " << r.body.size() << " bytes";
  EXPECT_EQ(c.read_response().body, "index\n");
}

INSTANTIATE_TEST_SUITE_P(Sendfile, HttpSlowReader,
                         ::testing::Values("sendfile on;", "sendfile off;"),
                         [](const auto& p) { return p.index == 0 ? "On" : "Off"; });

}  // namespace
}  // namespace vigil
