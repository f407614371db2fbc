// An idle HTTP/2 connection's memory, through the real vigil binary and a
// raw-frame client (h2_frames_peer.py): once no stream is open and nothing
// is left to send, the worker gives the session's buffers back (nghttp2's
// frame buffer and empty stream map, OpenSSL's record buffers on TLS) and
// counts it in /metrics; the same connection then still serves small and
// large responses and a large request head, and gives them back again.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_util.h"
#include "tls_harness.h"

namespace vigil {
namespace {

using test::TlsServer;

std::pair<int, std::string> frames_peer(int port, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {
      "/usr/bin/python3", std::string(VIGIL_SOURCE_DIR) + "/tests/integration/h2_frames_peer.py",
      std::to_string(port)};
  argv.insert(argv.end(), args.begin(), args.end());
  return test::run(argv);
}

class Http2Memory : public ::testing::Test {
 protected:
  // html/small.txt (12 bytes) and html/big.bin (100 KiB: DATA frames that
  // fill nghttp2's frame buffer), /metrics.
  void write_files() {
    s_.write("html/small.txt", "hello world\n");
    std::string big;
    for (int i = 0; big.size() < 102400; ++i) big += std::to_string(i * 7919) + ",";
    big.resize(102400);
    s_.write("html/big.bin", big);
    small_md5_ = md5(s_.path("html/small.txt"));
    big_md5_ = md5(s_.path("html/big.bin"));
    ASSERT_EQ(small_md5_.size(), 32u);
    ASSERT_EQ(big_md5_.size(), 32u);
  }
  static std::string md5(const std::string& file) {
    auto [rc, out] = test::run({"md5sum", file});
    return rc == 0 ? out.substr(0, 32) : "";
  }
  std::string expected() const {
    return "/small.txt 200 12 " + small_md5_ + "\nreleased\n/big.bin 200 102400 " + big_md5_ +
           "\n/small.txt 200 12 " + small_md5_ + "\nreleased\n/big.bin 200 102400 " + big_md5_ +
           "\n";
  }
  // A response, the release, a large response and a 7,000-byte field on
  // the released connection, the release again, and a large response.
  std::vector<std::string> steps() const {
    return {"/small.txt", "wait", "/big.bin", "/small.txt+7000", "wait", "/big.bin"};
  }

  TlsServer s_;
  std::string small_md5_, big_md5_;
};

TEST_F(Http2Memory, AnIdleConnectionGivesItsBuffersBackAndServesAfter) {
  write_files();
  const int port = test::free_port();
  ASSERT_TRUE(s_.start("access_log off;\nserver {\n  listen 127.0.0.1:" + std::to_string(port) +
                       ";\n  http2 on;\n  root html;\n  location = /metrics { metrics; }\n}\n"))
      << s_.output();
  auto [rc, out] = frames_peer(port, [&] {
    std::vector<std::string> a = {"release"};
    for (const std::string& st : steps()) a.push_back(st);
    return a;
  }());
  ASSERT_EQ(rc, 0) << out << s_.output();
  EXPECT_EQ(out, expected()) << s_.output();
}

TEST_F(Http2Memory, AnIdleTlsConnectionGivesItsRecordBuffersBackAndServesAfter) {
  ASSERT_TRUE(s_.pki_ok());
  write_files();
  const int port = test::free_port();
  ASSERT_TRUE(s_.start("access_log off;\nserver {\n  listen 127.0.0.1:" + std::to_string(port) +
                       " ssl;\n  http2 on;\n  server_name localhost;\n  root html;\n"
                       "  ssl_certificate ../server.crt;\n  ssl_certificate_key ../server.key;\n"
                       "  location = /metrics { metrics; }\n}\n"))
      << s_.output();
  auto [rc, out] = frames_peer(port, [&] {
    std::vector<std::string> a = {"release", "--tls"};
    for (const std::string& st : steps()) a.push_back(st);
    return a;
  }());
  ASSERT_EQ(rc, 0) << out << s_.output();
  EXPECT_EQ(out, expected()) << s_.output();
}

}  // namespace
}  // namespace vigil
