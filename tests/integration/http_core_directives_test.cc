// The http core directives of nginx that shape the response head and the
// request's URI, over real sockets: expires (Expires and Cache-Control),
// merge_slashes; checked against nginx 1.22.
#include <gtest/gtest.h>

#include <algorithm>
#include <ctime>
#include <random>
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
    // The server's clock and ours may read a second apart.
    EXPECT_GE(expires_of(r), before + 2048 - 1) << path;
    EXPECT_LE(expires_of(r), std::time(nullptr) + 2048 + 1) << path;
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
  EXPECT_LE(at, std::time(nullptr) + 24 * 3600 + 1);
  std::tm tm{};
  ASSERT_NE(::localtime_r(&at, &tm), nullptr);
  EXPECT_EQ(tm.tm_hour * 3600 + tm.tm_min * 60 + tm.tm_sec, 15 * 3600 + 30 * 60 + 33);
  // The server's clock and ours may read a second apart (as above).
  EXPECT_GE(max_age_of(r), at - std::time(nullptr) - 1);
  EXPECT_LE(max_age_of(r), at - before + 1);
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

// The whole answer to one request on a connection the server closes.
std::string raw_answer(int port, const std::string& request) {
  Client c(port);
  if (!c.send(request)) return {};
  return read_n(c.fd(), 1 << 20, 5000);
}

std::string close_request(const std::string& method, const std::string& target,
                          const std::string& version = "HTTP/1.1") {
  return method + " " + target + " " + version + "\r\nHost: localhost\r\nConnection: close\r\n\r\n";
}

TEST_F(HttpCoreDirectives, AddTrailer) {
  ASSERT_TRUE(start("add_trailer X-Var $host;\n"
                    "add_trailer X-Always \"a $host\" always;\n"
                    "add_trailer X-Empty '';\n"
                    "add_trailer X-Sent-Http $sent_http_accept_ranges;\n"
                    "add_trailer X-Sent-Trailer \"[$sent_trailer_x_var]\";\n"
                    "location /f { }\n"
                    "location /off/ { chunked_transfer_encoding off; }\n"
                    "location /max/ { add_trailer X-Own o; }\n"
                    "location /r { return 200 text; }"))
      << server_.output();
  // A body of known length goes chunked to an HTTP/1.1 client, the
  // trailer section after its last chunk, in order.
  std::string a = raw_answer(port_, close_request("GET", "/f"));
  const std::size_t end = a.find("\r\n\r\n");
  ASSERT_NE(end, std::string::npos) << a;
  const std::string head = a.substr(0, end + 2);
  EXPECT_NE(head.find("Transfer-Encoding: chunked\r\n"), std::string::npos) << head;
  EXPECT_EQ(head.find("Content-Length"), std::string::npos) << head;
  EXPECT_EQ(head.find("X-Var"), std::string::npos) << head;
  EXPECT_EQ(a.substr(end + 4),
            "5\r\nfile\n\r\n0\r\nX-Var: localhost\r\nX-Always: a localhost\r\n"
            "X-Sent-Http: bytes\r\nX-Sent-Trailer: [localhost]\r\n\r\n");
  // return's text too.
  a = raw_answer(port_, close_request("GET", "/r"));
  EXPECT_NE(a.find("4\r\ntext\r\n0\r\nX-Var: localhost\r\n"), std::string::npos) << a;
  // An error: only the `always` field.
  a = raw_answer(port_, close_request("GET", "/missing"));
  EXPECT_NE(a.find("HTTP/1.1 404"), std::string::npos) << a;
  EXPECT_NE(a.find("\r\n0\r\nX-Always: a localhost\r\n\r\n"),
            std::string::npos)
      << a;
  EXPECT_EQ(a.find("X-Var"), std::string::npos) << a;
  // No trailers for HTTP/1.0, HEAD, or with chunked_transfer_encoding off:
  // the length is said.
  a = raw_answer(port_, close_request("GET", "/f", "HTTP/1.0"));
  EXPECT_NE(a.find("Content-Length: 5\r\n"), std::string::npos) << a;
  EXPECT_TRUE(a.ends_with("\r\n\r\nfile\n")) << a;
  a = raw_answer(port_, close_request("HEAD", "/f"));
  EXPECT_NE(a.find("Content-Length: 5\r\n"), std::string::npos) << a;
  EXPECT_EQ(a.find("X-"), std::string::npos) << a;
  a = raw_answer(port_, close_request("GET", "/off/f"));
  EXPECT_NE(a.find("Content-Length: 5\r\n"), std::string::npos) << a;
  EXPECT_EQ(a.find("X-Always"), std::string::npos) << a;
  // A level with its own list does not inherit.
  a = raw_answer(port_, close_request("GET", "/max/f"));
  EXPECT_TRUE(a.ends_with("5\r\nfile\n\r\n0\r\nX-Own: o\r\n\r\n")) << a;
}

// add_header ETag / Last-Modified replace the server's (and a backend's)
// field, an empty value removes it, the last one wins (as nginx).
TEST_F(HttpCoreDirectives, AddHeaderReplacesEtagAndLastModified) {
  Backend backend([](BackendConn& c, const BackendRequest&) {
    return c.send(backend_response(200, "b", "ETag: \"be\"\r\nLast-Modified: Mon, 28 Sep 1970 06:00:00 GMT\r\n"));
  });
  ASSERT_TRUE(start("location /f { add_header ETag foo always; add_header ETag '' always; }\n"
                    "location /max/ { add_header ETag one; add_header ETag two; "
                    "add_header Last-Modified \"Mon, 28 Sep 1970 06:00:00 GMT\"; }\n"
                    "location /p { proxy_pass http://" + backend.address() +
                    "; add_header ETag mine; }"))
      << server_.output();
  Response r = request("/f");
  EXPECT_EQ(r.status, 200);
  EXPECT_FALSE(r.has("etag")) << r.head;
  EXPECT_TRUE(r.has("last-modified"));
  r = request("/max/f");
  EXPECT_EQ(r.header("etag"), "two");
  EXPECT_EQ(r.head.find("ETag"), r.head.rfind("ETag")) << r.head;
  EXPECT_EQ(r.header("last-modified"), "Mon, 28 Sep 1970 06:00:00 GMT");
  EXPECT_EQ(r.head.find("Last-Modified"), r.head.rfind("Last-Modified")) << r.head;
  r = request("/p");
  EXPECT_EQ(r.body, "b");
  EXPECT_EQ(r.header("etag"), "mine");
  EXPECT_EQ(r.head.find("ETag"), r.head.rfind("ETag")) << r.head;
  EXPECT_EQ(r.header("last-modified"), "Mon, 28 Sep 1970 06:00:00 GMT");
}

// $sent_http_NAME in the access log: the fields as they went out, those the
// head writer makes too.
TEST_F(HttpCoreDirectives, SentHttpVariables) {
  ASSERT_TRUE(start("location /r { access_log logs/sent.log sent buffer=0;"
                    " add_header Cache-Control a; add_header Cache-Control b;"
                    " return 301 /x; }",
                    "log_format sent \"$sent_http_connection|$sent_http_content_type|"
                    "$sent_http_content_length|$sent_http_location|$sent_http_cache_control|"
                    "$sent_http_x_none\";"))
      << server_.output();
  Response r = get(port_, "GET /r HTTP/1.0\r\nHost: h\r\n\r\n");
  EXPECT_EQ(r.status, 301);
  std::string text;
  wait_until([&] {
    text = server_.read("logs/sent.log");
    return !text.empty();
  });
  EXPECT_EQ(text, "close|text/html|" + r.header("content-length") + "|http://h:" +
                      std::to_string(port_) + "/x|a, b|-\n");
}

// keepalive_time: a connection older than it gets "Connection: close";
// $connection_time says how old it is.
TEST_F(HttpCoreDirectives, KeepaliveTime) {
  ASSERT_TRUE(start("location /t { keepalive_time 1s;"
                    " add_header X-Conn $connection_requests:$connection_time; return 200 t; }"))
      << server_.output();
  Client c(port_);
  ASSERT_TRUE(c.send(simple_get("/t")));
  Response r = c.read_response();
  EXPECT_EQ(r.header("connection"), "keep-alive");
  EXPECT_TRUE(r.header("x-conn").starts_with("1:0.")) << r.header("x-conn");
  // Asked again until the connection's second has passed (polled).
  ASSERT_TRUE(wait_until(
      [&] {
        if (!c.send(simple_get("/t"))) return true;
        r = c.read_response();
        return r.header("connection") != "keep-alive";
      },
      10000));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("connection"), "close");
  const std::string conn = r.header("x-conn");
  const std::size_t colon = conn.find(':');
  ASSERT_NE(colon, std::string::npos) << conn;
  EXPECT_GT(std::stoi(conn.substr(0, colon)), 1);
  EXPECT_GE(std::stod(conn.substr(colon + 1)), 1.0) << conn;
  EXPECT_TRUE(c.closed_within(3000));
}

TEST_F(HttpCoreDirectives, KeepaliveDisable) {
  ASSERT_TRUE(start("location /k { return 200 k; }\n"
                    "location /s/ { keepalive_disable safari; return 200 s; }\n"
                    "location /n/ { keepalive_disable none; return 200 n; }"))
      << server_.output();
  auto connection = [this](const std::string& method, const std::string& target,
                           const std::string& ua) {
    return get(port_, method + " " + target + " HTTP/1.1\r\nHost: x\r\nUser-Agent: " + ua +
                          "\r\nContent-Length: 0\r\n\r\n")
        .header("connection");
  };
  const std::string msie5 = "Mozilla/4.0 (compatible; MSIE 5.0; Windows 98)";
  const std::string safari = "Mozilla/5.0 (Macintosh; Mac OS X) Safari/7534.48.3";
  // msie6 (the default): an old MSIE's POST only.
  EXPECT_EQ(connection("POST", "/k", msie5), "close");
  EXPECT_EQ(connection("GET", "/k", msie5), "keep-alive");
  EXPECT_EQ(connection("POST", "/k", "Mozilla/4.0 (compatible; MSIE 7.0)"), "keep-alive");
  EXPECT_EQ(connection("GET", "/k", safari), "keep-alive");
  EXPECT_EQ(connection("GET", "/s/", safari), "close");
  EXPECT_EQ(connection("POST", "/s/", msie5), "keep-alive");
  EXPECT_EQ(connection("POST", "/n/", msie5), "keep-alive");
}

bool port_is_free(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd == -1) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = ::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

// A port range listens on every port of it; the socket options load.
TEST_F(HttpCoreDirectives, ListenPortRange) {
  int first = 0;
  // Two free ports in a row, below the ephemeral range (where the kernel's
  // neighbours of a port it chose are often taken).
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> pick(20000, 32000);
  for (int i = 0; i < 100 && first == 0; ++i) {
    const int p = pick(rng);
    if (port_is_free(p) && port_is_free(p + 1)) first = p;
  }
  ASSERT_NE(first, 0);
  port_ = first;
  ASSERT_TRUE(server_.start("server { listen 127.0.0.1:" + std::to_string(first) + "-" +
                            std::to_string(first + 1) +
                            " sndbuf=32k rcvbuf=64k so_keepalive=on backlog=100;"
                            " access_log off; location / { return 200 $server_port; } }"))
      << server_.output();
  EXPECT_EQ(get(first, simple_get("/")).body, std::to_string(first));
  EXPECT_EQ(get(first + 1, simple_get("/")).body, std::to_string(first + 1));
}

// error_page with a URL: a redirect to it, 302 unless "=" names another
// redirect status (as nginx).
TEST_F(HttpCoreDirectives, ErrorPageToAUrl) {
  ASSERT_TRUE(start("location /a { error_page 404 http://example.com/a?x=1; }\n"
                    "location /b { error_page 404 =301 https://example.com/b; }\n"
                    "location /c { error_page 404 =200 http://example.com/c; }\n"
                    "location /d { error_page 403 404 =308 http://example.com/d; return 403; }"))
      << server_.output();
  Response r = request("/a/missing");
  EXPECT_EQ(r.status, 302);
  EXPECT_EQ(r.header("location"), "http://example.com/a?x=1");
  EXPECT_NE(r.body.find("302 Moved Temporarily"), std::string::npos) << r.body;
  r = request("/b/missing");
  EXPECT_EQ(r.status, 301);
  EXPECT_EQ(r.header("location"), "https://example.com/b");
  r = request("/c/missing");
  EXPECT_EQ(r.status, 302);
  EXPECT_EQ(r.header("location"), "http://example.com/c");
  r = request("/d");
  EXPECT_EQ(r.status, 308);
  EXPECT_EQ(r.header("location"), "http://example.com/d");
}

// index with an absolute last name: the fallback when no file before it
// exists, an internal redirect (as nginx).
TEST_F(HttpCoreDirectives, IndexAbsoluteFallback) {
  server_.write("html/ix/keep", "");
  server_.write("html/has/second.html", "second\n");
  server_.write("html/loop/keep", "");
  ASSERT_TRUE(start("location /ix/ { index missing.html /fallback; }\n"
                    "location /has/ { index missing.html second.html /fallback; }\n"
                    "location = /fallback { return 200 \"fb $uri $args\"; }\n"
                    "location /loop/ { index /loop/; }"))
      << server_.output();
  Response r = request("/ix/?a=1");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "fb /fallback a=1");
  EXPECT_EQ(request("/has/").body, "second\n");  // a file before it exists
  EXPECT_EQ(request("/loop/").status, 500);
  EXPECT_TRUE(server_.wait_output("rewrite or internal redirection cycle"));
}

}  // namespace
}  // namespace vigil::test
