// An HTTP/2 connection's facts as its requests see them, through the real
// vigil binary and a raw-frame client (h2_frames_peer.py): $connection_requests
// counts the connection's streams, $request_length a stream's header block
// as it came (HPACK-coded), keepalive_time ends a connection that has lived
// that long with GOAWAY, and nginx 1.22's server push directives are taken
// and push nothing (RFC 9113 §8.4 lets a server never push). Where Vigil
// and nginx differ by the RFC: a body that disagrees with its
// content-length resets the stream, a bad PROXY header closes the
// connection without GOAWAY. A request body read into a
// client_body_buffer_size smaller than 1k still reaches the backend whole.
#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

#include "http_harness.h"
#include "proxy_backend.h"
#include "test_util.h"

namespace vigil {
namespace {

std::pair<int, std::string> frames_peer(int port, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {
      "/usr/bin/python3", std::string(VIGIL_SOURCE_DIR) + "/tests/integration/h2_frames_peer.py",
      std::to_string(port)};
  argv.insert(argv.end(), args.begin(), args.end());
  return test::run(argv);
}

class Http2Connection : public ::testing::Test {
 protected:
  void start(const std::string& server) {
    ASSERT_TRUE(s_.start("access_log off;\nserver {\n  listen 127.0.0.1:0;\n  http2 on;\n" +
                         server + "\n}\n"))
        << s_.output();
    port_ = s_.port();
    ASSERT_GT(port_, 0);
  }
  void TearDown() override { s_.stop(); }

  test::VigilServer s_;
  int port_ = 0;
};

// Each stream's line says "<i> block <n> body <requests> <length>": the
// connection's request count and the stream's header block (the second
// block is shorter: HPACK's dynamic table has the fields by then).
TEST_F(Http2Connection, RequestsAndRequestLengthAreTheConnectionsAndTheHeaderBlocks) {
  start("location /v { return 200 \"$connection_requests $request_length\\n\"; }");
  auto [rc, out] = frames_peer(port_, {"bodies", "3", "/v"});
  ASSERT_EQ(rc, 0) << out << s_.output();
  std::smatch m;
  const std::regex line("(\\d) block (\\d+) body (\\d+) (\\d+)\\n");
  int seen = 0;
  for (auto it = std::sregex_iterator(out.begin(), out.end(), line); it != std::sregex_iterator();
       ++it) {
    const std::smatch& l = *it;
    ++seen;
    EXPECT_EQ(l[3].str(), l[1].str()) << out;  // $connection_requests: 1, 2, 3
    EXPECT_EQ(l[4].str(), l[2].str()) << out;  // $request_length: the block's bytes
  }
  EXPECT_EQ(seen, 3) << out;
}

// keepalive_time: the stream that ends past it is the last; GOAWAY names it
// and the connection closes.
TEST_F(Http2Connection, KeepaliveTimeEndsTheConnectionWithGoaway) {
  start("keepalive_requests 1000000;\nkeepalive_time 200ms;\nlocation /t { return 200 ok; }");
  auto [rc, out] = frames_peer(port_, {"seq", "1000000", "/t"});
  ASSERT_EQ(rc, 0) << out << s_.output();
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, std::regex("answered (\\d+)\\n"))) << out;
  const long answered = std::stol(m[1]);
  EXPECT_GT(answered, 0) << out;
  EXPECT_LT(answered, 1000000) << out;
  // The last answered stream is 2 * answered - 1.
  EXPECT_NE(out.find("goaway 0 " + std::to_string(2 * answered - 1) + "\n"), std::string::npos)
      << out;
  EXPECT_NE(out.find("closed\n"), std::string::npos) << out;
}

TEST_F(Http2Connection, ServerPushDirectivesAreTakenAndPushNothing) {
  start(
      "http2_push_preload on;\nlocation /p {\n  http2_push /a;\n  http2_push /b;\n"
      "  add_header Link \"</a>; rel=preload\";\n  return 200 page;\n}\n"
      "location /a { return 200 a; }\nlocation /b { return 200 b; }");
  auto [rc, out] = frames_peer(port_, {"bodies", "1", "/p"});
  ASSERT_EQ(rc, 0) << out << s_.output();
  EXPECT_NE(out.find(" body page\n"), std::string::npos) << out;
  EXPECT_NE(out.find("pushes 0\n"), std::string::npos) << out;
}

// RFC 9113 §8.1.1: DATA that add up to more (or less) than content-length
// make the request malformed, a stream error of type PROTOCOL_ERROR (1),
// when nobody reads the body (nginx ignores it then).
TEST_F(Http2Connection, ABodyLongerThanItsContentLengthResetsTheStream) {
  start("location /t { return 200 ok; }");
  auto [more_rc, more] = frames_peer(port_, {"length", "/t", "3", "TEST"});
  EXPECT_EQ(more, "reset 1\n") << s_.output();
  auto [less_rc, less] = frames_peer(port_, {"length", "/t", "5", "TEST"});
  EXPECT_EQ(less, "reset 1\n") << s_.output();
  auto [same_rc, same] = frames_peer(port_, {"length", "/t", "4", "TEST"});
  EXPECT_EQ(same, "status 200\n") << s_.output();
}

// On a port that serves HTTP/1.1 and HTTP/2, a bad PROXY header gets no
// answer in either: the connection closes (RFC 9113 §3.4 lets the GOAWAY go).
TEST(Http2ConnectionProxy, AnInvalidProxyHeaderClosesTheConnection) {
  test::VigilServer s;
  ASSERT_TRUE(
      s.start("access_log off;\nserver {\n  listen 127.0.0.1:0 proxy_protocol;\n"
              "  http2 on;\n  location / { return 200 \"$proxy_protocol_addr\\n\"; }\n}\n"))
      << s.output();
  {
    auto [rc, out] = test::run({"curl", "-sS", "--http2-prior-knowledge", "--haproxy-protocol",
                                "http://127.0.0.1:" + std::to_string(s.port()) + "/"});
    EXPECT_EQ(out, "127.0.0.1\n") << s.output();
  }
  test::Client c(s.port());
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c.send(std::string("BOGUS TCP4 192.0.2.1 192.0.2.2 1234 5678\r\n") +
                     "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"));
  EXPECT_TRUE(c.closed_within(5000));
  EXPECT_EQ(c.extra(), "");
  s.stop();
}

TEST(Http2ConnectionConf, PushDirectivesAreCheckedAsNginxDoes) {
  test::VigilServer s;
  auto [ok, ok_out] = test::check_http_conf(
      s, "http2_push_preload off;\nserver { http2_push /x; http2_push off; }");
  EXPECT_EQ(ok, 0) << ok_out;
  auto [bad, bad_out] = test::check_http_conf(s, "http2_push_preload maybe;");
  EXPECT_NE(bad, 0) << bad_out;
  EXPECT_NE(bad_out.find("[emerg]"), std::string::npos) << bad_out;
  auto [none, none_out] = test::check_http_conf(s, "http2_push;");
  EXPECT_NE(none, 0) << none_out;
}

// Proxies to a backend with `directives` in the location and sends three
// bodies with their content-length: `more` carries more than it says,
// `less` less (each answered 400 and logged), `same` what it says (200).
void expect_length_mismatches_are_400(const std::string& directives, const std::string& declared,
                                      const std::string& more, const std::string& less,
                                      const std::string& same_declared, const std::string& same) {
  test::Backend backend([](test::BackendConn& c, const test::BackendRequest&) {
    return c.send(test::backend_response(200, "got\n"));
  });
  test::VigilServer s;
  ASSERT_TRUE(
      s.start("access_log off;\nserver {\n  listen 127.0.0.1:0;\n  http2 on;\n"
              "  location / { " +
              directives + " proxy_pass http://" + backend.address() + "; }\n}\n"))
      << s.output();
  auto [more_rc, more_out] = frames_peer(s.port(), {"length", "/t", declared, more});
  EXPECT_EQ(more_out, "status 400\n") << s.output();
  EXPECT_TRUE(s.wait_output("client intended to send body data larger than declared"))
      << s.output();
  auto [less_rc, less_out] = frames_peer(s.port(), {"length", "/t", declared, less});
  EXPECT_EQ(less_out, "status 400\n") << s.output();
  EXPECT_TRUE(s.wait_output("client prematurely closed stream")) << s.output();
  auto [same_rc, same_out] = frames_peer(s.port(), {"length", "/t", same_declared, same});
  EXPECT_EQ(same_out, "status 200\n") << s.output();
  backend.stop();
  s.stop();
}

// A body read (here to pass it on) whose DATA add up to more or less than
// its content-length is answered 400, as nginx answers it ("client
// intended to send body data larger than declared", "client prematurely
// closed stream"); RFC 9113 §8.1.1 lets the server answer a malformed
// request before the stream closes. The backend never sees it.
TEST(Http2ConnectionBody, ABodyThatDisagreesWithItsContentLengthIsABadRequest) {
  expect_length_mismatches_are_400("", "4", "TESTS", "TES", "4", "TEST");
}

// The same with proxy_request_buffering off, the body in two DATA frames:
// the backend is connected (and may have part of the body) when the
// mismatch shows; no response has begun, so the client gets the 400 and
// the backend connection is dropped (nginx answers the same).
TEST(Http2ConnectionBody, AnUnbufferedBodyThatDisagreesWithItsContentLengthIsABadRequest) {
  expect_length_mismatches_are_400("proxy_request_buffering off;", "10", "0123456789|many",
                                   "0123|56789", "9", "0123|56789");
}

// nginx takes any client_body_buffer_size; a small one means the body
// reaches the backend in more pieces.
TEST(Http2ConnectionBody, SmallClientBodyBufferStillCarriesTheWholeBody) {
  // h2_peer.py's body: 'a'..'z' repeated.
  test::Backend backend([](test::BackendConn& c, const test::BackendRequest& r) {
    bool whole = r.body.size() == 5000;
    for (std::size_t i = 0; whole && i < r.body.size(); ++i) {
      whole = r.body[i] == static_cast<char>('a' + i % 26);
    }
    return c.send(test::backend_response(whole ? 200 : 500, "got\n"));
  });
  test::VigilServer s;
  ASSERT_TRUE(
      s.start("access_log off;\nserver {\n  listen 127.0.0.1:0;\n  http2 on;\n"
              "  location / { client_body_buffer_size 512; proxy_pass http://" +
              backend.address() + "; }\n}\n"))
      << s.output();
  auto [rc, out] = test::run({"/usr/bin/python3",
                              std::string(VIGIL_SOURCE_DIR) + "/tests/integration/h2_peer.py",
                              std::to_string(s.port()), "post", "/", "5000"});
  EXPECT_EQ(rc, 0) << out << s.output();
  EXPECT_NE(out.find("/ 200 4 "), std::string::npos) << out;
  backend.stop();
  s.stop();
}

}  // namespace
}  // namespace vigil
