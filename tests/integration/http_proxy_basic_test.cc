// proxy_pass: forwarding, nginx's URI rules, the request head the backend
// gets (proxy_set_header, hop-by-hop fields, bodies, 100-continue), the
// response head the client gets, and response framing.
#include <gtest/gtest.h>

#include <string>

#include "integration/http_harness.h"
#include "integration/proxy_backend.h"

namespace vigil::test {
namespace {

// The data of a chunked body (size lines without extensions, no trailers),
// or "<bad framing>" when the framing is wrong or the last chunk missing.
std::string dechunk(std::string_view in) {
  std::string out;
  for (;;) {
    const std::size_t eol = in.find("\r\n");
    if (eol == std::string_view::npos || eol == 0) return "<bad framing>";
    std::size_t size = 0;
    for (char ch : in.substr(0, eol)) {
      const int d = ch >= '0' && ch <= '9'   ? ch - '0'
                    : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
                    : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                             : -1;
      if (d < 0) return "<bad framing>";
      size = size * 16 + static_cast<std::size_t>(d);
    }
    in.remove_prefix(eol + 2);
    if (size == 0) return in == "\r\n" ? out : "<bad framing>";
    if (in.size() < size + 2 || in.substr(size, 2) != "\r\n") return "<bad framing>";
    out.append(in.substr(0, size));
    in.remove_prefix(size + 2);
  }
}

class Proxy : public ::testing::Test {
 protected:
  bool start(const std::string& locations, const std::string& http = "") {
    port_ = free_port();
    return server_.start(http + "\nserver { listen 127.0.0.1:" + std::to_string(port_) +
                         "; server_name front; access_log off;\n" + locations + "\n}");
  }
  // Where a redirect's path is made a URL (absolute_redirect).
  std::string origin(const std::string& host = "localhost") const {
    return "http://" + host + ":" + std::to_string(port_);
  }
  Response request(const std::string& raw, bool head_only = false) {
    Client c(port_);
    if (!c.ok() || !c.send(raw)) return {};
    return c.read_response(head_only);
  }
  VigilServer server_;
  Backend backend_;
  int port_ = 0;
};

TEST_F(Proxy, ForwardsToAnAddressWithNginxDefaults) {
  ASSERT_TRUE(start("location / { proxy_pass http://" + backend_.address() + "; }"))
      << server_.output();
  Response r = request(simple_get("/a/b?x=1", "example.org", "User-Agent: t\r\n"));
  ASSERT_EQ(r.status, 200) << r.head;
  EXPECT_EQ(r.body, "backend GET /a/b?x=1");
  EXPECT_EQ(r.header("server"), "vigil/" VIGIL_VERSION);
  EXPECT_EQ(r.header("connection"), "keep-alive");
  BackendRequest b = backend_.last();
  EXPECT_EQ(b.version, "HTTP/1.0");                 // proxy_http_version 1.0
  EXPECT_EQ(b.header("host"), backend_.address());  // $proxy_host
  EXPECT_EQ(b.header("connection"), "close");
  EXPECT_EQ(b.header("user-agent"), "t");
}

TEST_F(Proxy, UriRules) {
  ASSERT_TRUE(start("location /a/ { proxy_pass http://" + backend_.address() +
                    "/x/; }\n"
                    "location /raw/ { proxy_pass http://" +
                    backend_.address() +
                    "; }\n"
                    "location = /exact { proxy_pass http://" +
                    backend_.address() + "/e; }"))
      << server_.output();
  // With a URI part: the location prefix is replaced, the path normalised
  // and escaped again, the query kept.
  EXPECT_EQ(request(simple_get("/a/one/../two%20x?q=%41")).body, "backend GET /x/two%20x?q=%41");
  // Without: the client's URI as it came.
  EXPECT_EQ(request(simple_get("/raw/./one//two?k")).body, "backend GET /raw/./one//two?k");
  EXPECT_EQ(request(simple_get("/exact?z")).body, "backend GET /e?z");
}

// nginx's auto_redirect, compared with nginx 1.22 by hand: a location
// ending in "/" whose handler is proxy_pass makes a request for its name
// without the slash, which no location names exactly, a 301 to the name
// (the arguments kept), in the find-config phase: before `return`, with the
// redirecting location's error_page.
TEST_F(Proxy, AutoRedirectToTheSlashedLocation) {
  const std::string to = backend_.address();
  ASSERT_TRUE(
      start("location / { return 404; }\n"
            "location /a/ { proxy_pass http://" +
            to +
            "; }\n"
            "location = /b { return 200 \"exact\"; }\n"
            "location /b/ { proxy_pass http://" +
            to +
            "; }\n"
            "location /c { return 200 \"c\"; }\n"
            "location /c/ { proxy_pass http://" +
            to +
            "; }\n"
            "location /d/ { return 200 \"d\"; }\n"
            "location /n/ { location /n/p/ { proxy_pass http://" +
            to +
            "; } }\n"
            "location = /e/ { proxy_pass http://" +
            to +
            "; }\n"
            "location /f/ { proxy_pass http://" +
            to +
            "; error_page 301 /text; }\n"
            "location /g/ { return 200 \"g\"; proxy_pass http://" +
            to +
            "; }\n"
            "location = /text { return 200 \"text\"; }"))
      << server_.output();
  Response r = request(simple_get("/a"));
  EXPECT_EQ(r.status, 301);
  EXPECT_EQ(r.header("location"), origin() + "/a/");
  EXPECT_NE(r.body.find("301 Moved Permanently"), std::string::npos) << r.body;
  EXPECT_EQ(request(simple_get("/a?x=1&y")).header("location"), origin() + "/a/?x=1&y");
  r = request("HEAD /a HTTP/1.1\r\nHost: x\r\n\r\n", true);
  EXPECT_EQ(r.status, 301);
  EXPECT_EQ(r.header("location"), origin("x") + "/a/");
  EXPECT_EQ(request("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nx").status, 301);
  EXPECT_EQ(request(simple_get("/n/p")).header("location"), origin() + "/n/p/");  // nested
  EXPECT_EQ(request(simple_get("/e")).header("location"), origin() + "/e/");      // an exact one too
  EXPECT_EQ(request(simple_get("/g")).header("location"), origin() + "/g/");      // before its return
  r = request(simple_get("/f"));
  EXPECT_EQ(r.status, 301);
  EXPECT_EQ(r.header("location"), origin() + "/f/");
  EXPECT_EQ(r.body, "text");  // the error_page of /f/
  EXPECT_EQ(backend_.requests(), 0);

  // A location with the very name wins; a location without proxy_pass does
  // not redirect; nor does a longer name.
  EXPECT_EQ(request(simple_get("/b")).body, "exact");
  EXPECT_EQ(request(simple_get("/c")).body, "c");
  EXPECT_EQ(request(simple_get("/d")).status, 404);
  EXPECT_EQ(request(simple_get("/ab")).status, 404);
  r = request(simple_get("/a/"));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "backend GET /a/");
}

TEST_F(Proxy, SetHeaderWithVariablesAndEmptyValues) {
  ASSERT_TRUE(start("location / { proxy_pass http://" + backend_.address() +
                    ";\n"
                    "  proxy_set_header Host $host:$server_port;\n"
                    "  proxy_set_header X-Real-IP $remote_addr;\n"
                    "  proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;\n"
                    "  proxy_set_header X-Uri \"$uri|$args|$request_uri|$scheme\";\n"
                    "  proxy_set_header User-Agent \"\";\n"
                    "}"))
      << server_.output();
  Response r = request(
      simple_get("/p/q?a=b", "Example.COM", "User-Agent: gone\r\nX-Forwarded-For: 10.0.0.1\r\n"));
  ASSERT_EQ(r.status, 200);
  BackendRequest b = backend_.last();
  EXPECT_EQ(b.header("host"), "example.com:" + std::to_string(port_));
  EXPECT_EQ(b.header("x-real-ip"), "127.0.0.1");
  EXPECT_EQ(b.header("x-forwarded-for"), "10.0.0.1, 127.0.0.1");
  EXPECT_EQ(b.header("x-uri"), "/p/q|a=b|/p/q?a=b|http");
  EXPECT_FALSE(b.has("user-agent"));
  EXPECT_EQ(b.header("connection"), "close");  // the default stays
}

TEST_F(Proxy, HopByHopFieldsAreNotForwarded) {
  ASSERT_TRUE(start("location / { proxy_pass http://" + backend_.address() + "; }"))
      << server_.output();
  Client c(port_);
  ASSERT_TRUE(c.send(simple_get(
      "/", "h",
      "Connection: keep-alive, X-Private\r\nX-Private: secret\r\nKeep-Alive: timeout=5\r\n"
      "TE: trailers\r\nTrailer: X-T\r\nUpgrade: foo\r\nProxy-Connection: keep-alive\r\n"
      "Expect: 100-continue\r\nX-Kept: yes\r\n")));
  EXPECT_EQ(c.read_response(true).status, 100);  // the empty body is read, as nginx
  ASSERT_EQ(c.read_response().status, 200);
  BackendRequest b = backend_.last();
  for (const char* name :
       {"x-private", "keep-alive", "te", "trailer", "upgrade", "proxy-connection", "expect"}) {
    EXPECT_FALSE(b.has(name)) << name << " in\n" << b.head;
  }
  EXPECT_EQ(b.header("x-kept"), "yes");
  EXPECT_EQ(b.header("connection"), "close");
}

TEST_F(Proxy, PassRequestHeadersOffAndPassRequestBodyOff) {
  ASSERT_TRUE(start("location /h { proxy_pass http://" + backend_.address() +
                    "; proxy_pass_request_headers off; }\n"
                    "location /b { proxy_pass http://" +
                    backend_.address() + "; proxy_pass_request_body off; }"))
      << server_.output();
  ASSERT_EQ(request(simple_get("/h", "h", "X-A: 1\r\n")).status, 200);
  EXPECT_FALSE(backend_.last().has("x-a"));
  EXPECT_TRUE(backend_.last().has("host"));  // proxy_set_header still applies
  Response r = request("POST /b HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(backend_.last().body, "");
  EXPECT_FALSE(backend_.last().has("content-length"));
}

TEST_F(Proxy, ResponseHeadFiltering) {
  backend_.set_handler([](BackendConn& c, const BackendRequest&) {
    return c.send(
        "HTTP/1.1 201 Made\r\nServer: backend/1\r\nDate: Thu, 01 Jan 1970 00:00:00 GMT\r\n"
        "Connection: keep-alive, X-Hop\r\nX-Hop: 1\r\nKeep-Alive: timeout=3\r\n"
        "X-Accel-Redirect: /x\r\nX-Secret: s\r\nX-Shown: ok\r\nX-Pass: p\r\n"
        "Content-Length: 2\r\n\r\nok");
  });
  ASSERT_TRUE(start("location / { proxy_pass http://" + backend_.address() +
                    "; proxy_hide_header X-Secret; proxy_pass_header Server;"
                    " proxy_ignore_headers X-Accel-Redirect; }"))
      << server_.output();
  Response r = request(simple_get("/"));
  ASSERT_EQ(r.status, 201);
  EXPECT_EQ(r.status_line, "HTTP/1.1 201 Made");
  EXPECT_EQ(r.body, "ok");
  EXPECT_EQ(r.header("server"), "backend/1");
  EXPECT_NE(r.header("date"), "Thu, 01 Jan 1970 00:00:00 GMT");
  EXPECT_FALSE(r.has("x-hop"));
  EXPECT_FALSE(r.has("keep-alive"));
  EXPECT_FALSE(r.has("x-accel-redirect"));
  EXPECT_FALSE(r.has("x-secret"));
  EXPECT_EQ(r.header("x-shown"), "ok");
  EXPECT_EQ(r.header("connection"), "keep-alive");
}

TEST_F(Proxy, RedirectDefaultAndOff) {
  backend_.set_handler([](BackendConn& c, const BackendRequest& r) {
    return c.send(
        backend_response(302, "", "Location: http://" + r.header("host") + "/x/next\r\n"));
  });
  ASSERT_TRUE(start("location /a/ { proxy_pass http://" + backend_.address() +
                    "/x/; }\n"
                    "location /off/ { proxy_pass http://" +
                    backend_.address() + "/x/; proxy_redirect off; }"))
      << server_.output();
  EXPECT_EQ(request(simple_get("/a/q")).header("location"), origin() + "/a/next");
  EXPECT_EQ(request(simple_get("/off/q")).header("location"),
            "http://" + backend_.address() + "/x/next");
}

TEST_F(Proxy, RequestBodies) {
  backend_.set_handler([](BackendConn& c, const BackendRequest& r) {
    return c.send(backend_response(200, std::string(r.chunked ? "chunked:" : "length:") +
                                            std::to_string(r.body.size()) + ":" +
                                            r.header("content-length")));
  });
  ASSERT_TRUE(start("location / { proxy_pass http://" + backend_.address() +
                    "; }\n"
                    "location /s/ { proxy_pass http://" +
                    backend_.address() +
                    "; proxy_http_version 1.1; proxy_request_buffering off;"
                    " client_body_buffer_size 1k; client_max_body_size 10m; }"))
      << server_.output();
  // Content-Length.
  EXPECT_EQ(request("POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello").body,
            "length:5:5");
  // Chunked from the client, small: re-sent with a length.
  EXPECT_EQ(request("POST /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
                    "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n")
                .body,
            "length:5:5");
  // Chunked and larger than the buffer, HTTP/1.1 to the backend: re-sent chunked.
  std::string chunks;
  std::string all;
  for (int i = 0; i < 40; ++i) {
    std::string piece(1000, static_cast<char>('a' + i % 26));
    chunks += "3e8\r\n" + piece + "\r\n";
    all += piece;
  }
  Response r = request("POST /s/ HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n" +
                       chunks + "0\r\n\r\n");
  EXPECT_EQ(r.body, "chunked:40000:");
  EXPECT_EQ(backend_.last().body, all);
  // A large Content-Length body streams through the 1k buffer.
  std::string big(300000, 'z');
  r = request("PUT /s/ HTTP/1.1\r\nHost: h\r\nContent-Length: 300000\r\n\r\n" + big);
  EXPECT_EQ(r.body, "length:300000:300000");
  EXPECT_EQ(backend_.last().body, big);
}

// TRACE never reaches the backend (nginx's rule); a PUT without a length has
// an empty body and is forwarded as one.
TEST_F(Proxy, TraceIsRefusedAndPutWithoutLengthIsForwarded) {
  backend_.set_handler([](BackendConn& c, const BackendRequest& r) {
    return c.send(backend_response(
        200, r.method + " " + (r.has("content-length") ? r.header("content-length") : "-") + " " +
                 std::to_string(r.body.size())));
  });
  ASSERT_TRUE(start("location / { proxy_pass http://" + backend_.address() + "; }"))
      << server_.output();
  Client c(port_);
  ASSERT_TRUE(c.send("TRACE / HTTP/1.1\r\nHost: x\r\n\r\n"));
  Response t = c.read_response();
  EXPECT_EQ(t.status, 405);
  EXPECT_FALSE(t.has("allow")) << "a proxied location takes more than GET and HEAD";
  EXPECT_TRUE(c.closed_within(3000));
  EXPECT_EQ(backend_.connections(), 0);
  Response p = request("PUT /x HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(p.status, 200);
  EXPECT_EQ(p.body.substr(0, 4), "PUT ");
  EXPECT_EQ(p.body.substr(p.body.size() - 2), " 0") << p.body;
}

TEST_F(Proxy, ExpectContinue) {
  ASSERT_TRUE(start("location / { proxy_pass http://" + backend_.address() + "; }"))
      << server_.output();
  Client c(port_);
  ASSERT_TRUE(
      c.send("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n"));
  Response interim = c.read_response(true);
  EXPECT_EQ(interim.status, 100);
  ASSERT_TRUE(c.send("body"));
  Response r = c.read_response();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(backend_.last().body, "body");
  EXPECT_FALSE(backend_.last().has("expect"));

  // With no content at all the proxy still says 100 before its answer, as
  // nginx does (it reads the empty body); the backend sees no Expect.
  ASSERT_TRUE(c.send("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n"
                     "Expect: 100-continue\r\n\r\n"));
  interim = c.read_response(true);
  EXPECT_EQ(interim.status, 100);
  r = c.read_response();
  EXPECT_EQ(r.status, 200);
  EXPECT_FALSE(backend_.last().has("expect"));
}

TEST_F(Proxy, ResponseFramings) {
  backend_.set_handler([](BackendConn& c, const BackendRequest& r) {
    if (r.target == "/chunked") {
      return c.send(
          "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
          "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n");
    }
    if (r.target == "/close") {
      c.send("HTTP/1.1 200 OK\r\n\r\nuntil close");
      return false;
    }
    if (r.target == "/204") return c.send("HTTP/1.1 204 No Content\r\n\r\n");
    if (r.target == "/304") return c.send("HTTP/1.1 304 Not Modified\r\nETag: \"e\"\r\n\r\n");
    if (r.target == "/100") {
      return c.send("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </s>\r\n\r\n" +
                    backend_response(200, "final"));
    }
    return c.send(backend_response(200, "head body"));
  });
  ASSERT_TRUE(
      start("location / { proxy_pass http://" + backend_.address() + "; proxy_http_version 1.1; }"))
      << server_.output();
  Client c(port_);
  ASSERT_TRUE(c.send(simple_get("/chunked")));
  Response r = c.read_response(true);
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.header("transfer-encoding"), "chunked");
  // The body is decoded and chunked again by the output filters (as nginx
  // does; RFC 9112 lets any hop choose its own chunks): read it raw, up to
  // the last chunk, and take the framing off.
  std::string raw = c.extra();
  for (int i = 0; i < 50 && raw.find("\r\n0\r\n\r\n") == std::string::npos; ++i) {
    raw += read_n(c.fd(), 1, 3000);
  }
  EXPECT_EQ(dechunk(raw), "hello world") << raw;

  // An HTTP/1.0 client gets the body decoded, ended by the close.
  Client c10(port_);
  ASSERT_TRUE(c10.send("GET /chunked HTTP/1.0\r\n\r\n"));
  Response r10 = c10.read_response(true);
  EXPECT_FALSE(r10.has("transfer-encoding"));
  EXPECT_TRUE(c10.closed_within(3000));
  EXPECT_EQ(c10.extra(), "hello world");

  // A body that ends at the backend's close: chunked to an HTTP/1.1 client,
  // whose connection stays open (nginx's chunked_transfer_encoding on)...
  Client cc(port_);
  ASSERT_TRUE(cc.send(simple_get("/close")));
  Response rc = cc.read_response();
  EXPECT_TRUE(rc.complete);
  EXPECT_EQ(rc.header("transfer-encoding"), "chunked");
  EXPECT_EQ(rc.header("connection"), "keep-alive");
  EXPECT_EQ(rc.body, "until close");
  ASSERT_TRUE(cc.send(simple_get("/head")));
  EXPECT_EQ(cc.read_response().body, "head body") << "the connection is kept";
  // ...and ended by the close for an HTTP/1.0 one.
  Client cc10(port_);
  ASSERT_TRUE(cc10.send("GET /close HTTP/1.0\r\n\r\n"));
  Response rc10 = cc10.read_response(true);
  EXPECT_EQ(rc10.header("connection"), "close");
  EXPECT_FALSE(rc10.has("transfer-encoding"));
  EXPECT_TRUE(cc10.closed_within(3000));
  EXPECT_EQ(cc10.extra(), "until close");

  EXPECT_EQ(request(simple_get("/204")).status, 204);
  EXPECT_EQ(request(simple_get("/304"), true).status, 304);
  Response rf = request(simple_get("/100"));
  EXPECT_EQ(rf.status, 200);
  EXPECT_EQ(rf.body, "final");
  Response rh = request("HEAD /head HTTP/1.1\r\nHost: h\r\n\r\n", true);
  EXPECT_EQ(rh.status, 200);
  EXPECT_EQ(rh.header("content-length"), "9");
}

// A large close-delimited body crosses many reads and ring buffers: every
// read is framed as its own chunk, and the bytes arrive intact; with
// chunked_transfer_encoding off the client gets it ended by the close.
TEST_F(Proxy, CloseDelimitedBodyIsChunkedForHttp11Clients) {
  std::string big;
  for (int i = 0; big.size() < 300000; ++i) big += "line " + std::to_string(i) + "\n";
  backend_.set_handler([&big](BackendConn& c, const BackendRequest&) {
    c.send("HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\n" + big.substr(0, 1000));
    c.send(big.substr(1000));
    return false;
  });
  ASSERT_TRUE(start("location / { proxy_pass http://" + backend_.address() +
                    "; proxy_buffer_size 4k; proxy_buffers 4 4k; }\n"
                    "location /off/ { proxy_pass http://" +
                    backend_.address() + "; chunked_transfer_encoding off; }"))
      << server_.output();
  Client c(port_);
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(c.send(simple_get("/big")));
    Response r = c.read_response(false, 10000);
    ASSERT_TRUE(r.complete) << i;
    EXPECT_EQ(r.header("transfer-encoding"), "chunked");
    EXPECT_EQ(r.body.size(), big.size());
    EXPECT_TRUE(r.body == big) << "the body differs";
  }
  Client off(port_);
  ASSERT_TRUE(off.send(simple_get("/off/big")));
  Response r = off.read_response(true);
  EXPECT_EQ(r.status, 200);
  EXPECT_FALSE(r.has("transfer-encoding"));
  EXPECT_EQ(r.header("connection"), "close");
  EXPECT_TRUE(off.closed_within(10000));
  EXPECT_TRUE(off.extra() == big);
}

}  // namespace
}  // namespace vigil::test
