// Every error status the static server sends, the connection after it
// (closed for protocol errors, kept for the ones nginx keeps), and request
// paths that try to leave the document root.
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "http_harness.h"

namespace vigil {
namespace {

using test::Client;
using test::Response;
using test::VigilServer;

class HttpErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    server_.write("html/index.html", "index\n");
    server_.write("html/a.txt", "a\n");
    server_.write("secret.txt", "SECRET\n");  // beside the root, never to be served
    ASSERT_TRUE(server_.start("client_max_body_size 100;\nserver {\n listen 127.0.0.1:" +
                              std::to_string(port_) + ";\n root html;\n}\n"))
        << server_.output();
    port_ = server_.port();
  }

  // Sends `request`, expects `status` and the connection closed after it.
  void expect_closing_error(const std::string& request, int status) {
    Client c(port_);
    ASSERT_TRUE(c.send(request));
    Response r = c.read_response(request.starts_with("HEAD"));
    ASSERT_TRUE(r.complete) << "no response to: " << request;
    EXPECT_EQ(r.status, status) << request;
    EXPECT_EQ(r.header("connection"), "close") << request;
    EXPECT_EQ(r.header("content-type"), "text/html");
    EXPECT_NE(r.body.find(std::to_string(status)), std::string::npos);
    EXPECT_TRUE(c.closed_within(3000)) << request;
    EXPECT_EQ(c.extra(), "") << "nothing may follow the error";
  }

  VigilServer server_;
  int port_ = 0;
};

TEST_F(HttpErrors, BadRequestLineIs400) {
  expect_closing_error("GET\r\n\r\n", 400);
  expect_closing_error("GET / FOO/1.1\r\nHost: x\r\n\r\n", 400);
  expect_closing_error("GET  / HTTP/1.1\r\nHost: x\r\n\r\n", 400);
}

// HTTP/0.9's simple request (RFC 1945 §4.1): as nginx, the answer is the
// body alone, no status line and no fields, errors too, and the connection
// ends with it. Only GET has one: another method is 400.
TEST_F(HttpErrors, Http09IsAnsweredWithTheBodyAlone) {
  auto answer = [&](const std::string& request) {
    Client c(port_);
    EXPECT_TRUE(c.send(request));
    EXPECT_TRUE(c.closed_within(3000)) << request;
    return c.extra();
  };
  EXPECT_EQ(answer("GET /a.txt\r\n"), "a\n");
  EXPECT_EQ(answer("GET /a.txt?x \n"), "a\n");
  EXPECT_EQ(answer("GET http://localhost/a.txt\r\n"), "a\n");
  // The rest of the input is no request of its own.
  EXPECT_EQ(answer("GET /a.txt\r\nGET /index.html HTTP/1.0\r\n\r\n"), "a\n");
  for (auto [request, status] :
       {std::pair{"GET /missing\r\n", "404"}, std::pair{"HEAD /a.txt\r\n", "400"},
        std::pair{"POST /a.txt\r\n", "400"}, std::pair{"GET /%zz\r\n", "400"},
        std::pair{"GET /../secret.txt\r\n", "400"}}) {
    const std::string got = answer(request);
    EXPECT_TRUE(got.starts_with("<html>")) << request << got;
    EXPECT_NE(got.find(std::string("<title>") + status), std::string::npos) << request << got;
  }
  EXPECT_TRUE(server_.wait_output("client sent invalid request: invalid method in HTTP/0.9"))
      << server_.output();
}

TEST_F(HttpErrors, BadHeadersAre400) {
  // HTTP/1.1 needs Host (RFC 9112 §3.2), exactly one.
  expect_closing_error("GET / HTTP/1.1\r\n\r\n", 400);
  expect_closing_error("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400);
  // Space before the colon (RFC 9112 §5.1).
  expect_closing_error("GET / HTTP/1.1\r\nHost : a\r\n\r\n", 400);
  // Obsolete line folding.
  expect_closing_error("GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n", 400);
  // Conflicting framing (RFC 9112 §6.3).
  expect_closing_error(
      "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400);
}

TEST_F(HttpErrors, TooLongUriIs414) {
  expect_closing_error("GET /" + std::string(9000, 'a') + " HTTP/1.1\r\nHost: x\r\n\r\n", 414);
}

TEST_F(HttpErrors, TooLongHeaderIs431) {
  expect_closing_error(
      "GET / HTTP/1.1\r\nHost: x\r\nX-Long: " + std::string(9000, 'a') + "\r\n\r\n", 431);
  // Too many large buffers' worth of header (4 x 8k by default).
  std::string many = "GET / HTTP/1.1\r\nHost: x\r\n";
  for (int i = 0; i < 10; ++i)
    many += "X-" + std::to_string(i) + ": " + std::string(5000, 'b') + "\r\n";
  expect_closing_error(many + "\r\n", 431);
}

TEST_F(HttpErrors, LongButAcceptableHeadersUseLargeBuffers) {
  // A request line and fields longer than client_header_buffer_size (1k)
  // move to large buffers and still work.
  Client c(port_);
  std::string req = "GET /a.txt?" + std::string(3000, 'q') + " HTTP/1.1\r\nHost: x\r\n";
  for (int i = 0; i < 3; ++i)
    req += "X-" + std::to_string(i) + ": " + std::string(3000, 'v') + "\r\n";
  req += "\r\n";
  ASSERT_TRUE(c.send(req + req));  // twice, pipelined
  Response r = c.read_response();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "a\n");
  Response r2 = c.read_response();
  EXPECT_EQ(r2.status, 200);
  EXPECT_EQ(r2.body, "a\n");
}

TEST_F(HttpErrors, UnsupportedVersionIs505) {
  expect_closing_error("GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505);
  expect_closing_error("GET / HTTP/3.1\r\nHost: x\r\n\r\n", 505);
}

TEST_F(HttpErrors, UnknownMethodAndCodingAre501) {
  expect_closing_error("BREW / HTTP/1.1\r\nHost: x\r\n\r\n", 501);
  // A coding we do not implement before the final chunked (RFC 9112 §6.1);
  // without chunked last the length is unknowable, which is 400 (§6.3).
  expect_closing_error("GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
                       501);
  expect_closing_error("GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 400);
}

// TRACE is refused and the connection closed, as nginx does.
TEST_F(HttpErrors, TraceIs405AndCloses) {
  expect_closing_error("TRACE /a.txt HTTP/1.1\r\nHost: x\r\n\r\n", 405);
}

// A PUT without Content-Length or chunked coding has an empty body (RFC 9112
// §6.3): the static handler's 405, and the next request is read from the
// right byte.
TEST_F(HttpErrors, PutWithoutLengthHasNoBody) {
  Client c(port_);
  ASSERT_TRUE(c.send("PUT /a.txt HTTP/1.1\r\nHost: x\r\n\r\n" + test::simple_get("/a.txt")));
  Response put = c.read_response();
  ASSERT_TRUE(put.complete);
  EXPECT_EQ(put.status, 405);
  EXPECT_EQ(put.header("connection"), "keep-alive");
  Response r = c.read_response();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "a\n");
}

TEST_F(HttpErrors, TooLargeBodyIs413) {
  expect_closing_error("POST /a.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 101\r\n\r\n", 413);
  // Chunked: found out while reading.
  expect_closing_error(
      "POST /a.txt HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
      "64\r\n" +
          std::string(100, 'x') + "\r\n1\r\nx\r\n0\r\n\r\n",
      413);
}

TEST_F(HttpErrors, BadChunkedBodyIs400) {
  expect_closing_error(
      "POST /a.txt HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
      "zz\r\n",
      400);
}

TEST_F(HttpErrors, OtherMethodsAre405WithAllowAndTheConnectionStays) {
  Client c(port_);
  for (const char* m : {"POST", "DELETE", "OPTIONS", "PATCH"}) {
    ASSERT_TRUE(
        c.send(std::string(m) + " /a.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"));
    Response r = c.read_response();
    ASSERT_TRUE(r.complete) << m;
    EXPECT_EQ(r.status, 405) << m;
    EXPECT_EQ(r.header("allow"), "GET, HEAD");
    EXPECT_EQ(r.header("connection"), "keep-alive");
  }
  // A body is read and thrown away first: the next request is parsed from
  // the right byte.
  ASSERT_TRUE(c.send("POST /a.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nGET /"));
  EXPECT_EQ(c.read_response().status, 405);
  ASSERT_TRUE(c.send(test::simple_get("/a.txt")));
  Response r = c.read_response();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "a\n");
}

TEST_F(HttpErrors, NotFoundAndHeadOfAnErrorKeepTheConnection) {
  Client c(port_);
  ASSERT_TRUE(c.send(test::simple_get("/nope")));
  Response r = c.read_response();
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.header("connection"), "keep-alive");
  ASSERT_TRUE(c.send("HEAD /nope HTTP/1.1\r\nHost: x\r\n\r\n"));
  r = c.read_response(true);
  EXPECT_EQ(r.status, 404);
  ASSERT_TRUE(c.send(test::simple_get("/a.txt")));
  EXPECT_EQ(c.read_response().body, "a\n");
}

TEST_F(HttpErrors, ErrorAnswerSurvivesUnreadInput) {
  // The client is still sending when the error goes out: lingering close
  // reads the rest, so the response is not destroyed by a reset.
  Client c(port_);
  std::string junk(200000, 'j');
  ASSERT_TRUE(c.send("BREW / HTTP/1.1\r\nHost: x\r\n\r\n"));
  Response r = c.read_response();
  EXPECT_EQ(r.status, 501);
  (void)test::send_all(c.fd(), junk);
  EXPECT_TRUE(c.closed_within(8000));
}

TEST_F(HttpErrors, GarbageNeverHurtsTheWorker) {
  // Random bytes, random mutations of valid requests, cut at random places:
  // every connection ends (answered or closed) and the worker keeps serving.
  const std::string valid =
      "GET /a.txt HTTP/1.1\r\nHost: x\r\nRange: bytes=0-1\r\nIf-None-Match: \"x\"\r\n"
      "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n";
  std::uint32_t seed = 7;
  auto rnd = [&seed] {
    seed = seed * 1664525u + 1013904223u;
    return seed >> 8;
  };
  for (int i = 0; i < 200; ++i) {
    std::string req = valid;
    const int mutations = 1 + static_cast<int>(rnd() % 8);
    for (int m = 0; m < mutations; ++m) {
      std::size_t at = rnd() % req.size();
      switch (rnd() % 4) {
        case 0:
          req[at] = static_cast<char>(rnd());
          break;
        case 1:
          req.erase(at, 1 + rnd() % 5);
          break;
        case 2:
          req.insert(at, std::string(1 + rnd() % 3, static_cast<char>(rnd())));
          break;
        default:
          req.insert(at, req.substr(rnd() % req.size(), rnd() % 20));
          break;
      }
      if (req.empty()) req = "x";
    }
    if (rnd() % 3 == 0) req.resize(rnd() % req.size());
    Client c(port_);
    ASSERT_TRUE(c.ok());
    (void)c.send(req);
    ::shutdown(c.fd(), SHUT_WR);
    EXPECT_TRUE(c.closed_within(5000)) << "connection " << i << " hangs";
  }
  Response r = test::get(port_, test::simple_get("/a.txt"));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(server_.stop(), 0);
}

// ---- traversal ---------------------------------------------------------------

TEST_F(HttpErrors, TraversalNeverLeavesTheRoot) {
  const char* attempts[] = {
      "/../secret.txt",
      "/a/../../secret.txt",
      "/%2e%2e/secret.txt",
      "/%2E%2E/secret.txt",
      "/.%2e/secret.txt",
      "/..%2fsecret.txt",
      "/%2e%2e%2fsecret.txt",
      "/a%2f..%2f..%2fsecret.txt",
      "/./../secret.txt",
      "//../secret.txt",
      "/..\\secret.txt",
      "/%252e%252e/secret.txt",
      "/a.txt%00/../../secret.txt",
      "/..",
      "/../",
  };
  for (const char* target : attempts) {
    Client c(port_);
    ASSERT_TRUE(c.send("GET " + std::string(target) + " HTTP/1.1\r\nHost: x\r\n\r\n"));
    Response r = c.read_response();
    ASSERT_TRUE(r.complete) << target;
    EXPECT_TRUE(r.status == 400 || r.status == 404) << target << " -> " << r.status;
    EXPECT_EQ(r.body.find("SECRET"), std::string::npos) << target;
  }
  // curl --path-as-is sends the dots unchanged.
  auto [rc, out] = test::run({"curl", "-s", "--path-as-is",
                              "http://127.0.0.1:" + std::to_string(port_) + "/../secret.txt"});
  EXPECT_EQ(out.find("SECRET"), std::string::npos) << out;
  // Dot segments that stay inside the root are fine, and %2F is a separator.
  EXPECT_EQ(test::get(port_, test::simple_get("/x/../a.txt")).body, "a\n");
  EXPECT_EQ(test::get(port_, test::simple_get("/%61.txt")).body, "a\n");
  server_.write("html/d/f.txt", "f\n");
  EXPECT_EQ(test::get(port_, test::simple_get("/d%2Ff.txt")).body, "f\n");
}

TEST_F(HttpErrors, SymlinkInsideTheRootIsFollowedAsNginxDoes) {
  // Documented: disable_symlinks is off, so a link the root's owner placed
  // there is served (nginx's default).
  ASSERT_EQ(::symlink("a.txt", server_.path("html/link.txt").c_str()), 0);
  EXPECT_EQ(test::get(port_, test::simple_get("/link.txt")).body, "a\n");
}

}  // namespace
}  // namespace vigil
