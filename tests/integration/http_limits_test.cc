// Request limits through the real vigil binary (one process): limit_req
// (burst, nodelay, delay=, custom status), limit_conn, limit_rate. The
// two-worker tests are in http_limits_workers_test.cc.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <string>

#include "http_harness.h"

namespace vigil {
namespace {

using test::Client;
using test::get;
using test::simple_get;
using test::VigilServer;

std::string conf_with(int port, const std::string& http, const std::string& locations) {
  return "access_log off;\n" + http + "\nserver {\n  listen 127.0.0.1:" + std::to_string(port) +
         ";\n  root html;\n" + locations + "\n}\n";
}

int status_of(int port, const std::string& path) {
  return get(port, simple_get(path)).status;
}

TEST(HttpLimits, LimitReqRejectsBeyondBurstWithTheConfiguredStatus) {
  VigilServer s;
  s.write("html/a", "a\n");
  const int port = test::free_port();
  ASSERT_TRUE(s.start(conf_with(port,
                                "limit_req_zone $binary_remote_addr zone=one:1m rate=1r/s;\n"
                                "",
                                "location /a { limit_req zone=one burst=2 nodelay; }\n")))
      << s.output();
  // rate 1r/s, burst 2: the first request and two more within the second pass.
  EXPECT_EQ(status_of(port, "/a"), 200);
  EXPECT_EQ(status_of(port, "/a"), 200);
  EXPECT_EQ(status_of(port, "/a"), 200);
  EXPECT_EQ(status_of(port, "/a"), 503);
  EXPECT_EQ(status_of(port, "/a"), 503);
  EXPECT_TRUE(s.wait_output("limiting requests, excess: ")) << s.output();
  EXPECT_TRUE(s.wait_output("by zone \"one\"")) << s.output();
}

TEST(HttpLimits, LimitReqStatusIsConfigurable) {
  VigilServer s;
  s.write("html/b", "b\n");
  const int port = test::free_port();
  ASSERT_TRUE(s.start(conf_with(port, "limit_req_zone $binary_remote_addr zone=two:1m rate=1r/m;\n",
                                "location /b { limit_req zone=two; limit_req_status 429; }\n")))
      << s.output();
  EXPECT_EQ(status_of(port, "/b"), 200);
  test::Response r = get(port, simple_get("/b"));
  EXPECT_EQ(r.status, 429);
}

TEST(HttpLimits, ExcessRequestsAreDelayedUnlessNodelayOrWithinDelay) {
  VigilServer s;
  s.write("html/d/x", "x\n");
  s.write("html/n/x", "x\n");
  s.write("html/p/x", "x\n");
  const int port = test::free_port();
  ASSERT_TRUE(s.start(conf_with(port,
                                "limit_req_zone $binary_remote_addr zone=d:1m rate=10r/s;\n"
                                "limit_req_zone $binary_remote_addr zone=n:1m rate=10r/s;\n"
                                "limit_req_zone $binary_remote_addr zone=p:1m rate=10r/s;\n",
                                "location /d/ { limit_req zone=d burst=5; }\n"
                                "location /n/ { limit_req zone=n burst=5 nodelay; }\n"
                                "location /p/ { limit_req zone=p burst=5 delay=2; }\n")))
      << s.output();
  // nodelay: four back-to-back requests are served, none is held.
  for (int i = 0; i < 4; ++i) EXPECT_EQ(status_of(port, "/n/x"), 200) << i;
  EXPECT_EQ(s.output().find("delaying request"), std::string::npos) << s.output();

  // delay=2: the first three are within it, the fourth is held.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(status_of(port, "/p/x"), 200) << i;
  EXPECT_EQ(s.output().find("delaying request"), std::string::npos) << s.output();
  EXPECT_EQ(status_of(port, "/p/x"), 200);
  EXPECT_TRUE(s.wait_output("by zone \"p\"")) << s.output();

  // Default (delay 0): at 10r/s the 2nd..4th requests wait about 100 ms
  // each behind the first, so four take at least ~300 ms. A lower bound only.
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 4; ++i) EXPECT_EQ(status_of(port, "/d/x"), 200) << i;
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  EXPECT_GE(ms, 250) << "requests beyond the rate were not delayed";
  EXPECT_TRUE(s.wait_output("delaying request, excess: ")) << s.output();
  EXPECT_TRUE(s.wait_output("by zone \"d\"")) << s.output();
}

TEST(HttpLimits, LimitConnCountsRequestsInProgress) {
  VigilServer s;
  s.write("html/big", std::string(64 * 1024, 'b'));
  s.write("html/small", "s\n");
  const int port = test::free_port();
  ASSERT_TRUE(s.start(conf_with(port, "limit_conn_zone $binary_remote_addr zone=c:1m;\n",
                                "location /big { limit_conn c 1; limit_rate 8k; }\n"
                                "location /small { limit_conn c 1; limit_conn_status 429; }\n"
                                "location /free { }\n")))
      << s.output();
  EXPECT_EQ(status_of(port, "/small"), 200);  // counted and released
  {
    Client slow(port);
    ASSERT_TRUE(slow.send(simple_get("/big")));
    // The throttled response is in progress: wait for its first bytes.
    ASSERT_TRUE(test::wait_until([&] {
      pollfd p{slow.fd(), POLLIN, 0};
      return ::poll(&p, 1, 0) == 1;
    }));
    EXPECT_EQ(status_of(port, "/small"), 429);
    EXPECT_EQ(status_of(port, "/small"), 429);
    EXPECT_TRUE(s.wait_output("limiting connections by zone \"c\"")) << s.output();
  }
  // The slow client went away: the worker notices at its next write and
  // gives the count back.
  EXPECT_TRUE(test::wait_until([&] { return status_of(port, "/small") == 200; }, 5000))
      << s.output();
}

TEST(HttpLimits, LimitRateThrottlesTheResponse) {
  VigilServer s;
  const std::string body(64 * 1024, 'r');
  s.write("html/r", body);
  const int port = test::free_port();
  ASSERT_TRUE(s.start(conf_with(port, "", "location /r { limit_rate 128k; }\n"))) << s.output();
  const auto t0 = std::chrono::steady_clock::now();
  Client c(port);
  ASSERT_TRUE(c.send(simple_get("/r")));
  test::Response r = c.read_response(false, 5000);
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  ASSERT_TRUE(r.complete);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, body);
  // 64 KiB at 128 KiB/s: at least half a second (a lower bound only).
  EXPECT_GE(ms, 450);
}

// limit_rate and limit_rate_after with variables, worked out per response;
// `set $limit_rate` and $limit_rate, as nginx's (an unset or invalid value:
// no limit, 0).
TEST(HttpLimits, LimitRateWithVariables) {
  VigilServer s;
  const std::string body(64 * 1024, 'v');
  s.write("html/v", body);
  const int port = test::free_port();
  ASSERT_TRUE(s.start(conf_with(port, "",
                                "location /v { limit_rate $arg_l; limit_rate_after $arg_a; }\n"
                                "location /set { set $limit_rate $arg_l; add_header X-Rate $limit_rate;"
                                " return 200 ok; }\n")))
      << s.output();
  const auto fetch_ms = [&](const std::string& target) {
    const auto t0 = std::chrono::steady_clock::now();
    Client c(port);
    EXPECT_TRUE(c.send(simple_get(target)));
    test::Response r = c.read_response(false, 5000);
    EXPECT_TRUE(r.complete);
    EXPECT_EQ(r.body, body);
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
        .count();
  };
  // 64 KiB at 128 KiB/s: at least half a second (a lower bound only).
  EXPECT_GE(fetch_ms("/v?l=128k"), 450);
  test::Response r = get(port, simple_get("/set?l=40k"));
  EXPECT_EQ(r.header("x-rate"), "40960");
  r = get(port, simple_get("/set"));
  EXPECT_EQ(r.header("x-rate"), "0");
  r = get(port, simple_get("/set?l=fast"));
  EXPECT_EQ(r.header("x-rate"), "0");
  EXPECT_TRUE(s.wait_output("invalid size \"fast\"")) << s.output();
}

}  // namespace
}  // namespace vigil
