// The proxy_* directives not covered elsewhere: configuration errors as
// nginx reports them, inheritance from the http and server levels into
// nested locations, proxy_buffering off, proxy_buffer_size,
// proxy_send_timeout, proxy_next_upstream_timeout, proxy_request_buffering off.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>

#include "integration/http_harness.h"
#include "integration/proxy_backend.h"
#include "integration/tcp_backend.h"
#include "integration/tls_harness.h"

namespace vigil::test {
namespace {

class ProxyDirectives : public ::testing::Test {
 protected:
  bool start(const std::string& locations, const std::string& http = "") {
    port_ = free_port();
    return server_.start(http + "\nserver { listen 127.0.0.1:" + std::to_string(port_) +
                         "; access_log off;\n" + locations + "\n}");
  }
  // `vigil -t` on an http block: {exit code, output}.
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

TEST_F(ProxyDirectives, ConfigurationErrors) {
  struct Case {
    std::string conf;
    std::string error;
  };
  const Case cases[] = {
      {"server { location / { proxy_pass https://; } }", "no host in \"https://\""},
      {"server { location / { proxy_pass https://127.0.0.1:1; proxy_ssl_certificate c.crt; } }",
       "no \"proxy_ssl_certificate_key\" is defined for certificate"},
      {"server { location / { proxy_pass https://127.0.0.1:1; proxy_ssl_protocols SSLv3; } }",
       "\"SSLv3\" is not supported by this OpenSSL"},
      {"server { location / { proxy_pass https://127.0.0.1:1; proxy_ssl_name $nosuch; } }",
       "unknown \"nosuch\" variable"},
      {"server { location / { proxy_pass https://127.0.0.1:1; proxy_ssl_verify on;\n"
       "  proxy_ssl_trusted_certificate /nonexistent/ca.crt; } }",
       "cannot load trusted certificates \"/nonexistent/ca.crt\""},
      {"server { location / { proxy_pass ftp://a; } }", "invalid URL prefix in \"ftp://a\""},
      {"server { location / { proxy_pass http://; } }", "no host in \"http://\""},
      {"server { location / { proxy_pass http://$nosuch_host; } }",
       "unknown \"nosuch_host\" variable"},
      {"server { proxy_pass http://a:1; }", "\"proxy_pass\" directive is not allowed here"},
      {"server { location / { proxy_pass http://a:1; proxy_http_version 2; } }",
       "invalid value \"2\" in \"proxy_http_version\" directive"},
      {"server { location / { proxy_pass http://a:1; proxy_next_upstream error bogus; } }",
       "invalid value \"bogus\" in \"proxy_next_upstream\" directive"},
      {"server { location / { proxy_pass http://a:1; proxy_next_upstream off error; } }",
       "invalid value \"off\" with other values"},
      {"server { location / { proxy_pass http://a:1; proxy_set_header X $nosuch; } }",
       "unknown \"nosuch\" variable"},
      {"server { location / { proxy_pass http://a:1; proxy_buffers 8 4k; proxy_busy_buffers_size "
       "64k; } }",
       "\"proxy_busy_buffers_size\" must be less than the size of all \"proxy_buffers\" minus one "
       "buffer"},
      {"server { location / { proxy_pass http://a:1; proxy_buffer_size 16k;"
       " proxy_busy_buffers_size 8k; } }",
       "\"proxy_busy_buffers_size\" must be equal to or greater than the maximum"},
      // Not set, it is twice the larger buffer size (nginx): 32k > 7 * 4k.
      {"server { location / { proxy_pass http://a:1; proxy_buffer_size 16k; } }",
       "\"proxy_busy_buffers_size\" must be less than the size of all \"proxy_buffers\" minus one "
       "buffer"},
      {"server { location / { proxy_pass http://nosuchhost.invalid; } }", "host not found"},
      {"server { location / { proxy_pass http://a:1; proxy_max_temp_file_size 1k; } }",
       "\"proxy_max_temp_file_size\" must be equal to zero to disable temporary files usage"},
      {"server { location / { proxy_pass http://a:1; proxy_temp_file_write_size 1k; } }",
       "\"proxy_temp_file_write_size\" must be equal to or greater than the maximum"},
  };
  for (const auto& c : cases) {
    auto [rc, out] = check(c.conf);
    EXPECT_NE(rc, 0) << c.conf;
    EXPECT_NE(out.find(c.error), std::string::npos) << c.conf << "\n" << out;
    EXPECT_NE(out.find("t.conf:"), std::string::npos) << c.conf << "\n" << out;
  }
  {
    // Checked at the level that breaks the rule: the server block, on line 3.
    auto [rc, out] =
        check("server {\n proxy_buffer_size 16k;\n location / { proxy_pass http://a:1; } }");
    EXPECT_NE(rc, 0);
    EXPECT_NE(out.find("\"proxy_busy_buffers_size\" must be less than the size of all"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("t.conf:3\n"), std::string::npos) << out;
  }
  auto [rc, out] = check(
      "proxy_http_version 1.1; proxy_connect_timeout 5s; proxy_read_timeout 1m;"
      " proxy_send_timeout 30s; proxy_buffering off; proxy_buffer_size 8k; proxy_buffers 4 8k;"
      " proxy_busy_buffers_size 16k; proxy_request_buffering off; proxy_intercept_errors on;"
      " proxy_redirect off; proxy_pass_request_headers on; proxy_pass_request_body on;"
      " proxy_hide_header X-A; proxy_pass_header Server; proxy_next_upstream_tries 2;"
      " proxy_next_upstream_timeout 10s; proxy_next_upstream error timeout invalid_header http_500"
      " http_502 http_503 http_504 http_403 http_404 http_429 non_idempotent;"
      " client_body_buffer_size 32k; proxy_max_temp_file_size 0; proxy_temp_file_write_size 16k;"
      " upstream u { server 127.0.0.1:1; } server { location / { proxy_pass http://u/x/; } }");
  EXPECT_EQ(rc, 0) << out;
}

// proxy_* directives of the http and server levels reach a location and the
// locations nested in it; a level that sets one replaces what it inherits
// (proxy_set_header and proxy_hide_header as whole lists, as nginx);
// proxy_pass belongs to its own location only.
TEST_F(ProxyDirectives, InheritedFromHttpAndServerReplacedByALocation) {
  Backend b([](BackendConn& c, const BackendRequest& r) {
    return c.send(backend_response(200, r.version, "X-Secret: s\r\nX-Other: o\r\n"));
  });
  const std::string addr = b.address();
  std::string server =
      "proxy_set_header X-Level server; proxy_set_header X-Proxy-Host $proxy_host;\n";
  server += "location /a { proxy_pass http://" + addr + ";\n";
  server += "  location /a/up { proxy_pass http://u; }\n";
  server += "  location /a/files { } }\n";
  server += "location /c { proxy_pass http://" + addr + "; proxy_set_header X-Level c;\n";
  server += "  proxy_http_version 1.0; proxy_hide_header X-Other; }\n";
  std::string http = "upstream u { server " + addr + "; }\n";
  http += "proxy_http_version 1.1; proxy_hide_header X-Secret;\n";
  ASSERT_TRUE(start(server, http)) << server_.output();

  // The location: the server's fields and the http level's version and hidden field.
  Response r = request(simple_get("/a/x"));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "HTTP/1.1");
  EXPECT_FALSE(r.has("x-secret")) << r.head;
  EXPECT_EQ(r.header("x-other"), "o");
  BackendRequest seen = b.last();
  EXPECT_EQ(seen.header("x-level"), "server");
  EXPECT_EQ(seen.header("x-proxy-host"), addr) << "$proxy_host of this location's proxy_pass";
  EXPECT_EQ(seen.header("host"), addr) << "the default Host is still added";

  // A nested location with a proxy_pass of its own: inherited through two
  // levels, $proxy_host its own.
  r = request(simple_get("/a/up/x"));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "HTTP/1.1");
  EXPECT_FALSE(r.has("x-secret")) << r.head;
  seen = b.last();
  EXPECT_EQ(seen.header("x-level"), "server");
  EXPECT_EQ(seen.header("x-proxy-host"), "u");
  EXPECT_EQ(seen.header("host"), "u");

  // A location that sets them: its own list, version and hidden field only.
  r = request(simple_get("/c"));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "HTTP/1.0");
  EXPECT_EQ(r.header("x-secret"), "s");
  EXPECT_FALSE(r.has("x-other")) << r.head;
  seen = b.last();
  EXPECT_EQ(seen.header("x-level"), "c");
  EXPECT_FALSE(seen.has("x-proxy-host")) << seen.head;
  EXPECT_EQ(seen.header("host"), addr);

  // proxy_pass is not inherited: the nested location serves files.
  const int before = b.requests();
  EXPECT_EQ(request(simple_get("/a/files/none")).status, 404);
  EXPECT_EQ(b.requests(), before);
}

TEST_F(ProxyDirectives, BufferingOffAndSmallBuffers) {
  std::string body(300000, 'q');
  for (std::size_t i = 0; i < body.size(); i += 1000)
    body[i] = static_cast<char>('a' + i / 1000 % 26);
  Backend b(
      [&](BackendConn& c, const BackendRequest&) { return c.send(backend_response(200, body)); });
  ASSERT_TRUE(start("location /off { proxy_pass http://" + b.address() +
                    "; proxy_buffering off; }\n"
                    "location /small { proxy_pass http://" +
                    b.address() +
                    "; proxy_buffer_size 1k; proxy_buffers 2 1k; proxy_busy_buffers_size 1k; }"))
      << server_.output();
  Response r = request(simple_get("/off"));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, body);
  r = request(simple_get("/small"));
  EXPECT_EQ(r.body, body);
}

TEST_F(ProxyDirectives, ProxyBufferSizeLimitsTheResponseHead) {
  Backend b([](BackendConn& c, const BackendRequest&) {
    return c.send(backend_response(200, "x", "X-Long: " + std::string(1500, 'l') + "\r\n"));
  });
  ASSERT_TRUE(
      start("location /small { proxy_pass http://b; proxy_buffer_size 1k;"
            " proxy_busy_buffers_size 4k; }\n"
            "location /big { proxy_pass http://b; proxy_buffer_size 4k; }",
            "upstream b { server " + b.address() + " max_fails=0; }"))
      << server_.output();
  EXPECT_EQ(request(simple_get("/small")).status, 502);
  EXPECT_EQ(request(simple_get("/big")).status, 200);
}

TEST_F(ProxyDirectives, SendTimeout) {
  // A listener that accepts nothing and reads nothing: a large body cannot be sent.
  int lport = -1;
  const int lfd = bind_loopback(&lport, 8);
  ASSERT_NE(lfd, -1);
  ASSERT_TRUE(start("location / { proxy_pass http://127.0.0.1:" + std::to_string(lport) +
                    "; proxy_send_timeout 300ms; proxy_request_buffering off;"
                    " client_max_body_size 0; }"))
      << server_.output();
  Client c(port_);
  const std::size_t size = 64 << 20;
  ASSERT_TRUE(
      c.send("PUT / HTTP/1.1\r\nHost: h\r\nContent-Length: " + std::to_string(size) + "\r\n\r\n"));
  auto t0 = std::chrono::steady_clock::now();
  std::thread writer([&] {
    std::string chunk(1 << 20, 'b');
    for (std::size_t i = 0; i < size / chunk.size(); ++i) {
      if (!send_all(c.fd(), chunk)) break;
    }
  });
  EXPECT_TRUE(server_.wait_output(
      "upstream timed out (110: Connection timed out) while sending request to upstream", 5000))
      << server_.output();
  auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  EXPECT_LT(ms, 4000);
  ::shutdown(c.fd(), SHUT_RDWR);
  writer.join();
  ::close(lfd);
}

TEST_F(ProxyDirectives, NextUpstreamTimeoutStopsRetrying) {
  // Three servers that time out reading; 250 ms each, but only 400 ms in all.
  Backend s1([](BackendConn& c, const BackendRequest&) {
    pollfd p{c.fd(), POLLIN, 0};
    ::poll(&p, 1, 2000);
    return false;
  });
  Backend s2([](BackendConn& c, const BackendRequest&) {
    pollfd p{c.fd(), POLLIN, 0};
    ::poll(&p, 1, 2000);
    return false;
  });
  Backend s3([](BackendConn& c, const BackendRequest&) {
    pollfd p{c.fd(), POLLIN, 0};
    ::poll(&p, 1, 2000);
    return false;
  });
  ASSERT_TRUE(
      start("location / { proxy_pass http://t; proxy_read_timeout 250ms;"
            " proxy_next_upstream timeout; proxy_next_upstream_timeout 400ms; }",
            "upstream t { server " + s1.address() + " max_fails=0; server " + s2.address() +
                " max_fails=0; server " + s3.address() + " max_fails=0; }"))
      << server_.output();
  Response r = request(simple_get("/"));
  EXPECT_EQ(r.status, 504);
  EXPECT_EQ(s1.requests() + s2.requests() + s3.requests(), 2);
}

TEST_F(ProxyDirectives, RequestBufferingOffStreamsBeforeTheBodyEnds) {
  std::atomic<int> heads{0};
  Backend b;
  ASSERT_TRUE(start("location /s { proxy_pass http://" + b.address() +
                    "; proxy_request_buffering off; }\n"
                    "location /b { proxy_pass http://" +
                    b.address() + "; }"))
      << server_.output();
  // Buffered (default): nothing reaches the backend until the body is complete.
  Client c1(port_);
  ASSERT_TRUE(c1.send("POST /b HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\nhalf"));
  ::usleep(200000);
  EXPECT_EQ(b.connections(), 0);
  ASSERT_TRUE(c1.send("-body"));
  ASSERT_TRUE(c1.send("!"));
  EXPECT_EQ(c1.read_response().status, 200);
  EXPECT_EQ(b.last().body, "half-body!");
  // Unbuffered: the backend is connected (and has the head) while the body is incomplete.
  Client c2(port_);
  ASSERT_TRUE(c2.send("POST /s HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\nhalf"));
  EXPECT_TRUE(wait_until([&] { return b.connections() == 2; }));
  ASSERT_TRUE(c2.send("-body!"));
  EXPECT_EQ(c2.read_response().status, 200);
  EXPECT_EQ(b.last().body, "half-body!");
  (void)heads;
}

// Body bytes the client sent with its head leave in the head's write: a
// backend that reads once (as nginx's test backends do) gets them with the
// head, as from nginx, which reads what has arrived before it sends. Through
// a TLS hop (Vigil to its own TLS server, as proxy_request_buffering_ssl.t)
// the bytes come in a record of their own, read after the head's.
TEST_F(ProxyDirectives, RequestBufferingOffSendsThePrereadBodyWithTheHead) {
  std::mutex m;
  std::string first;
  std::atomic<bool> got{false};
  TcpBackend b([&](int fd) {
    char buf[4096];
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);  // one read, waiting for the first bytes
    {
      std::lock_guard<std::mutex> lock(m);
      first.assign(buf, n > 0 ? static_cast<std::size_t>(n) : 0);
    }
    got = true;
    read_n(fd, 1 << 16, 2000);  // the rest of the body, then close: no answer
  });
  ASSERT_TRUE(b.ready());
  ASSERT_TRUE(make_ca(server_.dir(), "tls"));
  const int tls_port = free_port();
  ASSERT_TRUE(start("location / { proxy_pass https://127.0.0.1:" + std::to_string(tls_port) +
                        "; proxy_request_buffering off; proxy_read_timeout 1s; }",
                    "server { listen 127.0.0.1:" + std::to_string(tls_port) +
                        " ssl; access_log off;\n  ssl_certificate " + server_.dir() +
                        "/tls.crt; ssl_certificate_key " + server_.dir() +
                        "/tls.key;\n  location / { proxy_pass http://" + b.addr() +
                        "; proxy_request_buffering off; proxy_read_timeout 1s; }\n}\n"))
      << server_.output();
  for (int i = 0; i < 5; ++i) {
    got = false;
    Client c(port_);
    ASSERT_TRUE(c.send("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\nhalf"));
    ASSERT_TRUE(wait_until([&] { return got.load(); }, 5000));
    std::lock_guard<std::mutex> lock(m);
    EXPECT_NE(first.find("\r\n\r\nhalf"), std::string::npos) << "round " << i << ": " << first;
  }
}

}  // namespace
}  // namespace vigil::test
