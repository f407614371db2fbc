// return, add_header and server_tokens over real sockets: what nginx sends
// for each form (checked against nginx 1.22 by hand), with the differences
// docs/directives.md names.
#include <gtest/gtest.h>

#include <string>

#include "integration/http_harness.h"
#include "integration/proxy_backend.h"

namespace vigil::test {
namespace {

class HttpReturn : public ::testing::Test {
 protected:
  bool start(const std::string& server_body, const std::string& http = "") {
    port_ = free_port();
    server_.write("html/index.html", "index\n");
    server_.write("html/file.txt", "file\n");
    server_.write("html/err.html", "custom error page\n");
    server_.write("html/dir/index.html", "dir\n");
    return server_.start(http + "\nserver { listen 127.0.0.1:" + std::to_string(port_) +
                         "; root html; access_log off;\n" + server_body + "\n}");
  }
  Response request(const std::string& target, const std::string& extra = "",
                   const std::string& host = "localhost") {
    return get(port_, simple_get(target, host, extra));
  }
  VigilServer server_;
  int port_ = 0;
};

TEST_F(HttpReturn, TextWithVariables) {
  ASSERT_TRUE(start("location /t { return 200 \"hello $uri $args\\n\"; }\n"
                    "location /lit { return 403 \"no\"; }\n"
                    "location /empty { return 200; }"))
      << server_.output();
  Response r = request("/t?q=1");
  ASSERT_TRUE(r.complete);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "hello /t q=1\n");
  EXPECT_EQ(r.header("content-type"), "text/plain");  // default_type
  EXPECT_EQ(r.header("content-length"), std::to_string(r.body.size()));
  // nginx picks the type by the request's extension.
  EXPECT_EQ(request("/t.html").header("content-type"), "text/html");
  // A text is the body whatever the status: no error page.
  r = request("/lit");
  EXPECT_EQ(r.status, 403);
  EXPECT_EQ(r.body, "no");
  r = request("/empty");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("content-length"), "0");
  EXPECT_EQ(r.body, "");
  // HEAD: the head only, with the length of the text.
  Client c(port_);
  ASSERT_TRUE(c.send("HEAD /t HTTP/1.1\r\nHost: x\r\n\r\n"));
  r = c.read_response(true);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("content-length"), "10");
  ASSERT_TRUE(c.send(simple_get("/lit")));
  r = c.read_response();
  EXPECT_EQ(r.body, "no") << "nothing of the HEAD body may precede the next response";
}

TEST_F(HttpReturn, CodeWithoutTextIsTheErrorPage) {
  ASSERT_TRUE(start("location /gone { return 410; }\n"
                    "location /nf { return 404; error_page 404 /err.html; }\n"
                    "location /teapot { return 418; }\n"
                    "location /missing { error_page 404 /oops; }\n"
                    "location = /oops { return 200 \"oops\\n\"; }"))
      << server_.output();
  Response r = request("/gone");
  EXPECT_EQ(r.status, 410);
  EXPECT_EQ(r.header("content-type"), "text/html");
  EXPECT_NE(r.body.find("<h1>410 Gone</h1>"), std::string::npos) << r.body;
  r = request("/nf");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.body, "custom error page\n");
  // An error_page that leads to a return: its text, with the error's status.
  r = request("/missing/file");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.body, "oops\n");
  // No built-in page: still framed, the connection kept.
  Client c(port_);
  ASSERT_TRUE(c.send(simple_get("/teapot") + simple_get("/gone")));
  r = c.read_response();
  ASSERT_TRUE(r.complete);
  EXPECT_EQ(r.status, 418);
  EXPECT_EQ(r.header("content-length"), "0");
  EXPECT_EQ(c.read_response().status, 410);
}

TEST_F(HttpReturn, Redirects) {
  const std::string locations = R"(
    location /p { return 301 /elsewhere?a=b; }
    location /s { return https://$host$request_uri; }
    location /o { return 303 http://x/o; }
    location /t7 { return 307 http://x/7; }
    location /t8 { return 308 http://x/8; }
    location /sp { return 302 "/a b"; })";
  ASSERT_TRUE(start(locations)) << server_.output();
  Response r = request("/p");
  EXPECT_EQ(r.status, 301);
  // A path is made a URL (absolute_redirect): the request's host and port.
  EXPECT_EQ(r.header("location"), "http://localhost:" + std::to_string(port_) + "/elsewhere?a=b");
  EXPECT_EQ(r.header("content-type"), "text/html");
  EXPECT_NE(r.body.find("301 Moved Permanently"), std::string::npos);
  r = request("/s/x?y=1", "", "example.org");
  EXPECT_EQ(r.status, 302);
  EXPECT_EQ(r.status_line, "HTTP/1.1 302 Moved Temporarily");
  EXPECT_EQ(r.header("location"), "https://example.org/s/x?y=1");
  r = request("/o");
  EXPECT_EQ(r.status_line, "HTTP/1.1 303 See Other");
  EXPECT_EQ(r.header("location"), "http://x/o");
  EXPECT_EQ(request("/t7").header("location"), "http://x/7");
  r = request("/t8");
  EXPECT_EQ(r.status, 308);
  EXPECT_EQ(r.header("location"), "http://x/8");
  // A space cannot be in a URI reference (RFC 3986): percent-encoded.
  EXPECT_EQ(request("/sp").header("location"), "http://localhost:" + std::to_string(port_) + "/a%20b");
}

// error_page leading to a location that returns, compared with nginx 1.22
// by hand: a redirect's own error_page is used, the redirect of the page's
// location wins (its Location, not the first one), "=" takes the page's own
// status, and a redirect's Location stays for a page that sets none.
TEST_F(HttpReturn, ErrorPageLeadingToAReturn) {
  const std::string locations = R"(
    location /r1 { error_page 302 /to; return 302 "first"; }
    location /r2 { error_page 302 /to?1; return 302 "first"; }
    location /to { return 302 "http://example.com/$args"; }
    location /r3 { error_page 302 /text; return 302 "/first"; }
    location /text { return 200 "custom\n"; }
    location /r4 { error_page 404 = /text; }
    location /r6 { error_page 404 =200 /to; }
    location /r9 { error_page 404 = /gone; }
    location /gone { return 410; }
    location /r5 { error_page 404 /dir; })";
  ASSERT_TRUE(start(locations)) << server_.output();
  Response r = request("/r1");
  EXPECT_EQ(r.status, 302);
  EXPECT_EQ(r.header("location"), "http://example.com/");
  EXPECT_NE(r.body.find("302 Moved Temporarily"), std::string::npos) << r.body;
  r = request("/r2");
  EXPECT_EQ(r.status, 302);
  EXPECT_EQ(r.header("location"), "http://example.com/1");  // the page's arguments
  r = request("/r3");
  EXPECT_EQ(r.status, 302);
  EXPECT_EQ(r.header("location"), "http://localhost:" + std::to_string(port_) + "/first");
  EXPECT_EQ(r.body, "custom\n");
  r = request("/r4/x");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "custom\n");
  r = request("/r6/x");
  EXPECT_EQ(r.status, 302);
  EXPECT_EQ(r.header("location"), "http://example.com/");
  r = request("/r9/x");
  EXPECT_EQ(r.status, 410);
  EXPECT_NE(r.body.find("410 Gone"), std::string::npos) << r.body;
  r = request("/r5/x");
  EXPECT_EQ(r.status, 301);
  EXPECT_EQ(r.header("location"), "http://localhost:" + std::to_string(port_) + "/dir/");
}

TEST_F(HttpReturn, Code444ClosesWithoutAResponse) {
  ASSERT_TRUE(start("location /drop { return 444; }")) << server_.output();
  Client c(port_);
  ASSERT_TRUE(c.send(simple_get("/drop")));
  EXPECT_TRUE(c.closed_within(3000));
  EXPECT_EQ(c.extra(), "");
}

TEST_F(HttpReturn, ServerLevelComesBeforeLocationsAndFiles) {
  ASSERT_TRUE(start("return 301 https://$host$request_uri;\n"
                    "location /file.txt { return 200 loc; }"))
      << server_.output();
  Response r = request("/file.txt", "", "a.example");
  EXPECT_EQ(r.status, 301);
  EXPECT_EQ(r.header("location"), "https://a.example/file.txt");
  EXPECT_EQ(request("/index.html").status, 301);
}

TEST_F(HttpReturn, LocationReturnComesBeforeFilesAndProxy) {
  Backend backend;
  ASSERT_TRUE(start("location = /file.txt { return 200 instead; }\n"
                    "location /api { proxy_pass http://" + backend.address() +
                    "; return 503 down; }"))
      << server_.output();
  EXPECT_EQ(request("/file.txt").body, "instead");
  Response r = request("/api/x");
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.body, "down");
  EXPECT_EQ(backend.requests(), 0);
  EXPECT_EQ(request("/index.html").body, "index\n");  // other locations unchanged
}

TEST_F(HttpReturn, BodyIsReadAndTheConnectionKept) {
  ASSERT_TRUE(start("location /t { return 200 ok; }\nlocation /n { return 204; }"))
      << server_.output();
  Client c(port_);
  ASSERT_TRUE(c.send("POST /t HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nabcde" +
                     simple_get("/n") + simple_get("/t")));
  Response r = c.read_response();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "ok");
  r = c.read_response();
  EXPECT_EQ(r.status, 204);
  EXPECT_FALSE(r.has("content-length"));
  EXPECT_FALSE(r.has("content-type"));
  r = c.read_response();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "ok");
}

TEST_F(HttpReturn, AddHeaderByStatusAndLevel) {
  ASSERT_TRUE(start("add_header X-Srv \"s $uri\";\n"
                    "add_header X-Always a always;\n"
                    "add_header X-Empty \"$http_x_none\";\n"
                    "location /own { add_header X-Own o; return 200 own; }\n"
                    "location /ret { return 200 r; }",
                    "add_header X-Http h always;"))
      << server_.output();
  Response r = request("/file.txt");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("x-srv"), "s /file.txt");
  EXPECT_EQ(r.header("x-always"), "a");
  EXPECT_FALSE(r.has("x-empty"));  // an empty value adds nothing
  EXPECT_FALSE(r.has("x-http"));   // the server has its own list
  r = request("/dir");
  EXPECT_EQ(r.status, 301);
  EXPECT_EQ(r.header("x-srv"), "s /dir");
  r = request("/nothing");
  EXPECT_EQ(r.status, 404);
  EXPECT_FALSE(r.has("x-srv"));  // not for 404 without always
  EXPECT_EQ(r.header("x-always"), "a");
  r = request("/own");
  EXPECT_EQ(r.header("x-own"), "o");
  EXPECT_FALSE(r.has("x-srv"));
  EXPECT_EQ(request("/ret").header("x-srv"), "s /ret");
  // A value from a header: there when the request has it.
  EXPECT_EQ(request("/file.txt", "X-None: v\r\n").header("x-empty"), "v");
}

TEST_F(HttpReturn, AddHeaderOnProxiedResponses) {
  Backend backend;
  const std::string pass = "proxy_pass http://" + backend.address() + ";";
  ASSERT_TRUE(start("add_header X-S s;\n"
                    "location / { " + pass + " add_header X-P \"via $host\";\n"
                    "  location /in/ { " + pass + " } }\n"
                    "location /srv { " + pass + " }"))
      << server_.output();
  Response r = request("/x", "", "h.example");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "backend GET /x");
  EXPECT_EQ(r.header("x-p"), "via h.example");
  EXPECT_FALSE(r.has("x-s")) << "the location has its own list";
  // A nested location inherits its parent's list; one without a list, the server's.
  r = request("/in/x", "", "h.example");
  EXPECT_EQ(r.body, "backend GET /in/x");
  EXPECT_EQ(r.header("x-p"), "via h.example");
  EXPECT_FALSE(r.has("x-s"));
  r = request("/srv");
  EXPECT_EQ(r.body, "backend GET /srv");
  EXPECT_EQ(r.header("x-s"), "s");
  EXPECT_FALSE(r.has("x-p"));
}

TEST_F(HttpReturn, ServerTokensOff) {
  ASSERT_TRUE(start("location /off { server_tokens off; return 403; }\n"
                    "location /on { return 403; }\n"
                    "location /build { server_tokens build; return 403; }"))
      << server_.output();
  Response r = request("/off");
  EXPECT_EQ(r.header("server"), "vigil");
  EXPECT_NE(r.body.find("<hr><center>vigil</center>"), std::string::npos) << r.body;
  EXPECT_EQ(r.header("content-length"), std::to_string(r.body.size()));
  r = request("/on");
  EXPECT_TRUE(r.header("server").starts_with("vigil/")) << r.header("server");
  EXPECT_NE(r.body.find("<hr><center>vigil/"), std::string::npos) << r.body;
  // nginx's "build" adds the build's name to the version; Vigil's builds
  // have none, so it is "on".
  const Response b = request("/build");
  EXPECT_EQ(b.header("server"), r.header("server"));
  EXPECT_EQ(b.body, r.body);
}

}  // namespace
}  // namespace vigil::test
