// HTTP/2's framing edge cases through the real vigil binary and a client in
// raw bytes (h2_protocol_peer.py): the checks made on a frame's header
// (a client's PUSH_PROMISE, HEADERS for a stream closed or passed over),
// client_header_timeout for a head that comes in part, DATA frames as large
// as the client's SETTINGS_MAX_FRAME_SIZE allows, frames larger than 16384
// from the client, CONNECT, and malformed requests.
#include <gtest/gtest.h>

#include <cstdio>
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
// is malformed (§8.1.1), answered 405 as nginx answers any CONNECT.
TEST(Http2Protocol, ConnectIsNotAllowed) {
  test::VigilServer s;
  const int port = start(s, "");
  ASSERT_GT(port, 0) << s.output();
  auto [rc, out] = peer(port, {"connect"});
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out, "status 405\n");
  auto [rc2, out2] = peer(port, {"connect", "full"});
  EXPECT_EQ(rc2, 0) << out2;
  EXPECT_EQ(out2, "status 405\n");
}

// A malformed request is answered (RFC 9113 §8.1.1 lets the server respond
// before the stream closes): 400 for an empty :authority and for a field
// ahead of a pseudo-header (§8.3; nginx takes that one), as nginx answers;
// a field block that ends inside an integer is COMPRESSION_ERROR (§4.3).
TEST(Http2Protocol, MalformedRequestsAndTruncatedBlocksAsTheRfcSays) {
  test::VigilServer s;
  const int port = start(s, "");
  ASSERT_GT(port, 0) << s.output();
  // :method GET, :scheme http, :path / (static indexes), :authority "".
  auto [rc, out] = peer(port, {"block", "82868481"});
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out, "status 400\n");
  // x-foo: a (literal, new name) before :authority localhost.
  auto [rc2, out2] = peer(port, {"block", "828684" "0005782d666f6f0161" "41096c6f63616c686f7374"});
  EXPECT_EQ(rc2, 0) << out2;
  EXPECT_EQ(out2, "status 400\n");
  // An indexed field whose integer goes on past the block.
  auto [rc3, out3] = peer(port, {"block", "ff"});
  EXPECT_EQ(rc3, 0) << out3;
  EXPECT_EQ(out3, "goaway 9 1\n");
}

std::vector<std::string> head(std::vector<std::string> more, const std::string& path = "/") {
  std::vector<std::string> args = {"fields", ":method=GET", ":scheme=http", ":path=" + path,
                                   ":authority=localhost"};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// nginx 1.22's answers to malformed heads: 400 for what is wrong with the
// request (its pseudo-header fields, RFC 9113 §8.3.1; and what the RFC
// makes malformed that nginx takes: connection-specific fields and a TE
// other than "trailers", §8.2.2; a bad content-length), RST_STREAM
// PROTOCOL_ERROR for a field name or value that is not one (§8.2.1: upper
// case, controls, spaces, ':' in a name; NUL, CR, LF in a value).
TEST(Http2Protocol, MalformedHeadsAreAnsweredAsNginxAnswersThem) {
  test::VigilServer s;
  const int port = start(s, "");
  ASSERT_GT(port, 0) << s.output();
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"fields", ":method=GET", ":path=/", ":authority=localhost"}, "status 400\n"},
      {{"fields", ":method=GET", ":scheme=http", ":authority=localhost"}, "status 400\n"},
      {{"fields", ":scheme=http", ":path=/", ":authority=localhost"}, "status 400\n"},
      {{"fields", ":method=GET", ":scheme=http", ":path=/"}, "status 400\n"},
      {{"fields", ":method=foo", ":scheme=http", ":path=/", ":authority=localhost"},
       "status 400\n"},
      {{"fields", ":method=GET", ":scheme=ht:tp", ":path=/", ":authority=localhost"},
       "status 400\n"},
      {head({":foo=bar"}), "status 400\n"},
      {head({":path=/again"}), "status 400\n"},
      {head({}, "index.html"), "status 400\n"},
      {head({}, "/index.html\\x02"), "status 400\n"},
      {head({}, ""), "status 400\n"},
      {head({"connection=keep-alive"}), "status 400\n"},
      {head({"keep-alive=300"}), "status 400\n"},
      {head({"proxy-connection=close"}), "status 400\n"},
      {head({"transfer-encoding=chunked"}), "status 400\n"},
      {head({"upgrade=h2c"}), "status 400\n"},
      {head({"te=gzip"}), "status 400\n"},
      {head({"te=trailers"}), "status 200\n"},
      {head({"content-length=abc"}), "status 400\n"},
      {head({"content-length=0", "content-length=0"}), "status 400\n"},
      {head({"content-length=5"}), "status 400\n"},
      {head({"X-Foo=bar"}), "rst 1 1\n"},
      {head({"x foo=bar"}), "rst 1 1\n"},
      {head({"x:foo=bar"}), "rst 1 1\n"},
      {head({"foo\\x02=bar"}), "rst 1 1\n"},
      {head({"x-foo=a\\r\\nreferer: b"}), "rst 1 1\n"},
      {head({"x-foo=a\\x00b"}), "rst 1 1\n"},
      {{"fields", ":Method=GET", ":scheme=http", ":path=/", ":authority=localhost"}, "rst 1 1\n"},
      {head({"x-foo=bar"}), "status 200\n"},
  };
  for (const auto& [args, want] : cases) {
    std::string what;
    for (const auto& a : args) what += a + " ";
    auto [rc, out] = peer(port, args);
    EXPECT_EQ(rc, 0) << what << out;
    EXPECT_EQ(out, want) << what << s.output();
  }
  EXPECT_TRUE(s.wait_output("client sent unknown pseudo-header")) << s.output();
  EXPECT_TRUE(s.wait_output("client sent invalid header name")) << s.output();
}

// The 400 of a malformed head goes through the server's error_page (here
// to a 418; h2_error_page.t's goes to a "return 444").
TEST(Http2Protocol, AMalformedHeadsAnswerTakesTheErrorPage) {
  test::VigilServer s;
  const int port = start(s, "error_page 400 = /e;\nlocation = /e { return 418; }");
  ASSERT_GT(port, 0) << s.output();
  auto [rc, out] = peer(port, head({"te=gzip"}));
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out, "status 418\n") << s.output();
  auto [rc2, out2] = peer(port, {"fields", ":method=GET", ":path=/", ":authority=localhost"});
  EXPECT_EQ(rc2, 0) << out2;
  EXPECT_EQ(out2, "status 418\n") << s.output();
}

// underscores_in_headers and ignore_invalid_headers as over HTTP/1.1: a
// field name with '_' is dropped by default (the fields after it still
// come), kept with either directive.
TEST(Http2Protocol, UnderscoresInHeadersAndIgnoreInvalidHeaders) {
  const std::string echo =
      "add_header X-Sent-Foo \"$http_x_foo\" always;\n"
      "add_header X-Sent-Referer \"$http_referer\" always;";
  for (const auto& [directive, want] : std::vector<std::pair<std::string, std::string>>{
           {"", "status 200 x-sent-referer=see-this\n"},
           {"underscores_in_headers on;", "status 200 x-sent-foo=x-bar x-sent-referer=see-this\n"},
           {"ignore_invalid_headers off;",
            "status 200 x-sent-foo=x-bar x-sent-referer=see-this\n"}}) {
    test::VigilServer s;
    const int port = start(s, directive + "\n" + echo);
    ASSERT_GT(port, 0) << s.output();
    auto [rc, out] = peer(port, head({"x_foo=x-bar", "referer=see-this"}, "/index.html"));
    EXPECT_EQ(rc, 0) << out;
    EXPECT_EQ(out, want) << directive << s.output();
  }
}

// A response head of more than 64 KiB goes in a HEADERS frame and
// CONTINUATIONs as long as the client's SETTINGS_MAX_FRAME_SIZE allows, as
// nginx sends it (h2_headers.t "response header split" and "parts"); past
// kMaxResponseHead (1 MiB) the stream is reset with INTERNAL_ERROR (the
// head was formatted: no other can follow), logged.
TEST(Http2Protocol, AResponseHeadOfMoreThan64KiBComesInContinuations) {
  test::VigilServer s;
  const std::string value(20000, 'x');
  std::string five, sixty;
  for (int i = 0; i < 5; ++i)
    five += "add_header X-Long-" + std::to_string(i) + " " + value + ";\n";
  for (int i = 0; i < 60; ++i)
    sixty += "add_header X-Long-" + std::to_string(i) + " " + value + ";\n";
  const int port = start(s, "location /five { " + five + " return 200 five; }\n" +
                                "location /sixty { " + sixty + " return 200 sixty; }");
  ASSERT_GT(port, 0) << s.output();
  auto [rc, out] = peer(port, {"head", "/five"});
  EXPECT_EQ(rc, 0) << out;
  int status = 0, frames = 0, largest = 0, block = 0, fields = 0;
  ASSERT_EQ(std::sscanf(out.c_str(), "status %d frames %d largest %d block %d fields %d", &status,
                        &frames, &largest, &block, &fields),
            5)
      << out << s.output();
  EXPECT_EQ(status, 200);
  EXPECT_GE(frames, 5);
  EXPECT_LE(largest, 16384);
  EXPECT_GT(fields, 100000);
  // A client that allows larger frames gets the head in one HEADERS frame,
  // as nginx fills them (h2_headers.t "response header - parts").
  auto [rc1, out1] = peer(port, {"head", "/five", "131072"});
  EXPECT_EQ(rc1, 0) << out1;
  ASSERT_EQ(std::sscanf(out1.c_str(), "status %d frames %d largest %d block %d fields %d", &status,
                        &frames, &largest, &block, &fields),
            5)
      << out1 << s.output();
  EXPECT_EQ(status, 200);
  EXPECT_EQ(frames, 1);
  EXPECT_EQ(largest, block);
  EXPECT_GT(fields, 100000);
  auto [rc2, out2] = peer(port, {"head", "/sixty"});
  EXPECT_EQ(rc2, 0) << out2;
  EXPECT_EQ(out2, "rst 1 2\n") << s.output();
  EXPECT_TRUE(s.wait_output("response head too large for http2")) << s.output();
}

}  // namespace
}  // namespace vigil
