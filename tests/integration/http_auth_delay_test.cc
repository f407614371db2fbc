// auth_delay: a 401 from the access phase is answered only after the delay;
// the worker serves other connections meanwhile, a request that passes is
// not held, and a client that leaves during the delay ends its request at
// once (499 in the access log), not when the delay is over.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "http_harness.h"

namespace vigil::test {
namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kGood = "Authorization: Basic dXNlcjpnb29k\r\n";  // user:good
constexpr const char* kBad = "Authorization: Basic dXNlcjpiYWQ=\r\n";   // user:bad

class AuthDelay : public ::testing::Test {
 protected:
  bool start(const std::string& delay) {
    server_.write("conf/htpasswd", "user:{PLAIN}good\n");
    server_.write("html/index.html", "in\n");
    port_ = free_port();
    return server_.start("log_format st '$status';\nserver { listen 127.0.0.1:" +
                         std::to_string(port_) +
                         "; root html; access_log logs/status.log st buffer=0;\n"
                         "location / { auth_delay " +
                         delay +
                         "; auth_basic \"closed site\"; auth_basic_user_file htpasswd; }\n"
                         "location /open { auth_delay " +
                         delay + "; return 200 \"open\\n\"; }\n}");
  }
  std::string request(const std::string& uri, const char* auth) const {
    return "GET " + uri + " HTTP/1.1\r\nHost: h\r\n" + auth + "\r\n";
  }
  // The access log once it holds `n` lines (polling), or what it holds at
  // the timeout.
  std::string statuses(std::size_t n, int timeout_ms) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      std::ifstream in(server_.path("logs/status.log"));
      std::stringstream ss;
      ss << in.rdbuf();
      const std::string text = ss.str();
      std::size_t lines = 0;
      for (char ch : text) lines += ch == '\n';
      if (lines >= n || Clock::now() > deadline) return text;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  VigilServer server_;
  int port_ = 0;
};

// The 401 comes no sooner than the delay, with its challenge, and the
// connection is kept.
TEST_F(AuthDelay, UnauthorizedIsDelayed) {
  ASSERT_TRUE(start("600ms")) << server_.output();
  Client c(port_);
  const auto t0 = Clock::now();
  ASSERT_TRUE(c.send(request("/", kBad)));
  Response r = c.read_response();
  const auto waited = Clock::now() - t0;
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(r.header("www-authenticate"), "Basic realm=\"closed site\"");
  EXPECT_GE(std::chrono::duration_cast<std::chrono::milliseconds>(waited).count(), 550);
  EXPECT_TRUE(server_.wait_output("delaying unauthorized request")) << server_.output();
  ASSERT_TRUE(c.send(request("/", kGood)));
  EXPECT_EQ(c.read_response().body, "in\n");
}

// While one client waits out its delay, another is served, whether it
// authenticates or needs no authentication: the delay blocks nothing.
TEST_F(AuthDelay, OthersAreServedDuringTheDelay) {
  ASSERT_TRUE(start("30s")) << server_.output();
  Client delayed(port_);
  ASSERT_TRUE(delayed.send(request("/", kBad)));
  ASSERT_TRUE(server_.wait_output("delaying unauthorized request")) << server_.output();
  Response good = get(port_, request("/", kGood));
  EXPECT_EQ(good.status, 200);
  EXPECT_EQ(good.body, "in\n");
  EXPECT_EQ(get(port_, request("/open", "")).body, "open\n");
  EXPECT_EQ(statuses(2, 5000), "200\n200\n");
}

// A client that closes during the delay ends its request then: the access
// log has its 499 long before the 30 s are over, and the worker goes on.
TEST_F(AuthDelay, ClientLeavingEndsTheDelay) {
  ASSERT_TRUE(start("30s")) << server_.output();
  {
    Client c(port_);
    ASSERT_TRUE(c.send(request("/", kBad)));
    ASSERT_TRUE(server_.wait_output("delaying unauthorized request")) << server_.output();
  }  // closed here
  EXPECT_EQ(statuses(1, 10000), "499\n");
  EXPECT_TRUE(server_.wait_output("client prematurely closed connection")) << server_.output();
  EXPECT_EQ(get(port_, request("/", kGood)).status, 200);
}

// A pipelined request behind the delayed one is not taken for a close: it
// is answered after the 401.
TEST_F(AuthDelay, PipelinedRequestWaitsItsTurn) {
  ASSERT_TRUE(start("300ms")) << server_.output();
  Client c(port_);
  ASSERT_TRUE(c.send(request("/", kBad) + request("/", kGood)));
  EXPECT_EQ(c.read_response().status, 401);
  Response r = c.read_response();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "in\n");
}

TEST(AuthDelayConf, BadValueIsAnError) {
  VigilServer s;
  auto [code, out] = check_http_conf(s, "auth_delay forever;");
  EXPECT_NE(code, 0);
  EXPECT_NE(out.find("invalid value \"forever\" in \"auth_delay\" directive"), std::string::npos)
      << out;
  auto [ok, out2] = check_http_conf(s, "auth_delay 2s;");
  EXPECT_EQ(ok, 0) << out2;
}

}  // namespace
}  // namespace vigil::test
