// The http core directives of nginx that shape the response head and the
// request's URI, over real sockets: expires (Expires and Cache-Control),
// merge_slashes; checked against nginx 1.22.
#include <gtest/gtest.h>

#include <algorithm>
#include <ctime>
#include <string>

#include "codec/http_date.h"
#include "integration/http_harness.h"
#include "integration/proxy_backend.h"

namespace vigil::test {
namespace {

class HttpCoreDirectives : public ::testing::Test {
 protected:
  bool start(const std::string& server_body, const std::string& http = "") {
    port_ = free_port();
    for (const char* dir : {"", "max/", "off/", "access/", "access/in/", "neg/", "daily/",
                            "zero/", "var/", "mod/"}) {
      server_.write(std::string("html/") + dir + "f", "file\n");
    }
    return server_.start(http + "\nserver { listen 127.0.0.1:" + std::to_string(port_) +
                         "; root html; access_log off;\n" + server_body + "\n}");
  }
  Response request(const std::string& target, const std::string& extra = "") {
    return get(port_, simple_get(target, "localhost", extra));
  }
  // The Expires field's time, or -1.
  static std::time_t expires_of(const Response& r) {
    auto t = http::parse_http_date(r.header("expires"), std::time(nullptr));
    return t ? *t : -1;
  }
  static long max_age_of(const Response& r) {
    const std::string cc = r.header("cache-control");
    if (!cc.starts_with("max-age=")) return -1;
    return std::stol(cc.substr(8));
  }
  VigilServer server_;
  int port_ = 0;
};

TEST_F(HttpCoreDirectives, ExpiresForms) {
  ASSERT_TRUE(start("expires epoch;\n"
                    "location /f { }\n"
                    "location /max/ { expires max; }\n"
                    "location /off/ { expires off; }\n"
                    "location /access/ { expires 2048; location /access/in/ { } }\n"
                    "location /neg/ { expires -1h; }\n"
                    "location /daily/ { expires @15h30m33s; }\n"
                    "location /zero/ { expires 0; }\n"
                    "location /mod/ { expires modified 1d; }"))
      << server_.output();
  Response r = request("/f");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("expires"), "Thu, 01 Jan 1970 00:00:01 GMT");
  EXPECT_EQ(r.header("cache-control"), "no-cache");
  r = request("/max/f");
  EXPECT_EQ(r.header("expires"), "Thu, 31 Dec 2037 23:55:55 GMT");
  EXPECT_EQ(r.header("cache-control"), "max-age=315360000");
  r = request("/off/f");
  EXPECT_EQ(r.status, 200);
  EXPECT_FALSE(r.has("expires"));
  EXPECT_FALSE(r.has("cache-control"));
  for (const char* path : {"/access/f", "/access/in/f"}) {
    const std::time_t before = std::time(nullptr);
    r = request(path);
    EXPECT_EQ(r.header("cache-control"), "max-age=2048") << path;
    EXPECT_GE(expires_of(r), before + 2048) << path;
    EXPECT_LE(expires_of(r), std::time(nullptr) + 2048) << path;
  }
  // A negative time: a date in the past, and no caching.
  r = request("/neg/f");
  EXPECT_EQ(r.header("cache-control"), "no-cache");
  EXPECT_GT(expires_of(r), 0);
  EXPECT_LT(expires_of(r), std::time(nullptr));
  // @time: the next 15:30:33 local time, and the seconds until then.
  const std::time_t before = std::time(nullptr);
  r = request("/daily/f");
  const std::time_t at = expires_of(r);
  ASSERT_GT(at, before) << r.head;
  EXPECT_LE(at, std::time(nullptr) + 24 * 3600);
  std::tm tm{};
  ASSERT_NE(::localtime_r(&at, &tm), nullptr);
  EXPECT_EQ(tm.tm_hour * 3600 + tm.tm_min * 60 + tm.tm_sec, 15 * 3600 + 30 * 60 + 33);
  EXPECT_GE(max_age_of(r), at - std::time(nullptr));
  EXPECT_LE(max_age_of(r), at - before);
  r = request("/zero/f");
  EXPECT_EQ(r.header("cache-control"), "max-age=0");
  EXPECT_NE(expires_of(r), -1);
  // modified: from the file's Last-Modified (written just now).
  r = request("/mod/f");
  auto modified = http::parse_http_date(r.header("last-modified"), std::time(nullptr));
  ASSERT_TRUE(modified.has_value()) << r.head;
  EXPECT_EQ(expires_of(r), *modified + 86400);
  EXPECT_GT(max_age_of(r), 86400 - 600);
  EXPECT_LE(max_age_of(r), 86400);
}

TEST_F(HttpCoreDirectives, ExpiresOnlyForSuccessesAndRedirects) {
  ASSERT_TRUE(start("expires 1h;\n"
                    "location /f { }\n"
                    "location /r { return 302 /f; }\n"
                    "location /e { return 403; }"))
      << server_.output();
  EXPECT_EQ(request("/f").header("cache-control"), "max-age=3600");
  Response r = request("/r");
  EXPECT_EQ(r.status, 302);
  EXPECT_EQ(r.header("cache-control"), "max-age=3600");
  // A 304 too.
  r = request("/f", "If-Modified-Since: " + request("/f").header("last-modified") + "\r\n");
  EXPECT_EQ(r.status, 304);
  EXPECT_EQ(r.header("cache-control"), "max-age=3600");
  for (const char* path : {"/missing", "/e"}) {
    r = request(path);
    EXPECT_GE(r.status, 400) << path;
    EXPECT_FALSE(r.has("expires")) << path;
    EXPECT_FALSE(r.has("cache-control")) << path;
  }
}

TEST_F(HttpCoreDirectives, ExpiresWithVariables) {
  ASSERT_TRUE(start("location /var/ { expires $arg_e; }\n"
                    "location /mod/ { expires modified $arg_e; }"))
      << server_.output();
  EXPECT_EQ(request("/var/f?e=epoch").header("expires"), "Thu, 01 Jan 1970 00:00:01 GMT");
  EXPECT_EQ(request("/var/f?e=max").header("cache-control"), "max-age=315360000");
  EXPECT_EQ(request("/var/f?e=2048").header("cache-control"), "max-age=2048");
  EXPECT_EQ(request("/var/f?e=-2048").header("cache-control"), "no-cache");
  EXPECT_EQ(request("/var/f?e=1h").header("cache-control"), "max-age=3600");
  // off, nothing, or not a time: no fields at all.
  for (const char* q : {"?e=off", "", "?e=bad", "?e=@25h"}) {
    Response r = request(std::string("/var/f") + q);
    EXPECT_EQ(r.status, 200) << q;
    EXPECT_FALSE(r.has("expires")) << q;
    EXPECT_FALSE(r.has("cache-control")) << q;
  }
  // "modified" takes a time only.
  EXPECT_FALSE(request("/mod/f?e=epoch").has("expires"));
  EXPECT_LE(max_age_of(request("/mod/f?e=2048")), 2048);
  EXPECT_GT(max_age_of(request("/mod/f?e=2048")), 2048 - 600);
}

TEST_F(HttpCoreDirectives, ExpiresReplacesAProxiedResponsesFields) {
  Backend backend([](BackendConn& c, const BackendRequest&) {
    return c.send(backend_response(200, "backend",
                                   "Last-Modified: Mon, 28 Sep 1970 06:00:00 GMT\r\n"
                                   "Expires: Fri, 01 Jan 2100 00:00:00 GMT\r\n"
                                   "Cache-Control: private\r\nCache-Control: max-age=5\r\n"));
  });
  ASSERT_TRUE(start("location /p { expires modified 2048; proxy_pass http://" +
                    backend.address() + "; }\n"
                    "location /q { proxy_pass http://" + backend.address() + "; }"))
      << server_.output();
  Response r = request("/p");
  EXPECT_EQ(r.body, "backend");
  EXPECT_EQ(r.header("expires"), "Mon, 28 Sep 1970 06:34:08 GMT");
  EXPECT_EQ(r.header("cache-control"), "no-cache");  // long past
  EXPECT_EQ(r.head.find("Cache-Control"), r.head.rfind("Cache-Control")) << r.head;
  EXPECT_EQ(r.head.find("Expires"), r.head.rfind("Expires")) << r.head;
  // Without expires the backend's fields pass.
  r = request("/q");
  EXPECT_EQ(r.header("expires"), "Fri, 01 Jan 2100 00:00:00 GMT");
  EXPECT_NE(r.head.find("Cache-Control: private"), std::string::npos) << r.head;
}

TEST_F(HttpCoreDirectives, MergeSlashes) {
  port_ = free_port();
  const int merged = free_port();
  ASSERT_TRUE(server_.start(
      "server { listen 127.0.0.1:" + std::to_string(port_) +
      "; merge_slashes off; access_log off;\n"
      "  location / { add_header X-URI \"x $uri x\"; return 204; } }\n"
      "server { listen 127.0.0.1:" + std::to_string(merged) +
      "; access_log off;\n"
      "  location / { add_header X-URI \"x $uri x\"; return 204; }\n"
      "  location /a//b { return 200 unmerged; } }"))
      << server_.output();
  EXPECT_EQ(request("/foo//../bar").header("x-uri"), "x /foo/bar x");
  EXPECT_EQ(request("/foo///../bar").header("x-uri"), "x /foo//bar x");
  EXPECT_EQ(request("//a//b/").header("x-uri"), "x //a//b/ x");
  // The default merges, and locations are matched on the merged path.
  Response r = get(merged, simple_get("/foo///../bar"));
  EXPECT_EQ(r.header("x-uri"), "x /bar x");
  r = get(merged, simple_get("/a//b"));
  EXPECT_EQ(r.status, 204);
  EXPECT_EQ(r.header("x-uri"), "x /a/b x");
}

TEST_F(HttpCoreDirectives, IgnoreInvalidHeaders) {
  Backend backend;
  const std::string pass = "proxy_pass http://" + backend.address() + ";";
  port_ = free_port();
  const int off = free_port();
  const int underscores = free_port();
  ASSERT_TRUE(server_.start(
      "server { listen 127.0.0.1:" + std::to_string(port_) + "; access_log off;\n"
      "  location / { " + pass + " }\n"
      "  location /v { add_header X-Got \"$http_x_foo|$http_x_bar\"; return 204; } }\n"
      "server { listen 127.0.0.1:" + std::to_string(off) +
      "; access_log off; ignore_invalid_headers off;\n"
      "  location / { " + pass + " } }\n"
      "server { listen 127.0.0.1:" + std::to_string(underscores) +
      "; access_log off; underscores_in_headers on;\n"
      "  location / { " + pass + " } }"))
      << server_.output();
  const std::string fields = "x_foo: 1\r\n_foo: 2\r\nx.foo: 3\r\nX-Ok: 4\r\n";
  // The default: only letters, digits and '-' pass.
  Response r = get(port_, simple_get("/", "localhost", fields));
  EXPECT_EQ(r.status, 200);
  BackendRequest seen = backend.last();
  EXPECT_FALSE(seen.has("x_foo"));
  EXPECT_FALSE(seen.has("_foo"));
  EXPECT_FALSE(seen.has("x.foo"));
  EXPECT_EQ(seen.header("x-ok"), "4");
  EXPECT_TRUE(server_.wait_output("client sent invalid header line: \"x_foo\""));
  // ... and variables do not see the others either.
  r = get(port_, simple_get("/v", "localhost", "x_foo: a\r\nX-Bar: b\r\n"));
  EXPECT_EQ(r.header("x-got"), "|b");
  // off: every token passes.
  r = get(off, simple_get("/", "localhost", fields));
  EXPECT_EQ(r.status, 200);
  seen = backend.last();
  EXPECT_EQ(seen.header("x_foo"), "1");
  EXPECT_EQ(seen.header("_foo"), "2");
  EXPECT_EQ(seen.header("x.foo"), "3");
  // underscores_in_headers: '_' passes, '.' does not.
  r = get(underscores, simple_get("/", "localhost", fields));
  EXPECT_EQ(r.status, 200);
  seen = backend.last();
  EXPECT_EQ(seen.header("x_foo"), "1");
  EXPECT_EQ(seen.header("_foo"), "2");
  EXPECT_FALSE(seen.has("x.foo"));
  // A name that is no token is a 400 whatever the setting.
  for (int port : {port_, off}) {
    EXPECT_EQ(get(port, simple_get("/", "localhost", ":foo: x\r\n")).status, 400);
    EXPECT_EQ(get(port, simple_get("/", "localhost", "foo\x02: x\r\n")).status, 400);
  }
}

TEST_F(HttpCoreDirectives, AbsoluteRedirect) {
  ASSERT_TRUE(start("server_name on.example;\n"
                    "location /r { return 301 /redirect; }\n"
                    "location /r/name { return 301 /redirect; server_name_in_redirect on; }\n"
                    "location /r/port { return 301 /redirect; port_in_redirect off; }\n"
                    "location /r/off { return 301 /redirect; absolute_redirect off; }\n"
                    "location /r/url { return 302 http://elsewhere/x; }\n"
                    "location /e { error_page 404 = /r; }"))
      << server_.output();
  const std::string p = std::to_string(port_);
  auto location = [this](const std::string& target, const std::string& host) {
    return get(port_, simple_get(target, host)).header("location");
  };
  // The request's host, lower case, and the port.
  EXPECT_EQ(location("/r", "Host.Example"), "http://host.example:" + p + "/redirect");
  EXPECT_EQ(location("/r/name", "host.example"), "http://on.example:" + p + "/redirect");
  EXPECT_EQ(location("/r/port", "host.example"), "http://host.example/redirect");
  EXPECT_EQ(location("/r/off", "host.example"), "/redirect");
  EXPECT_EQ(location("/r/url", "host.example"), "http://elsewhere/x");
  // A directory without its slash; an error page that redirects.
  EXPECT_EQ(location("/max?a=b", "h"), "http://h:" + p + "/max/?a=b");
  EXPECT_EQ(location("/e/missing", "h"), "http://h:" + p + "/redirect");
  // Without a host: the address that took the connection.
  Response r = get(port_, "GET /r HTTP/1.0\r\n\r\n");
  EXPECT_EQ(r.header("location"), "http://127.0.0.1:" + p + "/redirect");
}

// $request_length: the head as received (line ends as the client sent
// them) and the body, framing included; $pipe: a request that came with the
// one before it.
TEST_F(HttpCoreDirectives, RequestLengthAndPipe) {
  ASSERT_TRUE(start("location /r { access_log logs/len.log len buffer=0; return 200; }",
                    "log_format len \"$uri $request_length $pipe\";"))
      << server_.output();
  auto log = [this](std::size_t lines) {
    std::string text;
    wait_until([&] {
      text = server_.read("logs/len.log");
      return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')) >= lines;
    });
    return text;
  };
  const std::string head = "GET /r HTTP/1.0\nHost: localhost\n\n";  // 33 bytes
  ASSERT_EQ(get(port_, head).status, 200);
  EXPECT_EQ(log(1), "/r 33 .\n");
  // A body that is read and thrown away counts, as sent.
  const std::string chunked =
      "POST /r HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n";
  Client c(port_);
  ASSERT_TRUE(c.send(chunked + simple_get("/r2")));
  EXPECT_EQ(c.read_response().status, 200);
  EXPECT_EQ(c.read_response().status, 200);
  const std::string text = log(3);
  EXPECT_NE(text.find("/r " + std::to_string(chunked.size()) + " .\n"), std::string::npos) << text;
  EXPECT_NE(text.find("/r2 " + std::to_string(simple_get("/r2").size()) + " p\n"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace vigil::test
