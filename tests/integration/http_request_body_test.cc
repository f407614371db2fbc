// The request-body API (http/core/request_body.h) over real sockets: a body
// read into the caller's buffer (the proxy) in pieces and chunked, a body
// thrown away (return, static) with the connection kept, and the ways
// reading ends early: 413 over client_max_body_size, 408 after
// client_body_timeout, the client closing mid-body.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "http_harness.h"
#include "proxy_backend.h"

namespace vigil::test {
namespace {

using Clock = std::chrono::steady_clock;

std::string pattern(std::size_t n) {
  std::string s(n, 'x');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + (i * 7 + i / 1000) % 26);
  return s;
}

// `body` as chunks of `size` bytes, with the last chunk.
std::string chunked(const std::string& body, std::size_t size) {
  std::string out;
  char line[32];
  for (std::size_t at = 0; at < body.size(); at += size) {
    const std::string piece = body.substr(at, size);
    std::snprintf(line, sizeof line, "%zx\r\n", piece.size());
    out += line + piece + "\r\n";
  }
  return out + "0\r\n\r\n";
}

class RequestBody : public ::testing::Test {
 protected:
  void SetUp() override {
    backend_.set_handler([](BackendConn& c, const BackendRequest& r) {
      return c.send(backend_response(200, "got " + std::to_string(r.body.size())));
    });
  }
  // One server; `locations` inside it. Statuses go to logs/status.log.
  bool start(const std::string& locations, const std::string& http = "") {
    port_ = free_port();
    return server_.start(
        http + "\nlog_format st '$status';\nserver { listen 127.0.0.1:" + std::to_string(port_) +
        "; access_log logs/status.log st buffer=0; root html;\n" + locations + "\n}");
  }
  std::string proxy(const std::string& extra = "") const {
    return "proxy_pass http://" + backend_.address() + "; proxy_http_version 1.1; " + extra;
  }
  // Waits (polling) for the access log to hold `n` lines; returns them.
  std::string statuses(std::size_t n, int timeout_ms = 5000) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    std::string text;
    for (;;) {
      std::ifstream in(server_.path("logs/status.log"));
      std::stringstream ss;
      ss << in.rdbuf();
      text = ss.str();
      std::size_t lines = 0;
      for (char ch : text) lines += ch == '\n';
      if (lines >= n || Clock::now() > deadline) return text;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  // Sends `s` in pieces of `size` bytes, each its own write, so the server
  // reads the body over several read events.
  static bool send_in_pieces(Client& c, const std::string& s, std::size_t size) {
    for (std::size_t at = 0; at < s.size(); at += size) {
      if (!c.send(s.substr(at, size))) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return true;
  }
  VigilServer server_;
  Backend backend_;
  int port_ = 0;
};

// Buffering off: the body passes through a 1k buffer, refilled from its
// start once sent, as the client sends it in pieces.
TEST_F(RequestBody, ReadInPiecesThroughTheBuffer) {
  ASSERT_TRUE(start("location / { " +
                    proxy("proxy_request_buffering off; client_body_buffer_size 1k;") + " }"))
      << server_.output();
  const std::string body = pattern(20000);
  Client c(port_);
  ASSERT_TRUE(c.send("POST /s HTTP/1.1\r\nHost: h\r\nContent-Length: 20000\r\n\r\n"));
  ASSERT_TRUE(send_in_pieces(c, body, 700));
  Response r = c.read_response();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "got 20000");
  EXPECT_EQ(backend_.last().body, body);
  // The connection is kept for the next request.
  ASSERT_TRUE(c.send("POST /s HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc"));
  EXPECT_EQ(c.read_response().body, "got 3");
  EXPECT_EQ(backend_.last().body, "abc");
}

// $request_body: the body read whole into the buffer (read ahead, plain or
// chunked); a body streamed through a smaller buffer has no value.
TEST_F(RequestBody, RequestBodyVariable) {
  ASSERT_TRUE(start("location / { " + proxy("client_body_buffer_size 1k;") +
                        " access_log logs/status.log st buffer=0;"
                        " access_log logs/body.log rb buffer=0; }",
                    "log_format rb '[$request_body]';"))
      << server_.output();
  EXPECT_EQ(get(port_,
                "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n"
                "Connection: close\r\n\r\nhello")
                .body,
            "got 5");
  EXPECT_EQ(get(port_,
                "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n"
                "Connection: close\r\n\r\n" +
                    chunked("chunked body", 5))
                .body,
            "got 12");
  EXPECT_EQ(get(port_,
                "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3000\r\n"
                "Connection: close\r\n\r\n" +
                    pattern(3000))
                .body,
            "got 3000");
  EXPECT_EQ(get(port_, "GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n").body, "got 0");
  statuses(4);
  EXPECT_EQ(server_.read("logs/body.log"), "[hello]\n[chunked body]\n[-]\n[-]\n");
}

// Buffering on: the body is read ahead into the buffer, then sent on.
TEST_F(RequestBody, ReadAheadInPieces) {
  ASSERT_TRUE(start("location / { " + proxy("client_body_buffer_size 64k;") + " }"))
      << server_.output();
  const std::string body = pattern(30000);
  Client c(port_);
  ASSERT_TRUE(c.send("PUT /b HTTP/1.1\r\nHost: h\r\nContent-Length: 30000\r\n\r\n"));
  ASSERT_TRUE(send_in_pieces(c, body, 4000));
  Response r = c.read_response();
  EXPECT_EQ(r.body, "got 30000");
  EXPECT_EQ(backend_.last().body, body);
  EXPECT_EQ(backend_.last().header("content-length"), "30000");
}

// A chunked body is decoded whatever its pieces; the backend gets the data.
TEST_F(RequestBody, ChunkedBodyIsDecoded) {
  ASSERT_TRUE(start("location /small { " + proxy() +
                    " }\n"
                    "location /stream { " +
                    proxy("proxy_request_buffering off; client_body_buffer_size 1k;") + " }"))
      << server_.output();
  const std::string body = pattern(5000);
  for (const char* where : {"/small", "/stream"}) {
    Client c(port_);
    ASSERT_TRUE(c.send(std::string("POST ") + where +
                       " HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"));
    ASSERT_TRUE(send_in_pieces(c, chunked(body, 333), 97));
    Response r = c.read_response();
    EXPECT_EQ(r.body, "got 5000") << where;
    EXPECT_EQ(backend_.last().body, body) << where;
  }
}

// A request right behind a chunked body, in the same write, is the next
// request on the connection: whether it came with the head (it stays in the
// header buffer) or was read from the socket with the body (the 100 says
// the head was read alone).
TEST_F(RequestBody, PipelinedRequestAfterAChunkedBody) {
  ASSERT_TRUE(start("location / { " + proxy() + " }")) << server_.output();
  const std::string next = "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nok";
  Client c(port_);
  ASSERT_TRUE(
      c.send("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
             "5\r\nhello\r\n0\r\n\r\n" +
             next));
  EXPECT_EQ(c.read_response().body, "got 5");
  EXPECT_EQ(c.read_response().body, "got 2");
  Client s(port_);
  ASSERT_TRUE(
      s.send("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n"
             "Expect: 100-continue\r\n\r\n"));
  EXPECT_EQ(s.read_response(true).status, 100);
  ASSERT_TRUE(s.send("5\r\nhello\r\n0\r\n\r\n" + next));
  EXPECT_EQ(s.read_response().body, "got 5");
  EXPECT_EQ(s.read_response().body, "got 2");
  EXPECT_EQ(backend_.requests(), 4);
}

// A body that fits the buffer is sent again to the next server; one that
// streamed through it (refilled from its start) cannot be, and the client
// gets the first server's answer.
TEST_F(RequestBody, RetryReplaysABodyThatFitsTheBuffer) {
  Backend refuses(
      [](BackendConn& c, const BackendRequest&) { return c.send(backend_response(503, "no")); });
  ASSERT_TRUE(start("location /fits { proxy_pass http://g; client_body_buffer_size 8k; " +
                        std::string("proxy_next_upstream http_503 non_idempotent; }\n") +
                        "location /streams { proxy_pass http://g; client_body_buffer_size 1k; "
                        "proxy_request_buffering off; proxy_http_version 1.1; "
                        "proxy_next_upstream http_503 non_idempotent; }",
                    "upstream g { server " + refuses.address() + " max_fails=0; server " +
                        backend_.address() + " max_fails=0; }"))
      << server_.output();
  const std::string body = pattern(6000);
  for (int i = 0; i < 2; ++i) {  // round robin: one of the two starts at the refusing server
    Client c(port_);
    ASSERT_TRUE(c.send("POST /fits HTTP/1.1\r\nHost: h\r\nContent-Length: 6000\r\n\r\n"));
    ASSERT_TRUE(send_in_pieces(c, body, 1500));
    EXPECT_EQ(c.read_response().body, "got 6000") << i;
    EXPECT_EQ(backend_.last().body, body) << i;
  }
  ASSERT_EQ(refuses.requests(), 1);
  EXPECT_EQ(refuses.last().body, body);
  int refused = 0;
  for (int i = 0; i < 2; ++i) {
    Client c(port_);
    ASSERT_TRUE(c.send("POST /streams HTTP/1.1\r\nHost: h\r\nContent-Length: 6000\r\n\r\n"));
    ASSERT_TRUE(send_in_pieces(c, body, 1500));
    Response r = c.read_response();
    if (r.status == 503) ++refused;
    EXPECT_EQ(backend_.last().body, body) << i;
  }
  EXPECT_EQ(refused, 1);
  EXPECT_EQ(refuses.requests(), 2);
  EXPECT_EQ(refuses.last().body, body);
}

// A handler that answers without the body throws it away, and the
// connection serves the next request: Content-Length and chunked, the
// body arriving after the head.
TEST_F(RequestBody, DiscardedBodyKeepsTheConnection) {
  server_.write("html/f.txt", "file\n");
  ASSERT_TRUE(start("location /r { return 200 \"ok\"; }")) << server_.output();
  Client c(port_);
  ASSERT_TRUE(c.send("POST /r HTTP/1.1\r\nHost: h\r\nContent-Length: 9000\r\n\r\n"));
  ASSERT_TRUE(send_in_pieces(c, pattern(9000), 1000));
  Response r = c.read_response();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "ok");
  EXPECT_EQ(r.header("connection"), "keep-alive");
  ASSERT_TRUE(c.send("GET /r HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"));
  ASSERT_TRUE(send_in_pieces(c, chunked(pattern(3000), 256), 50));
  EXPECT_EQ(c.read_response().body, "ok");
  // The chunked body with the next request right behind it.
  ASSERT_TRUE(
      c.send("GET /f.txt HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
             "3\r\nabc\r\n0\r\n\r\nGET /r HTTP/1.1\r\nHost: h\r\n\r\n"));
  EXPECT_EQ(c.read_response().body, "file\n");
  EXPECT_EQ(c.read_response().body, "ok");
  EXPECT_EQ(statuses(4), "200\n200\n200\n200\n");
}

// Expect: 100-continue: the word is sent before the body is read, once.
TEST_F(RequestBody, ContinueBeforeTheBody) {
  ASSERT_TRUE(start("location /r { return 200 \"ok\"; }\nlocation / { " + proxy() + " }"))
      << server_.output();
  for (const char* where : {"/r", "/p"}) {
    Client c(port_);
    ASSERT_TRUE(
        c.send(std::string("POST ") + where +
               " HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n"));
    EXPECT_EQ(c.read_response(true).status, 100) << where;
    ASSERT_TRUE(c.send("body"));
    Response r = c.read_response();
    EXPECT_EQ(r.status, 200) << where;
  }
  EXPECT_EQ(backend_.last().body, "body");
}

// Over client_max_body_size: 413, declared (Content-Length) or found while
// decoding a chunked body, whoever reads it.
TEST_F(RequestBody, OverMaxBodySizeIs413) {
  ASSERT_TRUE(start("client_max_body_size 1k;\nlocation /r { return 200 \"ok\"; }\nlocation / { " +
                    proxy() + " }"))
      << server_.output();
  for (const char* where : {"/r", "/p"}) {
    Client c(port_);
    ASSERT_TRUE(c.send(std::string("POST ") + where +
                       " HTTP/1.1\r\nHost: h\r\nContent-Length: 2000\r\n\r\n"));
    EXPECT_EQ(c.read_response().status, 413) << where;
    Client k(port_);
    ASSERT_TRUE(k.send(std::string("POST ") + where +
                       " HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"));
    ASSERT_TRUE(send_in_pieces(k, chunked(pattern(3000), 500), 600));
    EXPECT_EQ(k.read_response().status, 413) << where;
  }
  EXPECT_EQ(backend_.requests(), 0);
}

// An invalid chunked body: 400.
TEST_F(RequestBody, InvalidChunkedBodyIs400) {
  ASSERT_TRUE(start("location /r { return 200 \"ok\"; }\nlocation / { " + proxy() + " }"))
      << server_.output();
  for (const char* where : {"/r", "/p"}) {
    Client c(port_);
    ASSERT_TRUE(c.send(std::string("POST ") + where +
                       " HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"));
    ASSERT_TRUE(c.send("5\r\nhello\r\nzz\r\n"));
    EXPECT_EQ(c.read_response().status, 400) << where;
  }
  EXPECT_TRUE(server_.wait_output("client sent invalid chunked body")) << server_.output();
  EXPECT_EQ(backend_.requests(), 0);
}

// A client that stops sending its body is closed after client_body_timeout
// with 408 in the log, without an answer.
TEST_F(RequestBody, StalledBodyTimesOutWith408) {
  ASSERT_TRUE(
      start("client_body_timeout 300ms;\nlocation /r { return 200 \"ok\"; }\n"
            "location /s { " +
            proxy("proxy_request_buffering off;") + " }\nlocation / { " + proxy() + " }"))
      << server_.output();
  std::size_t n = 0;
  for (const char* where : {"/r", "/p", "/s"}) {
    Client c(port_);
    ASSERT_TRUE(c.send(std::string("POST ") + where +
                       " HTTP/1.1\r\nHost: h\r\nContent-Length: 100\r\n\r\n0123456789"));
    EXPECT_TRUE(c.closed_within(5000)) << where;
    EXPECT_EQ(c.extra(), "") << where;
    ++n;
    EXPECT_EQ(statuses(n).substr(4 * (n - 1)), "408\n") << where;
  }
  EXPECT_TRUE(server_.wait_output("client timed out reading the body")) << server_.output();
}

// A client that closes in the middle of its body: logged, and the request
// never reaches the backend when the body is read ahead.
TEST_F(RequestBody, ClientClosingMidBody) {
  ASSERT_TRUE(start("location /r { return 200 \"ok\"; }\nlocation / { " + proxy() + " }"))
      << server_.output();
  std::size_t n = 0;
  for (const char* where : {"/r", "/p"}) {
    {
      Client c(port_);
      ASSERT_TRUE(c.send(std::string("POST ") + where +
                         " HTTP/1.1\r\nHost: h\r\nContent-Length: 100\r\n\r\n0123456789"));
    }  // closed here
    ++n;
    EXPECT_TRUE(server_.wait_output_count("client prematurely closed connection", n, 5000))
        << where << server_.output();
    EXPECT_EQ(statuses(n).substr(4 * (n - 1)), "400\n") << where;
  }
  EXPECT_EQ(backend_.requests(), 0);
  // The worker goes on.
  EXPECT_EQ(get(port_, simple_get("/r")).body, "ok");
}

}  // namespace
}  // namespace vigil::test
