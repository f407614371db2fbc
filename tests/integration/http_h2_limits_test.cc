// Per-stream and per-connection limits of HTTP/2 through the real vigil
// binary: limit_rate holds each stream's response to its rate (with
// sendfile on and off, the two ways a file's bytes reach the frames),
// keepalive_requests ends a connection with GOAWAY after that many streams,
// and keepalive_timeout ends an idle one with GOAWAY.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "http_harness.h"
#include "test_util.h"

namespace vigil {
namespace {

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::pair<int, std::string> frames_peer(std::vector<std::string> args) {
  args.insert(args.begin(), {"/usr/bin/python3", std::string(VIGIL_SOURCE_DIR) +
                                                     "/tests/integration/h2_frames_peer.py"});
  return test::run(args);
}

std::pair<int, std::string> h2peer(std::vector<std::string> args) {
  args.insert(args.begin(), {"/usr/bin/python3",
                             std::string(VIGIL_SOURCE_DIR) + "/tests/integration/h2_peer.py"});
  return test::run(args);
}

int start(test::VigilServer& s, const std::string& extra) {
  if (!s.start("access_log off;\nserver {\n  listen 127.0.0.1:0;\n  http2 on;\n  root html;\n" +
               extra + "\n}\n")) {
    return -1;
  }
  return s.port();
}

TEST(Http2Limits, LimitRateHoldsEachStreamToItsRate) {
  for (const std::string sendfile : {"on", "off"}) {
    test::VigilServer s;
    const std::string body(400 * 1024, 'r');
    s.write("html/slow/big.bin", body);
    s.write("html/fast/big.bin", body);
    const int port = start(s, "sendfile " + sendfile + ";\nlocation /slow/ { limit_rate 200k; }");
    ASSERT_GT(port, 0) << s.output();
    // 400 KiB at 200 KiB/s: about two seconds, never much less.
    const auto t0 = now_ms();
    auto [rc, out] = h2peer({std::to_string(port), "get", "/slow/big.bin"});
    const auto took = now_ms() - t0;
    EXPECT_EQ(rc, 0) << out;
    EXPECT_EQ(out.rfind("/slow/big.bin 200 409600 ", 0), 0u) << out;
    EXPECT_GE(took, 1200) << "sendfile " << sendfile;
    // Without the limit the same file is not held back (the check above
    // can fail).
    auto [rc2, out2] = h2peer({std::to_string(port), "get", "/fast/big.bin"});
    EXPECT_EQ(out2.rfind("/fast/big.bin 200 409600 ", 0), 0u) << out2;
    EXPECT_EQ(s.stop(), 0);
  }
}

TEST(Http2Limits, KeepaliveRequestsEndsTheConnectionAfterThatManyStreams) {
  test::VigilServer s;
  s.write("html/index.html", "hello\n");
  const int port = start(s, "keepalive_requests 3;");
  ASSERT_GT(port, 0) << s.output();
  auto [rc, out] = frames_peer({std::to_string(port), "seq", "10", "/index.html"});
  EXPECT_EQ(rc, 0) << out;
  // The third stream's response comes with GOAWAY naming it; the
  // connection then closes.
  EXPECT_NE(out.find("goaway 0 5\n"), std::string::npos) << out;
  EXPECT_NE(out.find("answered 3\nclosed\n"), std::string::npos) << out;
}

TEST(Http2Limits, KeepaliveTimeoutZeroServesTheStreamThenSaysGoaway) {
  test::VigilServer s;
  s.write("html/index.html", "hello\n");
  const int port = start(s, "keepalive_timeout 0;");
  ASSERT_GT(port, 0) << s.output();
  auto [rc, out] = frames_peer({std::to_string(port), "seq", "10", "/index.html"});
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("goaway 0 1\n"), std::string::npos) << out;
  EXPECT_NE(out.find("answered 1\nclosed\n"), std::string::npos) << out;
}

TEST(Http2Limits, KeepaliveTimeoutEndsAnIdleConnection) {
  test::VigilServer s;
  const int port = start(s, "keepalive_timeout 1s;\nlocation = /pid { return 200 \"$pid\\n\"; }");
  ASSERT_GT(port, 0) << s.output();
  auto [rc, out] = frames_peer({std::to_string(port), "idle", "/pid"});
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("ready\ngoaway 0 1\nclosed\n"), std::string::npos) << out;
}

}  // namespace
}  // namespace vigil
