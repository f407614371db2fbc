// HTTP/2's framing edge cases through the real vigil binary and a client in
// raw bytes (h2_protocol_peer.py): the checks made on a frame's header
// (a client's PUSH_PROMISE, HEADERS for a stream closed or passed over),
// client_header_timeout for a head that comes in part, DATA frames as large
// as the client's SETTINGS_MAX_FRAME_SIZE allows, frames larger than 16384
// from the client, and CONNECT.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "http_harness.h"
#include "test_util.h"

namespace vigil {
namespace {

std::pair<int, std::string> peer(int port, std::vector<std::string> args) {
  args.insert(args.begin(), {"/usr/bin/python3",
                             std::string(VIGIL_SOURCE_DIR) + "/tests/integration/h2_protocol_peer.py",
                             std::to_string(port)});
  return test::run(args);
}

int start(test::VigilServer& s, const std::string& extra) {
  s.write("html/index.html", "hello\n");
  s.write("html/big", std::string(100000, 'b'));
  if (!s.start("access_log off;\nserver {\n  listen 127.0.0.1:0;\n  http2 on;\n  root html;\n" +
               extra + "\n}\n")) {
    return -1;
  }
  return s.port();
}

// RFC 9113 §8.4: a client cannot push. The frame's header is enough (its
// payload never comes); the connection closes at once after the GOAWAY
// (a connection error, no lingering close).
TEST(Http2Protocol, AClientsPushPromiseIsAConnectionErrorFromItsHeader) {
  test::VigilServer s;
  const int port = start(s, "lingering_timeout 60s;");
  ASSERT_GT(port, 0) << s.output();
  auto [rc, out] = peer(port, {"push_promise"});
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out, "goaway 1 0\nclosed\n");
}

// RFC 9113 §5.1.1: opening stream 3 closes the idle stream 1; HEADERS for it
// then is a connection error (nghttp2 would ignore them).
TEST(Http2Protocol, HeadersForAStreamPassedOverAreAConnectionError) {
  test::VigilServer s;
  const int port = start(s, "");
  ASSERT_GT(port, 0) << s.output();
  auto [rc, out] = peer(port, {"reopen", "3", "1"});
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out, "goaway 1 3\n");
}

// RFC 9113 §5.1: frames after END_STREAM both ways (a closed stream).
TEST(Http2Protocol, HeadersForAClosedStreamAreAConnectionError) {
  test::VigilServer s;
  const int port = start(s, "");
  ASSERT_GT(port, 0) << s.output();
  auto [rc, out] = peer(port, {"reopen", "1", "1"});
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out, "goaway 1 1\n");
  auto [rc2, out2] = peer(port, {"reopen", "1", "3"});
  EXPECT_EQ(rc2, 0) << out2;
  EXPECT_EQ(out2, "status 200\n");
}

// A head that does not complete within client_header_timeout: the stream is
// reset with PROTOCOL_ERROR (nginx's code) and the connection goes on; the
// rest of the block, when it comes, is decoded for HPACK's state.
TEST(Http2Protocol, AHeadThatComesInPartIsResetAfterClientHeaderTimeout) {
  test::VigilServer s;
  const int port = start(s, "client_header_timeout 1s;");
  ASSERT_GT(port, 0) << s.output();
  auto [rc, out] = peer(port, {"head_timeout", "20"});
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out, "rst 1 1\nping\n");
  EXPECT_TRUE(s.wait_output("client timed out sending the http2 head")) << s.output();
}

// DATA frames are as large as the client's SETTINGS_MAX_FRAME_SIZE and
// http2_chunk_size allow (nghttp2 alone stops at 16384).
TEST(Http2Protocol, DataFramesFollowTheClientsMaxFrameSize) {
  test::VigilServer s;
  const int port = start(s, "location /chunk/ { http2_chunk_size 64k; alias html/; }");
  ASSERT_GT(port, 0) << s.output();
  auto [rc, out] = peer(port, {"frame_size", "32768", "/chunk/big"});
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out, "status 200 largest 32768 total 100000\n");
  auto [rc2, out2] = peer(port, {"frame_size", "16384", "/chunk/big"});
  EXPECT_EQ(rc2, 0) << out2;
  EXPECT_EQ(out2, "status 200 largest 16384 total 100000\n");
  auto [rc3, out3] = peer(port, {"frame_size", "32768", "/big"});
  EXPECT_EQ(rc3, 0) << out3;
  EXPECT_EQ(out3, "status 200 largest 8192 total 100000\n");  // http2_chunk_size 8k
}

// SETTINGS_MAX_FRAME_SIZE 2^24-1, as nginx says: a head of more than 16384
// bytes comes in one HEADERS frame.
TEST(Http2Protocol, AHeadersFrameLargerThan16384IsTaken) {
  test::VigilServer s;
  const int port = start(s, "large_client_header_buffers 4 32k;");
  ASSERT_GT(port, 0) << s.output();
  auto [rc, out] = peer(port, {"big_head", "5"});
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out, "status 200\n");
}

// CONNECT names its target in :authority alone (RFC 9113 §8.5): 405, as
// HTTP/1's authority-form CONNECT. With :scheme and :path too the request
// is malformed: RST_STREAM PROTOCOL_ERROR (§8.1.1; nginx answers 405,
// docs/compatibility.md).
TEST(Http2Protocol, ConnectIsNotAllowedAndAMalformedOneIsReset) {
  test::VigilServer s;
  const int port = start(s, "");
  ASSERT_GT(port, 0) << s.output();
  auto [rc, out] = peer(port, {"connect"});
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out, "status 405\n");
  auto [rc2, out2] = peer(port, {"connect", "full"});
  EXPECT_EQ(rc2, 0) << out2;
  EXPECT_EQ(out2, "rst 1 1\n");
}

// What nghttp2 refuses where nginx answers (docs/compatibility.md): a
// malformed request is reset with PROTOCOL_ERROR (RFC 9113 §8.1.1; an
// empty :authority, a field ahead of a pseudo-header, §8.3), and a field
// block that ends inside an integer is COMPRESSION_ERROR (§4.3).
TEST(Http2Protocol, MalformedRequestsAndTruncatedBlocksAsTheRfcSays) {
  test::VigilServer s;
  const int port = start(s, "");
  ASSERT_GT(port, 0) << s.output();
  // :method GET, :scheme http, :path / (static indexes), :authority "".
  auto [rc, out] = peer(port, {"block", "82868481"});
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out, "rst 1 1\n");
  // x-foo: a (literal, new name) before :authority localhost.
  auto [rc2, out2] = peer(port, {"block", "828684" "0005782d666f6f0161" "41096c6f63616c686f7374"});
  EXPECT_EQ(rc2, 0) << out2;
  EXPECT_EQ(out2, "rst 1 1\n");
  // An indexed field whose integer goes on past the block.
  auto [rc3, out3] = peer(port, {"block", "ff"});
  EXPECT_EQ(rc3, 0) << out3;
  EXPECT_EQ(out3, "goaway 9 1\n");
}

}  // namespace
}  // namespace vigil
