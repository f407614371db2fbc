// What the proxy sends and what it remembers of the answer: proxy_method,
// proxy_set_body, and the $upstream_* variables made from the backend's
// response ($upstream_http_NAME, $upstream_cookie_NAME, the byte counts).
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <tuple>

#include "integration/http_harness.h"
#include "integration/proxy_backend.h"

namespace vigil::test {
namespace {

class ProxyRequest : public ::testing::Test {
 protected:
  bool start(const std::string& locations, const std::string& http = "") {
    port_ = free_port();
    return server_.start(http + "\nserver { listen 127.0.0.1:" + std::to_string(port_) +
                         "; access_log off;\n" + locations + "\n}");
  }
  std::pair<int, std::string> check(const std::string& http) {
    server_.write("conf/t.conf", "events {}\nhttp {\n" + http + "\n}\n");
    return run({kVigil, "-p", server_.dir(), "-c", "conf/t.conf", "-t"});
  }
  Response request(const std::string& raw) {
    Client c(port_);
    if (!c.ok() || !c.send(raw)) return {};
    return c.read_response();
  }
  VigilServer server_;
  int port_ = 0;
};

// proxy_method: a constant, a variable, inherited from an outer location;
// without it the client's method goes.
TEST_F(ProxyRequest, ProxyMethod) {
  Backend b;
  const std::string addr = b.address();
  ASSERT_TRUE(start("location /keep { proxy_pass http://" + addr +
                    "; }\n"
                    "location /const { proxy_pass http://" +
                    addr +
                    "; proxy_method POST; }\n"
                    "location /var { proxy_pass http://" +
                    addr +
                    "; proxy_method $arg_m; }\n"
                    "location /outer { proxy_method PUT;\n"
                    "  location /outer/inner { proxy_pass http://" +
                    addr + "; } }\n"))
      << server_.output();
  EXPECT_EQ(request(simple_get("/keep")).body, "backend GET /keep");
  EXPECT_EQ(request(simple_get("/const")).body, "backend POST /const");
  EXPECT_EQ(request(simple_get("/var?m=PROPFIND")).body, "backend PROPFIND /var?m=PROPFIND");
  EXPECT_EQ(request(simple_get("/outer/inner")).body, "backend PUT /outer/inner");

  auto [rc, out] = check("server { location / { proxy_pass http://a:1; proxy_method $nosuch; } }");
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("unknown \"nosuch\" variable"), std::string::npos) << out;
  EXPECT_NE(out.find("t.conf:"), std::string::npos) << out;
}

// proxy_set_body: its value (variables evaluated) is the body, with its
// Content-Length; the client's body is not sent.
TEST_F(ProxyRequest, ProxySetBody) {
  Backend b([](BackendConn& c, const BackendRequest& r) {
    return c.send(backend_response(200, "[" + r.body + "]"));
  });
  const std::string addr = b.address();
  ASSERT_TRUE(start("location /fixed { proxy_pass http://" + addr +
                    "; proxy_set_body \"fixed body\"; }\n"
                    "location /var { proxy_pass http://" +
                    addr +
                    "; proxy_set_body \"a=$arg_a&m=$request_method\"; }\n"
                    "location /empty { proxy_pass http://" +
                    addr + "; proxy_set_body \"\"; }\n"))
      << server_.output();
  EXPECT_EQ(request(simple_get("/fixed")).body, "[fixed body]");
  EXPECT_EQ(b.last().header("content-length"), "10");
  EXPECT_EQ(request(simple_get("/var?a=1")).body, "[a=1&m=GET]");
  EXPECT_EQ(b.last().header("content-length"), "9");
  Response r = request(
      "POST /fixed HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\nConnection: close\r\n\r\n"
      "client body");
  EXPECT_EQ(r.body, "[fixed body]");
  EXPECT_EQ(b.last().method, "POST");
  EXPECT_EQ(b.last().header("content-length"), "10");
  EXPECT_EQ(request(simple_get("/empty")).body, "[]");
  EXPECT_EQ(b.last().header("content-length"), "0");
}

// $upstream_http_NAME and $upstream_cookie_NAME, in a response header
// (add_header) and in the access log after the body went through.
TEST_F(ProxyRequest, UpstreamHeaderAndCookieVariables) {
  Backend b([](BackendConn& c, const BackendRequest& r) {
    std::string extra = "X-Len: 42\r\nX-Multi: a\r\nX-Multi: b\r\n";
    extra += "Set-Cookie: other=1\r\nSet-Cookie: " + r.header("x-cookie") + "\r\n";
    return c.send(backend_response(200, std::string(3000, 'x'), extra));
  });
  const std::string addr = b.address();
  ASSERT_TRUE(start("location / { proxy_pass http://" + addr +
                        "; add_header X-Got-Len $upstream_http_x_len;\n"
                        "  add_header X-Cookie $upstream_cookie_tc;\n"
                        "  add_header X-Multi-All $upstream_http_x_multi;\n"
                        "  access_log logs/u.log u buffer=0; }\n",
                    "log_format u '$uri|$upstream_http_x_len|$upstream_cookie_tc|"
                    "$upstream_response_length';"))
      << server_.output();
  struct Case {
    std::string set_cookie;
    std::string value;  // "" : none
  };
  const Case cases[] = {
      {"tc=content", "content"},
      {"TC = content; Path=/", "content"},
      {"tc=con  tent; Domain=example.com", "con  tent"},
      {"tc==;abc", "="},
      {"tc=first,tc=second", "first,tc=second"},
      {"tc=first;tc=second", "first"},
      {"tc= ;", ""},
      {"=tc=content", ""},
      {"tcx=1", ""},
  };
  for (const auto& c : cases) {
    Response r = request(simple_get("/c", "localhost", "X-Cookie: " + c.set_cookie + "\r\n"));
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.header("x-got-len"), "42");
    EXPECT_EQ(r.header("x-multi-all"), "a, b");
    EXPECT_EQ(r.header("x-cookie"), c.value) << c.set_cookie;
  }
  std::string log;
  ASSERT_TRUE(wait_until([&] {
    log = server_.read("logs/u.log");
    return log.find("/c|42|content|3000\n") != std::string::npos;
  })) << log;
}

// $upstream_bytes_sent is the request as the backend read it,
// $upstream_bytes_received the whole response, $upstream_response_length
// its body; one entry per attempt.
TEST_F(ProxyRequest, UpstreamByteCounts) {
  Backend b([](BackendConn& c, const BackendRequest& r) {
    const std::string head_len = std::to_string(r.head.size() + r.body.size());
    const std::string body = "0123456789";
    return c.send("HTTP/1.1 200 OK\r\nX-Sent: " + head_len + "\r\nContent-Length: 10\r\n\r\n" +
                  body);
  });
  const std::string addr = b.address();
  ASSERT_TRUE(
      start("location / { proxy_pass http://" + addr + "; access_log logs/b.log b buffer=0; }\n",
            "log_format b "
            "'$upstream_http_x_sent|$upstream_bytes_sent|$upstream_bytes_received|"
            "$upstream_response_length';"))
      << server_.output();
  Response r = request("POST /p HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n\r\nhello");
  ASSERT_EQ(r.status, 200);
  const std::string sent = std::to_string(b.last().head.size() + 5);
  const std::string head = "HTTP/1.1 200 OK\r\nX-Sent: " + sent + "\r\nContent-Length: 10\r\n\r\n";
  const std::string want = sent + "|" + sent + "|" + std::to_string(head.size() + 10) + "|10\n";
  std::string log;
  ASSERT_TRUE(wait_until([&] {
    log = server_.read("logs/b.log");
    return log.find(want) != std::string::npos;
  })) << log
      << "\nwant " << want;
}

}  // namespace
}  // namespace vigil::test

namespace vigil::test {
namespace {

bool file_exists(const std::string& path) {
  return ::access(path.c_str(), F_OK) == 0;
}

std::string post(const std::string& target, const std::string& body) {
  return "POST " + target +
         " HTTP/1.1\r\nHost: localhost\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n\r\n" + body;
}

std::string post_chunked(const std::string& target, const std::string& body) {
  std::string req =
      "POST " + target + " HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (std::size_t at = 0; at < body.size(); at += 700) {
    const std::string part = body.substr(at, 700);
    char size[16];
    std::snprintf(size, sizeof size, "%zx\r\n", part.size());
    req += size + part + "\r\n";
  }
  return req + "0\r\n\r\n";
}

std::string pattern(std::size_t n) {
  std::string s;
  for (std::size_t i = 0; s.size() < n; ++i) s += std::to_string(i) + ",";
  s.resize(n);
  return s;
}

// A body read ahead that outgrows client_body_buffer_size goes to a file in
// client_body_temp_path (with its levels), is sent from there with its
// length, even to a second server, and the file is removed afterwards;
// client_body_in_file_only puts every body there, kept (on) or removed
// (clean); $request_body_file names the file.
TEST_F(ProxyRequest, RequestBodyInTemporaryFile) {
  Backend b([](BackendConn& c, const BackendRequest& r) {
    return c.send(
        backend_response(200, r.body, "X-Length: " + r.header("content-length") + "\r\n"));
  });
  const int dead = free_port();
  const std::string addr = b.address();
  const std::string common =
      "client_body_buffer_size 1k; add_header X-File $request_body_file;"
      " add_header X-Body $request_body;";
  ASSERT_TRUE(
      start("client_body_temp_path body_temp 1 2;\n"
            "location /f { " +
                common + " proxy_pass http://" + addr +
                "; }\n"
                "location /old { " +
                common + " proxy_http_version 1.0; proxy_pass http://" + addr +
                "; }\n"
                "location /next { " +
                common +
                " proxy_pass http://two; }\n"
                "location /on { " +
                common +
                " client_body_in_file_only on;"
                " client_body_temp_path kept_temp; proxy_pass http://" +
                addr +
                "; }\n"
                "location /clean { " +
                common +
                " client_body_in_file_only clean;"
                " proxy_pass http://" +
                addr + "; }\n",
            "upstream two { server 127.0.0.1:" + std::to_string(dead) + "; server " + addr + "; }"))
      << server_.output();
  const std::string big = pattern(5000);

  Response r = request(post("/f", "0123456789"));
  EXPECT_EQ(r.body, "0123456789");
  EXPECT_EQ(r.header("x-body"), "0123456789");
  EXPECT_FALSE(r.has("x-file")) << r.head;

  r = request(post("/f", big));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, big);
  EXPECT_EQ(r.header("x-length"), "5000");
  EXPECT_FALSE(r.has("x-body")) << "in a file, $request_body is empty";
  const std::string file = r.header("x-file");
  EXPECT_NE(file.find("/body_temp/"), std::string::npos) << file;
  // Levels 1 and 2: the name's last digit, then the two before it.
  const std::string name = file.substr(file.rfind('/') + 1);
  ASSERT_EQ(name.size(), 10u) << file;
  EXPECT_NE(file.find("/body_temp/" + name.substr(9, 1) + "/" + name.substr(7, 2) + "/" + name),
            std::string::npos)
      << file;
  EXPECT_TRUE(wait_until([&] { return !file_exists(file); })) << file;

  // Chunked to an HTTP/1.0 backend: the whole body, with its length.
  r = request(post_chunked("/old", big));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, big);
  EXPECT_EQ(r.header("x-length"), "5000");

  // The first server refuses: the body is sent again from the file.
  r = request(post("/next", big));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, big);

  r = request(post("/on", "small"));
  EXPECT_EQ(r.body, "small");
  const std::string kept = r.header("x-file");
  EXPECT_NE(kept.find("/kept_temp/"), std::string::npos) << kept;
  std::string content;
  EXPECT_TRUE(wait_until([&] {
    content = server_.read(kept.substr(server_.dir().size() + 1));
    return content == "small";
  })) << kept
      << " " << content;
  ::unlink(kept.c_str());

  r = request(post("/clean", "small"));
  EXPECT_EQ(r.body, "small");
  const std::string cleaned = r.header("x-file");
  EXPECT_FALSE(cleaned.empty()) << r.head;
  EXPECT_TRUE(wait_until([&] { return !file_exists(cleaned); })) << cleaned;

  auto [rc, out] = check("client_body_temp_path tmp 3;");
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("invalid value \"3\""), std::string::npos) << out;
  std::tie(rc, out) = check("client_body_in_file_only maybe;");
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("t.conf:3"), std::string::npos) << out;
}

}  // namespace
}  // namespace vigil::test

namespace vigil::test {
namespace {

// Buffers far smaller than a page (nginx allows any size): the head still
// fits one, and the body, chunked or not, goes through whole.
TEST_F(ProxyRequest, TinyResponseBuffers) {
  const std::string body = pattern(5000);
  Backend b([&body](BackendConn& c, const BackendRequest& r) {
    if (r.target == "/chunked") {
      std::string out = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
      for (std::size_t at = 0; at < body.size(); at += 300) {
        const std::string part = body.substr(at, 300);
        char size[16];
        std::snprintf(size, sizeof size, "%zx\r\n", part.size());
        out += size + part + "\r\n";
      }
      return c.send(out + "0\r\n\r\n");
    }
    return c.send(backend_response(200, body));
  });
  const std::string addr = b.address();
  ASSERT_TRUE(
      start("proxy_buffer_size 128; proxy_buffers 4 128;\n"
            "location / { proxy_pass http://" +
            addr +
            "; }\n"
            "location /off/ { proxy_pass http://" +
            addr + "/; proxy_buffering off; }\n"))
      << server_.output();
  for (const char* target : {"/chunked", "/plain", "/off/chunked", "/off/plain"}) {
    Response r = request(simple_get(target));
    EXPECT_EQ(r.status, 200) << target;
    EXPECT_EQ(r.body, body) << target;
  }
  auto [rc, out] = check("proxy_buffer_size 1; proxy_buffers 3 1;");
  EXPECT_EQ(rc, 0) << out;
}

}  // namespace
}  // namespace vigil::test

namespace vigil::test {
namespace {

// proxy_bind: the connection to the backend comes from the address given
// (a constant, inherited, a variable, with a port), or from any with "off";
// a value that is not an address is a 500.
TEST_F(ProxyRequest, ProxyBind) {
  const int back = free_port();
  const std::string to = "127.0.0.1:" + std::to_string(back);
  ASSERT_TRUE(
      start("proxy_bind 127.0.0.2;\n"
            "location / { proxy_pass http://" +
                to +
                "; }\n"
                "location /own { proxy_bind 127.0.0.3; proxy_pass http://" +
                to +
                "; }\n"
                "location /off { proxy_bind off; proxy_pass http://" +
                to +
                "; }\n"
                "location /var { proxy_bind $arg_b; proxy_pass http://" +
                to +
                "; }\n"
                "location /port { proxy_bind 127.0.0.2:$remote_port; proxy_pass http://" +
                to + "; add_header X-Client-Port $remote_port; }\n",
            "server { listen " + to +
                "; access_log off;"
                " location / { return 200 \"$remote_addr $remote_port\"; } }"))
      << server_.output();
  auto addr = [](const Response& r) { return r.body.substr(0, r.body.find(' ')); };
  EXPECT_EQ(addr(request(simple_get("/"))), "127.0.0.2");
  EXPECT_EQ(addr(request(simple_get("/own"))), "127.0.0.3");
  EXPECT_EQ(addr(request(simple_get("/off"))), "127.0.0.1");
  EXPECT_EQ(addr(request(simple_get("/var?b=127.0.0.4"))), "127.0.0.4");
  EXPECT_EQ(addr(request(simple_get("/var"))), "127.0.0.1") << "an empty value binds nothing";
  Response r = request(simple_get("/port"));
  EXPECT_EQ(r.body, "127.0.0.2 " + r.header("x-client-port"));
  EXPECT_EQ(request(simple_get("/var?b=nonsense")).status, 500);
  EXPECT_TRUE(server_.wait_output("invalid local address \"nonsense\"")) << server_.output();

  auto [rc, out] = check("server { location / { proxy_pass http://a:1; proxy_bind 1.2.3; } }");
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("invalid address \"1.2.3\""), std::string::npos) << out;
  EXPECT_NE(out.find("t.conf:3"), std::string::npos) << out;
  std::tie(rc, out) = check("proxy_bind 127.0.0.2 nontransparent;");
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("invalid value \"nontransparent\""), std::string::npos) << out;
  std::tie(rc, out) = check(
      "proxy_bind 127.0.0.2 transparent; proxy_bind [::1]:8000;"
      " server { proxy_bind $arg_a transparent; }");
  EXPECT_NE(rc, 0) << "a duplicate at one level";
  std::tie(rc, out) = check("proxy_bind [::1]:8000; server { proxy_bind $arg_a transparent; }");
  EXPECT_EQ(rc, 0) << out;
}

}  // namespace
}  // namespace vigil::test

namespace vigil::test {
namespace {

// proxy_cookie_domain, proxy_cookie_path and proxy_cookie_flags rewrite the
// backend's Set-Cookie fields; "off" at an inner level stops them; a
// regular expression matches the whole value (a domain's and a cookie name's
// without regard to case) and its groups make the replacement.
TEST_F(ProxyRequest, ProxyCookieRewrites) {
  Backend b([](BackendConn& c, const BackendRequest& r) {
    return c.send(backend_response(200, "ok", "Set-Cookie: " + r.header("x-set") + "\r\n"));
  });
  const std::string addr = b.address();
  ASSERT_TRUE(
      start("server_name localhost;\nlocation / { proxy_pass http://" + addr +
            ";\n"
            "  proxy_cookie_domain www.example.org .example.com;\n"
            "  proxy_cookie_domain .$server_name.com en.$server_name.org;\n"
            "  proxy_cookie_path /path/ /new/;\n"
            "  proxy_cookie_path /$server_name/ /new/$server_name/;\n"
            "  proxy_cookie_flags a secure httponly samesite=none;\n"
            "  proxy_cookie_flags d nosecure nohttponly nosamesite;\n"
            "  proxy_cookie_flags $arg_c secure;\n"
            "  proxy_cookie_domain ~^(.+)\\.com$ $1.org;\n"
            "  proxy_cookie_path ~^/regex/(.+)$ /$1;\n"
            "  proxy_cookie_path ~*^/caseless/(.+)$ /$1;\n"
            "  proxy_cookie_flags ~BAR httponly;\n"
            "  location /off/ { proxy_pass http://" +
            addr +
            ";\n"
            "    proxy_cookie_domain off; proxy_cookie_path off; proxy_cookie_flags off; } }\n"))
      << server_.output();
  struct Case {
    std::string target;
    std::string set;
    std::string want;
  };
  const Case cases[] = {
      {"/", "v=1; Domain=www.Example.org", "v=1; Domain=example.com"},
      {"/", "v=1; domain=.Localhost.com; Path=/", "v=1; domain=.en.localhost.org; Path=/"},
      {"/", "v=1; Domain=other.org", "v=1; Domain=other.org"},
      {"/", "v=1; Path=/path/x.html", "v=1; Path=/new/x.html"},
      {"/", "v=1;Path=/localhost/x", "v=1;Path=/new/localhost/x"},
      {"/", "v=1; Path=/PATH/x", "v=1; Path=/PATH/x"},
      {"/", "v=1; Domain=www.example.org; Path=/path/", "v=1; Domain=example.com; Path=/new/"},
      {"/", "a=1; Domain=x", "a=1; Domain=x; Secure; HttpOnly; SameSite=None"},
      {"/", "a=1;Secure;HttpOnly;SameSite=Lax", "a=1; Secure; HttpOnly; SameSite=None"},
      {"/", "d=1; Domain=x;secure;httponly;samesite=lax", "d=1; Domain=x"},
      {"/", "nx=1;samesite=none", "nx=1;samesite=none"},
      {"/?c=v", "v=1", "v=1; Secure"},
      {"/", "v=1; Domain=www.example.COM", "v=1; Domain=www.example.org"},
      {"/", "v=1; Path=/regex/x.html; Secure", "v=1; Path=/x.html; Secure"},
      {"/", "v=1; Path=/CASEless/x.html", "v=1; Path=/x.html"},
      {"/", "v=1; Path=/REGEX/x.html", "v=1; Path=/REGEX/x.html"},
      {"/", "foobarbaz=1; Path=/", "foobarbaz=1; Path=/; HttpOnly"},
      {"/off/", "a=1; Domain=www.example.org; Path=/path/",
       "a=1; Domain=www.example.org; Path=/path/"},
  };
  for (const auto& c : cases) {
    Response r = request(simple_get(c.target, "localhost", "X-Set: " + c.set + "\r\n"));
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.header("set-cookie"), c.want) << c.set;
  }
  for (const char* bad : {"proxy_cookie_domain ~^(.+\\.com$ $1.org;", "proxy_cookie_flags ~( x;"}) {
    auto [rc, out] = check(std::string(bad));
    EXPECT_NE(rc, 0) << bad;
    EXPECT_NE(out.find("pcre2_compile() failed"), std::string::npos) << out;
    EXPECT_NE(out.find("t.conf:3"), std::string::npos) << out;
  }
  auto [rc, out] = check("proxy_cookie_flags a secure bogus;");
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("invalid parameter \"bogus\""), std::string::npos) << out;
}

// proxy_redirect's forms on Location and Refresh (from after its "url="):
// a prefix with variables, a regex (case or not) whose groups make the
// replacement, default (explicit or implicit), off, the first matching
// rule deciding, and the rules inherited by a nested location.
TEST_F(ProxyRequest, ProxyRedirectForms) {
  Backend b([](BackendConn& c, const BackendRequest& r) {
    const std::string to = r.header("x-to");
    return c.send(backend_response(302, "", "Location: " + to + "\r\nRefresh: 7; url=" + to + "\r\n"));
  });
  const std::string up = "http://" + b.address();
  ASSERT_TRUE(start("location / { set $v var_here; proxy_pass " + up + ";\n"
                    "  proxy_redirect " + up + "/var_in_second/ /$v/;\n"
                    "  proxy_redirect " + up + "/$v/ /replaced/;\n"
                    "  proxy_redirect ~^(.+)/regex_w_([^/]+) $1/$2/test.html;\n"
                    "  proxy_redirect ~*re+gexp? /replaced/test.html; }\n"
                    "location /expl/ { proxy_pass " + up + "/this/;\n"
                    "  proxy_redirect wrong wrong; proxy_redirect default; }\n"
                    "location /impl/ { proxy_pass " + up + "/this/; }\n"
                    "location /off/ { proxy_pass " + up + "/; proxy_redirect off;\n"
                    "  location /off/on/ { proxy_pass " + up + ";\n"
                    "    proxy_redirect " + up + "/off/ /;\n"
                    "    location /off/on/on/ { proxy_pass " + up + "; } } }\n"))
      << server_.output();
  const std::string self = "http://127.0.0.1:" + std::to_string(port_);
  struct Case {
    std::string target;
    std::string to;        // the backend's Location and Refresh URL
    std::string location;  // what the client gets
    std::string refresh;
  };
  const Case cases[] = {
      {"/impl/", up + "/this/a.html", self + "/impl/a.html", "7; url=/impl/a.html"},
      {"/expl/", up + "/this/a.html", self + "/expl/a.html", "7; url=/expl/a.html"},
      {"/", up + "/var_in_second/a.html", self + "/var_here/a.html", "7; url=/var_here/a.html"},
      {"/", up + "/var_here/a.html", self + "/replaced/a.html", "7; url=/replaced/a.html"},
      {"/", up + "/ReeegEX/a.html", self + "/replaced/test.html", "7; url=/replaced/test.html"},
      {"/", up + "/regex_w_captures/a.html", up + "/captures/test.html",
       "7; url=" + up + "/captures/test.html"},
      {"/", "http://elsewhere/x", "http://elsewhere/x", "7; url=http://elsewhere/x"},
      {"/off/", up + "/a.html", up + "/a.html", "7; url=" + up + "/a.html"},
      {"/off/on/", up + "/off/on/a.html", self + "/on/a.html", "7; url=/on/a.html"},
      {"/off/on/on/", up + "/off/on/on/a.html", self + "/on/on/a.html", "7; url=/on/on/a.html"},
  };
  for (const auto& c : cases) {
    Response r = request(simple_get(c.target, "127.0.0.1:" + std::to_string(port_), "X-To: " + c.to + "\r\n"));
    EXPECT_EQ(r.status, 302) << c.to;
    EXPECT_EQ(r.header("location"), c.location) << c.target << " " << c.to;
    EXPECT_EQ(r.header("refresh"), c.refresh) << c.target << " " << c.to;
  }
  const std::pair<std::string, std::string> bad[] = {
      {"proxy_redirect on;", "invalid parameter \"on\""},
      {"proxy_redirect off; proxy_redirect default;", "\"proxy_redirect\" directive is duplicate"},
      {"proxy_redirect / /x; proxy_redirect off;", "\"proxy_redirect\" directive is duplicate"},
      {"proxy_redirect ~( /x;", "pcre2_compile() failed"},
      {"proxy_redirect / $nosuch;", "unknown \"nosuch\" variable"},
      {"server { location / { proxy_pass http://$host; proxy_redirect default; } }",
       "\"proxy_redirect default\" cannot be used with \"proxy_pass\" directive with variables"},
  };
  for (const auto& [conf, error] : bad) {
    auto [rc, out] = check(conf);
    EXPECT_NE(rc, 0) << conf;
    EXPECT_NE(out.find(error), std::string::npos) << conf << "\n" << out;
    EXPECT_NE(out.find("t.conf:3"), std::string::npos) << out;
  }
}

// A unix-domain socket backend: accepts one request per connection and
// answers with its target and Host.
class UnixBackend {
 public:
  explicit UnixBackend(std::string path) : path_(std::move(path)) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un sun{};
    sun.sun_family = AF_UNIX;
    std::snprintf(sun.sun_path, sizeof sun.sun_path, "%s", path_.c_str());
    ::unlink(path_.c_str());
    ok_ = fd_ >= 0 && ::bind(fd_, reinterpret_cast<sockaddr*>(&sun), sizeof sun) == 0 &&
          ::listen(fd_, 16) == 0;
    if (ok_) thread_ = std::thread([this] { serve(); });
  }
  ~UnixBackend() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    if (thread_.joinable()) thread_.join();
    ::close(fd_);
    ::unlink(path_.c_str());
  }
  bool ok() const { return ok_; }

 private:
  void serve() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      std::string head;
      char buf[4096];
      while (head.find("\r\n\r\n") == std::string::npos) {
        const ssize_t n = ::recv(c, buf, sizeof buf, 0);
        if (n <= 0) break;
        head.append(buf, static_cast<std::size_t>(n));
      }
      const std::size_t sp1 = head.find(' ');
      const std::size_t sp2 = head.find(' ', sp1 + 1);
      std::string host;
      const std::size_t h = head.find("\r\nHost: ");
      if (h != std::string::npos) host = head.substr(h + 8, head.find("\r\n", h + 8) - h - 8);
      const std::string body = sp2 == std::string::npos
                                   ? std::string("bad\n")
                                   : "uri:" + head.substr(sp1 + 1, sp2 - sp1 - 1) + " host:" + host + "\n";
      const std::string resp = "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) +
                               "\r\nConnection: close\r\n\r\n" + body;
      (void)::send(c, resp.data(), resp.size(), MSG_NOSIGNAL);
      ::close(c);
    }
  }
  std::string path_;
  int fd_ = -1;
  bool ok_ = false;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// proxy_pass to a unix-domain socket: "unix:/path" as the host, a URI after
// the next ':', the Host "localhost"; in an upstream block; with variables.
TEST_F(ProxyRequest, UnixDomainBackends) {
  const std::string path = server_.dir() + "/u.sock";
  UnixBackend ub(path);
  ASSERT_TRUE(ub.ok());
  ASSERT_TRUE(start("location / { proxy_pass http://unix:" + path + "; }\n"
                    "location /uri/ { proxy_pass http://unix:" + path + ":/x/; }\n"
                    "location /var { proxy_pass http://$arg_b; }\n"
                    "location /u { proxy_pass http://u; }\n",
                    "upstream u { server unix:" + path + "; }\n"))
      << server_.output();
  EXPECT_EQ(request(simple_get("/a?b=1")).body, "uri:/a?b=1 host:localhost\n");
  EXPECT_EQ(request(simple_get("/uri/a")).body, "uri:/x/a host:localhost\n");
  EXPECT_EQ(request(simple_get("/var?b=unix:" + path + ":/v")).body, "uri:/v host:localhost\n");
  EXPECT_EQ(request(simple_get("/var?b=unix:" + path)).body, "uri:/var?b=unix:" + path + " host:localhost\n");
  EXPECT_EQ(request(simple_get("/u")).body, "uri:/u host:u\n");
  auto [rc, out] = check("server { location / { proxy_pass http://unix:; } }");
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("no path in the unix domain socket"), std::string::npos) << out;
}

// proxy_pass with variables naming "host:port" that a proxy_pass without
// variables named: that implicit group is used, without a resolver (nginx).
TEST_F(ProxyRequest, VariablesFindAnImplicitGroup) {
  Backend b;
  const std::string port = std::to_string(b.port());
  ASSERT_TRUE(start("location /fixed { proxy_pass http://localhost:" + port + "; }\n"
                    "location /var { proxy_pass http://$arg_b/target; }\n"))
      << server_.output();
  Response r = request(simple_get("/var?b=localhost:" + port));
  EXPECT_EQ(r.status, 200) << server_.output();
  EXPECT_EQ(r.body, "backend GET /target");
  // Another port of the same name has no group and no resolver.
  EXPECT_EQ(request(simple_get("/var?b=localhost:1")).status, 502);
}

// X-Accel-Redirect from the backend: the request goes on at that URI (as
// GET; the value's %XX decoded, an unsafe one a 404) or named location, with
// the backend's Content-Type, Set-Cookie, Cache-Control... kept and its
// other fields dropped, $upstream_http_* still readable; a location reached
// so may proxy again; proxy_ignore_headers X-Accel-Redirect passes it by.
// X-Accel-Limit-Rate: the backend sets this response's limit_rate (in bytes
// per second; $limit_rate shows it), unless proxy_ignore_headers names it.
TEST_F(ProxyRequest, XAccelLimitRate) {
  Backend b([](BackendConn& c, const BackendRequest&) {
    return c.send(backend_response(200, "body", "X-Accel-Limit-Rate: 65536\r\n"));
  });
  const std::string up = "http://" + b.address();
  ASSERT_TRUE(start("location /on { proxy_pass " + up + "; add_header X-Rate $limit_rate; }\n"
                    "location /off { proxy_pass " + up +
                    "; proxy_ignore_headers X-Accel-Limit-Rate; add_header X-Rate $limit_rate; }\n"))
      << server_.output();
  Response r = request(simple_get("/on"));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "body");
  EXPECT_EQ(r.header("x-rate"), "65536");
  EXPECT_EQ(r.header("x-accel-limit-rate"), "");  // hidden, as the other X-Accel-* fields
  r = request(simple_get("/off"));
  EXPECT_EQ(r.header("x-rate"), "0");
}

TEST_F(ProxyRequest, XAccelRedirect) {
  Backend b([](BackendConn& c, const BackendRequest& r) {
    if (r.target.starts_with("/second")) {
      return c.send(backend_response(200, "second " + r.method + " " + r.target));
    }
    return c.send(backend_response(
        200, "first",
        "X-Accel-Redirect: " + r.header("x-to") +
            "\r\nContent-Type: text/blah\r\nSet-Cookie: a=b\r\nCache-Control: no-cache\r\n"
            "Something: other\r\n"));
  });
  server_.write("html/file.txt", "FILE\n");
  const std::string up = "http://" + b.address();
  ASSERT_TRUE(start("root html;\n"
                    "location /proxy { proxy_pass " + up + "; }\n"
                    "location /ignored { proxy_pass " + up + "; proxy_ignore_headers X-Accel-Redirect;"
                    " proxy_pass_header X-Accel-Redirect; }\n"
                    "location /ret { return 200 \"ret $uri $request_method $upstream_http_x_accel_redirect\\n\"; }\n"
                    "location /second { proxy_pass " + up + "; }\n"
                    "location @named { return 200 \"named $uri\\n\"; }\n"))
      << server_.output();
  auto get = [&](const std::string& method, const std::string& to, const std::string& path = "/proxy") {
    return request(method + " " + path + " HTTP/1.1\r\nHost: localhost\r\nX-To: " + to +
                   "\r\nContent-Length: 0\r\n\r\n");
  };
  Response r = get("GET", "/ret/x?a=1");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "ret /ret/x GET /ret/x?a=1\n");
  EXPECT_EQ(r.header("content-type"), "text/blah");
  EXPECT_EQ(r.header("set-cookie"), "a=b");
  EXPECT_EQ(r.header("cache-control"), "no-cache");
  EXPECT_FALSE(r.has("something"));
  EXPECT_FALSE(r.has("x-accel-redirect"));
  EXPECT_EQ(get("POST", "/ret/p").body, "ret /ret/p GET /ret/p\n") << "a POST goes on as GET";
  EXPECT_EQ(get("GET", "/ret/a%20b").body, "ret /ret/a b GET /ret/a%20b\n");
  EXPECT_EQ(get("GET", "/file.txt").body, "FILE\n");
  EXPECT_EQ(get("GET", "/file.txt").header("content-type"), "text/blah");
  for (const char* unsafe : {"..", "../x", "/ret/..", "/ret/.%2e", "/ret/../x"}) {
    EXPECT_EQ(get("GET", unsafe).status, 404) << unsafe;
  }
  EXPECT_EQ(get("GET", "@named").body, "named /proxy\n");
  r = get("GET", "/second/x");
  EXPECT_EQ(r.body, "second GET /second/x");
  EXPECT_FALSE(r.has("set-cookie")) << "the second response's own fields";
  r = get("GET", "/ret/x", "/ignored");
  EXPECT_EQ(r.body, "first");
  EXPECT_EQ(r.header("x-accel-redirect"), "/ret/x");
  auto [rc, out] = check("proxy_ignore_headers X-Nothing;");
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("invalid value \"X-Nothing\""), std::string::npos) << out;
}

// $upstream_response_time is an attempt's whole time, to the last byte of
// its body: "-" while the response is still coming (a header sent with it),
// one entry per server tried.
TEST_F(ProxyRequest, UpstreamResponseTimeCoversTheBody) {
  Backend b([](BackendConn& c, const BackendRequest& r) {
    if (r.target == "/bad") return c.send(backend_response(500, "bad"));
    if (!c.send("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nab")) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the slow body itself
    return c.send("cd");
  });
  const std::string addr = b.address();
  ASSERT_TRUE(start("location / { proxy_pass http://" + addr +
                        "; add_header X-Response $upstream_response_time;"
                        " access_log logs/t.log t buffer=0; }\n"
                        "location /next { proxy_pass http://u/bad; proxy_next_upstream http_500;"
                        " add_header X-Response $upstream_response_time always; }\n",
                    "log_format t '$upstream_response_time';\n"
                    "upstream u { server " + addr + "; server " + addr + "; }\n"))
      << server_.output();
  Response r = request(simple_get("/slow"));
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "abcd");
  EXPECT_EQ(r.header("x-response"), "-") << "the response is still coming";
  std::string log;
  ASSERT_TRUE(wait_until([&] {
    log = server_.read("logs/t.log");
    return !log.empty() && log.back() == '\n';
  })) << log;
  EXPECT_GE(std::stod(log), 0.3) << log;
  r = request(simple_get("/next"));
  EXPECT_EQ(r.status, 500);
  const std::string times = r.header("x-response");
  const std::size_t comma = times.find(", ");
  ASSERT_NE(comma, std::string::npos) << times;
  EXPECT_NE(times.substr(0, comma), "-") << times;
  EXPECT_EQ(times.substr(comma + 2), "-") << times;
}

}  // namespace
}  // namespace vigil::test
