// HTTP/2 stream scheduling (RFC 9218) through the real vigil binary, with a
// raw-frame client (h2_frames_peer.py) that holds both responses behind
// zero stream windows and opens them in one frame: the server then chooses
// what goes first. A stream of urgency 0 goes before one of urgency 7 that
// was opened first; streams without a priority field share the connection
// in turns. The client says SETTINGS_NO_RFC7540_PRIORITIES (RFC 9218 §2.1);
// one that does not keeps RFC 7540's scheduling.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "http_harness.h"
#include "test_util.h"

namespace vigil {
namespace {

std::string order(int port, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {
      "/usr/bin/python3", std::string(VIGIL_SOURCE_DIR) + "/tests/integration/h2_frames_peer.py",
      std::to_string(port), "order"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto [rc, out] = test::run(argv);
  return out;
}

class Http2Priority : public ::testing::Test {
 protected:
  void SetUp() override {
    s_.write("html/big1.bin", std::string(1 << 20, 'a'));
    s_.write("html/big2.bin", std::string(1 << 20, 'b'));
    s_.write("html/small.txt", "small\n");
    ASSERT_TRUE(
        s_.start("access_log off;\nserver {\n  listen 127.0.0.1:0;\n  http2 on;\n"
                 "  root html;\n  sendfile on;\n}\n"))
        << s_.output();
    port_ = s_.port();
    ASSERT_GT(port_, 0);
  }
  void TearDown() override { s_.stop(); }

  test::VigilServer s_;
  int port_ = 0;
};

TEST_F(Http2Priority, UrgentStreamGoesFirst) {
  const std::string out = order(port_, {"/big1.bin", "u=7", "/small.txt", "u=0"});
  EXPECT_NE(out.find("first /small.txt\n"), std::string::npos) << out;
  EXPECT_NE(out.find("/big1.bin 200 1048576\n"), std::string::npos) << out;
  EXPECT_NE(out.find("/small.txt 200 6\n"), std::string::npos) << out;
}

TEST_F(Http2Priority, LessUrgentStreamWaitsForTheMoreUrgentOne) {
  // Urgency 1 before 6: the first response is complete before the other starts.
  const std::string out = order(port_, {"/big1.bin", "u=6", "/big2.bin", "u=1"});
  EXPECT_NE(out.find("first /big2.bin\ninterleaved no\n"), std::string::npos) << out;
  EXPECT_NE(out.find("/big1.bin 200 1048576\n/big2.bin 200 1048576\n"), std::string::npos) << out;
}

TEST_F(Http2Priority, StreamsWithoutPriorityShareTheConnection) {
  const std::string out = order(port_, {"/big1.bin", "-", "/big2.bin", "-"});
  EXPECT_NE(out.find("interleaved yes\n"), std::string::npos) << out;
  EXPECT_NE(out.find("/big1.bin 200 1048576\n/big2.bin 200 1048576\n"), std::string::npos) << out;
}

// A client that does not say SETTINGS_NO_RFC7540_PRIORITIES keeps RFC 7540's
// scheduling, as nginx 1.22 serves everyone: its priority fields are not
// read, and two streams of the default weight share the connection.
TEST_F(Http2Priority, AClientWithoutTheRfc9218SettingKeepsRfc7540) {
  const std::string out = order(port_, {"/big1.bin", "u=6", "/big2.bin", "u=1", "--rfc7540"});
  EXPECT_NE(out.find("interleaved yes\n"), std::string::npos) << out;
  EXPECT_NE(out.find("/big1.bin 200 1048576\n/big2.bin 200 1048576\n"), std::string::npos) << out;
}

}  // namespace
}  // namespace vigil
