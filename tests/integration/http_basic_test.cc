// The static server as a real process: GET and HEAD, the response header,
// keep-alive and Connection: close, directories, types, big files with and
// without sendfile, virtual servers and several ports.
#include <gtest/gtest.h>

#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "http_harness.h"

namespace vigil {
namespace {

using test::Client;
using test::Response;
using test::VigilServer;

std::string big_content(std::size_t n) {
  std::string s(n, '\0');
  std::uint32_t x = 12345;
  for (std::size_t i = 0; i < n; ++i) {
    x = x * 1103515245u + 12345u;
    s[i] = static_cast<char>(x >> 16);
  }
  return s;
}

class HttpBasic : public ::testing::Test {
 protected:
  void SetUp() override {
    server_.write("html/index.html", "<h1>hello</h1>\n");
    server_.write("html/style.css", "body{}\n");
    server_.write("html/data.unknownext", "x");
    server_.write("html/sub/index.html", "sub index\n");
    server_.write("html/noindex/file.txt", "file\n");
    server_.write("conf/mime.types", "types { text/html html; text/css css; text/plain txt; }\n");
  }
  bool start(const std::string& extra = "", const std::string& server_extra = "") {
    if (!server_.start("include mime.types;\ndefault_type application/octet-stream;\n" + extra +
                         "\nserver {\n listen 127.0.0.1:" + std::to_string(port_) +
                         ";\n root html;\n" + server_extra + "\n}\n")) return false;
    port_ = server_.port();
    return port_ > 0;
  }

  VigilServer server_;
  int port_ = 0;
};

TEST_F(HttpBasic, GetServesTheFileWithNginxHeaders) {
  ASSERT_TRUE(start()) << server_.output();
  Response r = test::get(port_, test::simple_get("/index.html"));
  ASSERT_TRUE(r.complete) << server_.output();
  EXPECT_EQ(r.status_line, "HTTP/1.1 200 OK");
  EXPECT_EQ(r.body, "<h1>hello</h1>\n");
  EXPECT_EQ(r.header("server"), "vigil/0.1.0");
  EXPECT_EQ(r.header("content-type"), "text/html");
  EXPECT_EQ(r.header("content-length"), "15");
  EXPECT_EQ(r.header("connection"), "keep-alive");
  EXPECT_EQ(r.header("accept-ranges"), "bytes");
  EXPECT_TRUE(
      std::regex_match(r.header("date"), std::regex("[A-Z][a-z]{2}, \\d\\d [A-Z][a-z]{2} \\d{4} "
                                                    "\\d\\d:\\d\\d:\\d\\d GMT")))
      << r.header("date");
  EXPECT_TRUE(std::regex_match(r.header("last-modified"), std::regex(".* GMT")));
  // nginx's ETag: "<mtime hex>-<size hex>".
  struct stat st;
  ASSERT_EQ(::stat(server_.path("html/index.html").c_str(), &st), 0);
  char etag[64];
  std::snprintf(etag, sizeof etag, "\"%llx-%llx\"", static_cast<unsigned long long>(st.st_mtime),
                static_cast<unsigned long long>(st.st_size));
  EXPECT_EQ(r.header("etag"), etag);
  // The header order nginx uses.
  EXPECT_LT(r.head.find("Server:"), r.head.find("Date:"));
  EXPECT_LT(r.head.find("Date:"), r.head.find("Content-Type:"));
  EXPECT_LT(r.head.find("Content-Length:"), r.head.find("Last-Modified:"));
  EXPECT_LT(r.head.find("Connection:"), r.head.find("ETag:"));
}

TEST_F(HttpBasic, HeadSendsTheHeaderOnly) {
  ASSERT_TRUE(start()) << server_.output();
  Client c(port_);
  ASSERT_TRUE(c.send("HEAD /index.html HTTP/1.1\r\nHost: x\r\n\r\n"));
  Response r = c.read_response(true);
  ASSERT_TRUE(r.complete);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("content-length"), "15");
  // Nothing follows the header: the next response starts right after it.
  ASSERT_TRUE(c.send(test::simple_get("/style.css")));
  Response r2 = c.read_response();
  EXPECT_EQ(r2.status, 200);
  EXPECT_EQ(r2.body, "body{}\n");
}

TEST_F(HttpBasic, KeepAliveServesManyRequestsOnOneConnection) {
  ASSERT_TRUE(start()) << server_.output();
  Client c(port_);
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(c.send(test::simple_get("/index.html")));
    Response r = c.read_response();
    ASSERT_TRUE(r.complete) << i;
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.header("connection"), "keep-alive");
  }
  // Connection: close ends it after the response (RFC 9112 §9.6).
  ASSERT_TRUE(c.send(test::simple_get("/index.html", "x", "Connection: close\r\n")));
  Response r = c.read_response();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("connection"), "close");
  EXPECT_TRUE(c.closed_within(2000));
}

TEST_F(HttpBasic, Http10ClosesUnlessKeepAliveIsAsked) {
  ASSERT_TRUE(start()) << server_.output();
  {
    Client c(port_);
    ASSERT_TRUE(c.send("GET /index.html HTTP/1.0\r\n\r\n"));
    Response r = c.read_response();
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.header("connection"), "close");
    EXPECT_TRUE(c.closed_within(2000));
  }
  Client c(port_);
  ASSERT_TRUE(c.send("GET /index.html HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
  Response r = c.read_response();
  EXPECT_EQ(r.header("connection"), "keep-alive");
  ASSERT_TRUE(c.send("GET /index.html HTTP/1.0\r\n\r\n"));
  EXPECT_EQ(c.read_response().status, 200);
}

TEST_F(HttpBasic, KeepaliveRequestsLimitsRequestsPerConnection) {
  ASSERT_TRUE(start("keepalive_requests 3;")) << server_.output();
  Client c(port_);
  for (int i = 1; i <= 3; ++i) {
    ASSERT_TRUE(c.send(test::simple_get("/index.html")));
    Response r = c.read_response();
    EXPECT_EQ(r.header("connection"), i < 3 ? "keep-alive" : "close") << i;
  }
  EXPECT_TRUE(c.closed_within(2000));
}

TEST_F(HttpBasic, DirectoriesIndexRedirectAndForbidden) {
  ASSERT_TRUE(start()) << server_.output();
  Response r = test::get(port_, test::simple_get("/"));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "<h1>hello</h1>\n");
  r = test::get(port_, test::simple_get("/sub/"));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "sub index\n");
  // A directory without its slash: 301 to it, the query kept (as nginx).
  r = test::get(port_, test::simple_get("/sub?a=1"));
  EXPECT_EQ(r.status, 301);
  EXPECT_EQ(r.header("location"), "http://localhost:" + std::to_string(port_) + "/sub/?a=1");
  // No index file (and autoindex off, its default): 403.
  r = test::get(port_, test::simple_get("/noindex/"));
  EXPECT_EQ(r.status, 403);
  EXPECT_NE(r.body.find("403 Forbidden"), std::string::npos);
  r = test::get(port_, test::simple_get("/missing/"));
  EXPECT_EQ(r.status, 404);
  r = test::get(port_, test::simple_get("/missing.html"));
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.header("content-type"), "text/html");
  EXPECT_NE(r.body.find("<center><h1>404 Not Found</h1></center>"), std::string::npos);
  EXPECT_NE(r.body.find("vigil/0.1.0"), std::string::npos);
  // A file where a directory is expected.
  r = test::get(port_, test::simple_get("/index.html/x"));
  EXPECT_EQ(r.status, 404);
}

TEST_F(HttpBasic, IndexDirectiveTriesNamesInOrder) {
  server_.write("html/two/second.html", "second\n");
  ASSERT_TRUE(start("", "index first.html second.html;")) << server_.output();
  Response r = test::get(port_, test::simple_get("/two/"));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "second\n");
}

TEST_F(HttpBasic, ContentTypeFromTypesOrDefault) {
  ASSERT_TRUE(start()) << server_.output();
  EXPECT_EQ(test::get(port_, test::simple_get("/style.css")).header("content-type"), "text/css");
  EXPECT_EQ(test::get(port_, test::simple_get("/data.unknownext")).header("content-type"),
            "application/octet-stream");
  // Extensions match case-insensitively.
  server_.write("html/UP.CSS", "x");
  EXPECT_EQ(test::get(port_, test::simple_get("/UP.CSS")).header("content-type"), "text/css");
}

TEST_F(HttpBasic, BuiltInTypesWhenNoneAreConfigured) {
  ASSERT_TRUE(
      server_.start("server { listen 127.0.0.1:" + std::to_string(port_) + "; root html; }"))
      << server_.output();
  port_ = server_.port();
  EXPECT_EQ(test::get(port_, test::simple_get("/style.css")).header("content-type"), "text/css");
  EXPECT_EQ(test::get(port_, test::simple_get("/index.html")).header("content-type"), "text/html");
  // nginx's default_type default.
  EXPECT_EQ(test::get(port_, test::simple_get("/data.unknownext")).header("content-type"),
            "text/plain");
}

class HttpBigFile : public HttpBasic, public ::testing::WithParamInterface<std::string> {};

TEST_P(HttpBigFile, OneMebibyteArrivesByteForByte) {
  const std::string content = big_content(1 << 20);
  server_.write("html/big.bin", content);
  ASSERT_TRUE(start(GetParam())) << server_.output();
  Client c(port_);
  for (int i = 0; i < 2; ++i) {  // twice on one connection: the second starts clean
    ASSERT_TRUE(c.send(test::simple_get("/big.bin")));
    Response r = c.read_response(false, 20000);
    ASSERT_TRUE(r.complete);
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.header("content-length"), std::to_string(content.size()));
    EXPECT_TRUE(r.body == content) << "body differs";
  }
  // And through curl, compared on disk.
  auto [rc, out] = test::run({"curl", "-sS", "-o", server_.path("got.bin"),
                              "http://127.0.0.1:" + std::to_string(port_) + "/big.bin"});
  EXPECT_EQ(rc, 0) << out;
  EXPECT_TRUE(server_.read("got.bin") == content);
}

INSTANTIATE_TEST_SUITE_P(Sendfile, HttpBigFile,
                         ::testing::Values("sendfile on;", "sendfile off;",
                                           "sendfile on; tcp_nopush on;",
                                           "sendfile off; output_buffers 1 4k;"),
                         [](const auto& p) { return "Case" + std::to_string(p.index); });

TEST_F(HttpBasic, CurlGetsThePage) {
  ASSERT_TRUE(start()) << server_.output();
  auto [rc, out] =
      test::run({"curl", "-sS", "-i", "http://127.0.0.1:" + std::to_string(port_) + "/"});
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("HTTP/1.1 200 OK"), std::string::npos) << out;
  EXPECT_NE(out.find("<h1>hello</h1>"), std::string::npos) << out;
}

TEST_F(HttpBasic, ServerChosenByHostAmongServersOnOneAddress) {
  server_.write("a/index.html", "site a\n");
  server_.write("b/index.html", "site b\n");
  server_.write("w/index.html", "wildcard\n");
  server_.write("d/index.html", "default\n");
  const std::string listen = "listen 127.0.0.1:" + std::to_string(port_);
  ASSERT_TRUE(server_.start("server { " + listen +
                            "; server_name a.test; root a; }\n"
                            "server { " +
                            listen +
                            " default_server; root d; }\n"
                            "server { " +
                            listen +
                            "; server_name b.test www.b.test; root b; }\n"
                            "server { " +
                            listen + "; server_name *.wild.test; root w; }\n"))
      << server_.output();
  port_ = server_.port();
  EXPECT_EQ(test::get(port_, test::simple_get("/", "a.test")).body, "site a\n");
  EXPECT_EQ(test::get(port_, test::simple_get("/", "B.Test")).body, "site b\n");
  EXPECT_EQ(test::get(port_, test::simple_get("/", "www.b.test:8080")).body, "site b\n");
  EXPECT_EQ(test::get(port_, test::simple_get("/", "x.wild.test")).body, "wildcard\n");
  EXPECT_EQ(test::get(port_, test::simple_get("/", "other.test")).body, "default\n");
  // HTTP/1.0 without Host: the default server.
  EXPECT_EQ(test::get(port_, "GET / HTTP/1.0\r\n\r\n").body, "default\n");
  // An absolute-form target names the host (RFC 9112 §3.2.2).
  EXPECT_EQ(test::get(port_, "GET http://a.test/ HTTP/1.1\r\nHost: b.test\r\n\r\n").body,
            "site a\n");
}

TEST_F(HttpBasic, SeveralPortsEachWithItsServers) {
  // Two addresses, each on a port the kernel picks (all of 127/8 is loopback).
  server_.write("one/index.html", "one\n");
  server_.write("two/index.html", "two\n");
  ASSERT_TRUE(server_.start("server { listen 127.0.0.1:0; root one; }\n"
                            "server { listen 127.0.0.2:0; root two; }\n"))
      << server_.output();
  port_ = server_.port_of("127.0.0.1");
  const int port2 = server_.port_of("127.0.0.2");
  ASSERT_GT(port_, 0) << server_.output();
  ASSERT_GT(port2, 0) << server_.output();
  EXPECT_EQ(test::get(port_, test::simple_get("/")).body, "one\n");
  int fd = test::connect_ip("127.0.0.2", port2);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(test::send_all(fd, "GET / HTTP/1.0\r\n\r\n"));
  std::string two = test::read_n(fd, 1 << 16);
  ::close(fd);
  EXPECT_EQ(two.rfind("HTTP/1.1 200", 0), 0u) << two;
  EXPECT_TRUE(two.ends_with("\r\n\r\ntwo\n")) << two;
  // Each address is announced, with the port it got.
  EXPECT_NE(server_.output().find("listening on 127.0.0.1:" + std::to_string(port_)),
            std::string::npos);
  EXPECT_NE(server_.output().find("listening on 127.0.0.2:" + std::to_string(port2)),
            std::string::npos);
}

TEST_F(HttpBasic, LocationsExactPrefixAndNested) {
  server_.write("html/img/a.txt", "from root\n");
  server_.write("other/img/a.txt", "from other\n");
  server_.write("exact/exact.txt", "exact\n");
  ASSERT_TRUE(start("",
                    "location /img/ { root other; }\n"
                    "location = /exact.txt { root exact; }\n"
                    "location /deep/ { location /deep/er/ { root nested; } }\n"))
      << server_.output();
  EXPECT_EQ(test::get(port_, test::simple_get("/img/a.txt")).body, "from other\n");
  EXPECT_EQ(test::get(port_, test::simple_get("/exact.txt")).body, "exact\n");
  server_.write("nested/deep/er/f.txt", "nested\n");
  EXPECT_EQ(test::get(port_, test::simple_get("/deep/er/f.txt")).body, "nested\n");
}

TEST_F(HttpBasic, ErrorPageServesAFileWithTheErrorStatus) {
  server_.write("html/err/404.html", "custom not found\n");
  ASSERT_TRUE(start("", "error_page 404 /err/404.html;")) << server_.output();
  Response r = test::get(port_, test::simple_get("/nothing"));
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.body, "custom not found\n");
  // The page itself is missing: the built-in page, still 404.
  ASSERT_EQ(::unlink(server_.path("html/err/404.html").c_str()), 0);
  r = test::get(port_, test::simple_get("/nothing"));
  EXPECT_EQ(r.status, 404);
  EXPECT_NE(r.body.find("404 Not Found"), std::string::npos);
}

TEST_F(HttpBasic, IdleConnectionsAreClosedWhenSlotsRunOut) {
  // 32 slots (one is the listener): idle keep-alive connections are
  // reusable, and the pool closes the oldest through their read handler
  // (c.close) to make room, as nginx's ngx_drain_connections.
  ASSERT_TRUE(server_.start("server { listen 127.0.0.1:" + std::to_string(port_) +
                                "; root html; location = /status { stub_status; } }",
                            "", "worker_connections 32;"))
      << server_.output();
  port_ = server_.port();
  std::vector<std::unique_ptr<Client>> idle;
  for (int i = 0; i < 29; ++i) {
    idle.push_back(std::make_unique<Client>(port_));
    ASSERT_TRUE(idle.back()->send(test::simple_get("/index.html")));
    ASSERT_EQ(idle.back()->read_response().status, 200) << i;
  }
  for (int i = 0; i < 10; ++i) {
    Response r = test::get(port_, test::simple_get("/index.html"));
    EXPECT_EQ(r.status, 200) << "new client " << i;
  }
  int closed = 0;
  for (auto& c : idle) closed += c->closed_within(50) ? 1 : 0;
  EXPECT_GT(closed, 0);
  EXPECT_TRUE(server_.wait_output("worker_connections are not enough, reusing connections"));
  // The counters stayed consistent: "Waiting" is what is really idle.
  Response st = test::get(port_, test::simple_get("/status"));
  EXPECT_NE(st.body.find("Waiting: " + std::to_string(29 - closed) + " "), std::string::npos)
      << st.body << " closed " << closed;
}

// The level-triggered backends drive the same handlers differently (the read
// event is removed while writing): keep-alive and pipelining on each.
class HttpBackends : public HttpBasic, public ::testing::WithParamInterface<std::string> {};

TEST_P(HttpBackends, KeepAlivePipeliningAndBigFile) {
  const std::string content = big_content(300000);
  server_.write("html/big.bin", content);
  ASSERT_TRUE(server_.start(
      "sendfile on; server { listen 127.0.0.1:" + std::to_string(port_) + "; root html; }", "",
      "worker_connections 256; use " + GetParam() + ";"))
      << server_.output();
  port_ = server_.port();
  Client c(port_);
  ASSERT_TRUE(c.send(test::simple_get("/index.html") + test::simple_get("/big.bin") +
                     test::simple_get("/index.html")));
  EXPECT_EQ(c.read_response().body, "<h1>hello</h1>\n");
  EXPECT_TRUE(c.read_response(false, 10000).body == content);
  EXPECT_EQ(c.read_response().body, "<h1>hello</h1>\n");
  ASSERT_TRUE(c.send(test::simple_get("/index.html")));
  EXPECT_EQ(c.read_response().status, 200);
}

INSTANTIATE_TEST_SUITE_P(All, HttpBackends, ::testing::ValuesIn(test::backend_params()),
                         test::backend_param_name);

}  // namespace
}  // namespace vigil
