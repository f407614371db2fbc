// Requests pipelined behind a chunked body that is read ahead (the proxy):
// the body is read from the socket in client_body_buffer_size pieces, so the
// bytes after its last chunk (the next requests) may be read with it. They
// belong to the next request on the connection and must be served, in order,
// whatever the sizes of the bodies and of the header buffer.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "http_harness.h"
#include "proxy_backend.h"

namespace vigil::test {
namespace {

std::string digits(std::size_t times) {
  std::string s;
  for (std::size_t i = 0; i < times; ++i) s += "0123456789";
  return s;
}

// One request with `body` as a single chunk.
std::string chunked_request(const std::string& uri, const std::string& body, bool close) {
  char size[32];
  std::snprintf(size, sizeof size, "%zx", body.size());
  return "POST " + uri + " HTTP/1.1\r\nHost: h\r\n" + (close ? "Connection: close\r\n" : "") +
         "Transfer-Encoding: chunked\r\n\r\n" + size + "\r\n" + body + "\r\n0\r\n\r\n";
}

// The same with Content-Length.
std::string length_request(const std::string& uri, const std::string& body, bool close) {
  return "POST " + uri + " HTTP/1.1\r\nHost: h\r\n" + (close ? "Connection: close\r\n" : "") +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

class ChunkedPipeline : public ::testing::Test {
 protected:
  void SetUp() override {
    backend_.set_handler([](BackendConn& c, const BackendRequest& r) {
      return c.send(backend_response(200, "got " + std::to_string(r.body.size()) + " " +
                                              r.body.substr(0, 6)));
    });
    port_ = free_port();
    ASSERT_TRUE(server_.start(
        "server { listen 127.0.0.1:" + std::to_string(port_) +
        "; client_header_buffer_size 1k;\n"
        "location / { client_body_buffer_size 2k; proxy_pass http://" +
        backend_.address() +
        "; }\n"
        "location /big { client_body_buffer_size 64k; proxy_pass http://" +
        backend_.address() +
        "; }\n"
        "location /stream { client_body_buffer_size 2k; proxy_request_buffering off;"
        " proxy_http_version 1.1; proxy_pass http://" +
        backend_.address() + "; }\n}"))
        << server_.output();
  }

  // Sends the requests with `sizes` (in tens of bytes, the last "foobar")
  // in one write and expects each answer in turn.
  void pipeline(const std::string& uri, const std::vector<std::size_t>& sizes,
                bool chunked = true) {
    std::string all;
    std::vector<std::string> bodies;
    for (std::size_t n : sizes) bodies.push_back(digits(n));
    bodies.push_back("foobar");
    for (std::size_t i = 0; i < bodies.size(); ++i) {
      const bool last = i + 1 == bodies.size();
      all += chunked ? chunked_request(uri, bodies[i], last) : length_request(uri, bodies[i], last);
    }
    Client c(port_);
    ASSERT_TRUE(c.send(all));
    for (std::size_t i = 0; i < bodies.size(); ++i) {
      Response r = c.read_response();
      EXPECT_EQ(r.status, 200) << uri << " request " << i << " " << server_.output();
      EXPECT_EQ(r.body, "got " + std::to_string(bodies[i].size()) + " " + bodies[i].substr(0, 6))
          << uri << " request " << i;
    }
    EXPECT_TRUE(c.closed_within(5000)) << uri;
  }

  VigilServer server_;
  Backend backend_;
  int port_ = 0;
};

// The bodies of body_chunked.t's pipelined tests: the second body is read
// past its end into the third request, which does not fit the 1k header
// buffer the head came in.
TEST_F(ChunkedPipeline, AfterBodiesReadAhead) {
  pipeline("/", {1, 128, 512});
  pipeline("/", {128, 512, 1});
}

// A body buffer larger than large_client_header_buffers: what is read past
// the body still goes to the next request.
TEST_F(ChunkedPipeline, AfterALargeBodyBuffer) {
  pipeline("/big", {1, 128, 512, 3000, 2});
}

// Content-Length bodies are never read past their end; the requests behind
// them wait in the socket (or, on io_uring, in the ring's buffers, which a
// check for a closed client must not take for nothing to read).
TEST_F(ChunkedPipeline, AfterContentLengthBodies) {
  pipeline("/", {1, 128, 512}, false);
  pipeline("/", {128, 512, 1}, false);
}

// The body streamed to the backend (proxy_request_buffering off).
TEST_F(ChunkedPipeline, AfterAStreamedBody) {
  pipeline("/stream", {1, 128, 512});
  pipeline("/stream", {128, 512, 1});
}

}  // namespace
}  // namespace vigil::test
