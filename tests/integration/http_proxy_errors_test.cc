// proxy_pass when things go wrong: refused connections, timeouts, malformed
// responses, a backend dying mid-body, proxy_next_upstream and its limits,
// proxy_intercept_errors, a client going away, and the error log lines.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include "integration/http_harness.h"
#include "integration/proxy_backend.h"

namespace vigil::test {
namespace {

class ProxyErrors : public ::testing::Test {
 protected:
  bool start(const std::string& locations, const std::string& http = "") {
    port_ = free_port();
    return server_.start(log_format() + http +
                             "\nserver { listen 127.0.0.1:" + std::to_string(port_) +
                             "; access_log logs/access.log ups buffer=0;\n" + locations + "\n}",
                         "", "worker_connections 256;");
  }
  std::string log_format() {
    return "log_format ups '$status $upstream_addr|$upstream_status|$request_time';";
  }
  Response request(const std::string& raw) {
    Client c(port_);
    if (!c.ok() || !c.send(raw)) return {};
    return c.read_response();
  }
  std::string dead_address() { return "127.0.0.1:" + std::to_string(free_port()); }
  VigilServer server_;
  int port_ = 0;
};

TEST_F(ProxyErrors, RefusedIs502WithNginxLogLine) {
  const std::string dead = dead_address();
  ASSERT_TRUE(start("location / { proxy_pass http://" + dead + "; }")) << server_.output();
  Response r = request(simple_get("/x"));
  EXPECT_EQ(r.status, 502);
  EXPECT_TRUE(server_.wait_output(
      "connect() failed (111: Connection refused) while connecting to upstream, client: 127.0.0.1, "
      "server: , request: \"GET /x HTTP/1.1\", upstream: \"http://" +
      dead + "/x\", host: \"localhost\""))
      << server_.output();
  EXPECT_TRUE(wait_until([&] {
    return server_.read("logs/access.log").find("502 " + dead + "|502|") != std::string::npos;
  })) << server_.read("logs/access.log");
}

TEST_F(ProxyErrors, FailoverAndAllDown) {
  Backend up;
  const std::string dead1 = dead_address(), dead2 = dead_address();
  ASSERT_TRUE(
      start("location /one { proxy_pass http://mixed; }\n"
            "location /all { proxy_pass http://dead; }",
            "upstream mixed { server " + dead1 + "; server " + up.address() +
                "; }\nupstream dead { server " + dead1 + "; server " + dead2 + "; }"))
      << server_.output();
  for (int i = 0; i < 4; ++i) {
    Response r = request(simple_get("/one"));
    EXPECT_EQ(r.status, 200) << i;
    EXPECT_EQ(r.body, "backend GET /one");
  }
  EXPECT_EQ(up.requests(), 4);
  Response r = request(simple_get("/all"));
  EXPECT_EQ(r.status, 502);
  // Both were tried, then the group has no live server.
  r = request(simple_get("/all"));
  EXPECT_EQ(r.status, 502);
  EXPECT_TRUE(server_.wait_output("no live upstreams while connecting to upstream"))
      << server_.output();
  EXPECT_TRUE(wait_until([&] {
    return server_.read("logs/access.log").find("502 " + dead1 + ", " + dead2 + "|502, 502|") !=
               std::string::npos ||
           server_.read("logs/access.log").find("502 " + dead2 + ", " + dead1 + "|502, 502|") !=
               std::string::npos;
  })) << server_.read("logs/access.log");
}

// $upstream_connect_time and $upstream_header_time, per attempt: "-" for a
// server that refused, seconds with milliseconds for the one that answered.
TEST_F(ProxyErrors, UpstreamTimesPerAttempt) {
  Backend up;
  const std::string dead = dead_address();
  ASSERT_TRUE(start("location /one { proxy_pass http://mixed;"
                    " access_log logs/times.log times buffer=0; }\n"
                    "location /all { proxy_pass http://" + dead + ";"
                    " access_log logs/times.log times buffer=0; }",
                    "log_format times '$upstream_connect_time|$upstream_header_time';\n"
                    "upstream mixed { server " + dead + "; server " + up.address() + "; }"))
      << server_.output();
  for (int i = 0; i < 2; ++i) EXPECT_EQ(request(simple_get("/one")).status, 200) << i;
  EXPECT_EQ(request(simple_get("/all")).status, 502);
  std::string text;
  ASSERT_TRUE(wait_until([&] {
    text = server_.read("logs/times.log");
    return std::count(text.begin(), text.end(), '\n') == 3;
  })) << text;
  const std::regex answered(R"((-, )?\d+\.\d{3}\|(-, )?\d+\.\d{3})");
  std::istringstream lines(text);
  std::string line;
  for (int i = 0; i < 2 && std::getline(lines, line); ++i) {
    EXPECT_TRUE(std::regex_match(line, answered)) << line;
  }
  ASSERT_TRUE(std::getline(lines, line));
  EXPECT_EQ(line, "-|-");
}

TEST_F(ProxyErrors, ReadTimeoutIs504WithinBounds) {
  Backend silent([](BackendConn& c, const BackendRequest&) {
    pollfd p{c.fd(), POLLIN, 0};
    ::poll(&p, 1, 3000);  // until the proxy gives up and closes
    return false;
  });
  ASSERT_TRUE(
      start("location / { proxy_pass http://" + silent.address() + "; proxy_read_timeout 300ms; }"))
      << server_.output();
  auto t0 = std::chrono::steady_clock::now();
  Response r = request(simple_get("/slow"));
  auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  EXPECT_EQ(r.status, 504);
  EXPECT_GE(ms, 250);
  EXPECT_LT(ms, 2000);
  EXPECT_TRUE(server_.wait_output(
      "upstream timed out (110: Connection timed out) while reading response header from upstream"))
      << server_.output();
}

TEST_F(ProxyErrors, ConnectTimeoutIs504) {
  // A listener with a full backlog that never accepts: further SYNs are dropped.
  int lport = -1;
  const int lfd = bind_loopback(&lport, 0);
  ASSERT_NE(lfd, -1);
  std::vector<int> fillers;
  for (int i = 0; i < 3; ++i) fillers.push_back(connect_loopback(lport, true));
  ::usleep(50000);
  ASSERT_TRUE(start("location / { proxy_pass http://127.0.0.1:" + std::to_string(lport) +
                    "; proxy_connect_timeout 300ms; }"))
      << server_.output();
  auto t0 = std::chrono::steady_clock::now();
  Response r = request(simple_get("/"));
  auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  EXPECT_EQ(r.status, 504);
  EXPECT_LT(ms, 2500);
  EXPECT_TRUE(server_.wait_output(
      "upstream timed out (110: Connection timed out) while connecting to upstream"))
      << server_.output();
  for (int fd : fillers) ::close(fd);
  ::close(lfd);
}

TEST_F(ProxyErrors, MalformedResponsesAre502) {
  Backend bad([](BackendConn& c, const BackendRequest& r) {
    if (r.target == "/cl")
      return c.send("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nab");
    if (r.target == "/clte")
      return c.send("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n");
    if (r.target == "/te") {
      c.send("HTTP/1.1 200 OK\r\nTransfer-Encoding: foo\r\n\r\ncoded");
      return false;
    }
    if (r.target == "/gzte")
      return c.send("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n");
    if (r.target == "/fold")
      return c.send("HTTP/1.1 200 OK\r\nX-A: a\r\n b\r\nContent-Length: 0\r\n\r\n");
    if (r.target == "/big")
      return c.send("HTTP/1.1 200 OK\r\nX-A: " + std::string(9000, 'a') + "\r\n\r\n");
    if (r.target == "/early") return false;  // closes without a byte
    return c.send("garbage\r\n\r\n");
  });
  // max_fails=0: every request reaches the backend (no "no live upstreams").
  ASSERT_TRUE(start("location / { proxy_pass http://bad; }",
                    "upstream bad { server " + bad.address() + " max_fails=0; }"))
      << server_.output();
  for (const char* t : {"/cl", "/clte", "/te", "/gzte", "/fold", "/big", "/early", "/junk"}) {
    EXPECT_EQ(request(simple_get(t)).status, 502) << t;
  }
  EXPECT_TRUE(
      server_.wait_output("upstream sent invalid header: duplicate Content-Length while reading "
                          "response header from upstream"))
      << server_.output();
  EXPECT_TRUE(server_.wait_output("upstream sent invalid header: unknown Transfer-Encoding"))
      << server_.output();
  EXPECT_TRUE(server_.wait_output(
      "upstream sent too big header while reading response header from upstream"));
  EXPECT_TRUE(server_.wait_output(
      "upstream prematurely closed connection while reading response header from upstream"));
}

TEST_F(ProxyErrors, BackendClosingMidBodyClosesTheClient) {
  Backend dies([](BackendConn& c, const BackendRequest& r) {
    if (r.target == "/chunked") {
      c.send("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n");
    } else {
      c.send("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly part");
    }
    return false;
  });
  ASSERT_TRUE(
      start("location / { proxy_pass http://" + dies.address() + "; proxy_http_version 1.1; }"))
      << server_.output();
  for (const char* t : {"/length", "/chunked"}) {
    Client c(port_);
    ASSERT_TRUE(c.send(simple_get(t)));
    Response r = c.read_response(true);
    EXPECT_EQ(r.status, 200);
    EXPECT_TRUE(c.closed_within(3000)) << t;
    if (std::string(t) == "/length") {
      EXPECT_EQ(c.extra(), "only part");
    } else {
      EXPECT_EQ(c.extra(), "5\r\nhello\r\n");  // no last chunk: the client sees it was cut
    }
  }
  EXPECT_TRUE(server_.wait_output("upstream prematurely closed connection while reading upstream"));
}

TEST_F(ProxyErrors, NextUpstreamOnStatusAndItsLimits) {
  std::atomic<int> first{0}, second{0};
  Backend a([&](BackendConn& c, const BackendRequest&) {
    ++first;
    return c.send(backend_response(503, "a"));
  });
  Backend b([&](BackendConn& c, const BackendRequest&) {
    ++second;
    return c.send(backend_response(200, "b"));
  });
  ASSERT_TRUE(start(
      "location /n { proxy_pass http://g; proxy_next_upstream error http_503; }\n"
      "location /np { proxy_pass http://g; proxy_next_upstream error http_503 non_idempotent; }\n"
      "location /off { proxy_pass http://g; proxy_next_upstream off; }\n"
      "location /t1 { proxy_pass http://g; proxy_next_upstream http_503; proxy_next_upstream_tries "
      "1; }",
      "upstream g { server " + a.address() + " max_fails=0; server " + b.address() +
          " max_fails=0; }"))
      << server_.output();
  // Round robin alternates; whichever comes first, http_503 ends at b.
  for (int i = 0; i < 4; ++i) EXPECT_EQ(request(simple_get("/n")).body, "b") << i;
  // A POST is not sent again after it reached a server, unless non_idempotent.
  int got503 = 0;
  for (int i = 0; i < 4; ++i) {
    Response r = request("POST /n HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\n\r\nx");
    if (r.status == 503) ++got503;
  }
  EXPECT_EQ(got503, 2);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(request("POST /np HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\n\r\nx").body, "b");
  }
  int off503 = 0, t503 = 0;
  for (int i = 0; i < 4; ++i) {
    if (request(simple_get("/off")).status == 503) ++off503;
  }
  for (int i = 0; i < 4; ++i) {
    if (request(simple_get("/t1")).status == 503) ++t503;
  }
  EXPECT_EQ(off503, 2);
  EXPECT_EQ(t503, 2);
}

TEST_F(ProxyErrors, InterceptErrors) {
  Backend nf([](BackendConn& c, const BackendRequest&) {
    return c.send(backend_response(404, "backend's 404"));
  });
  server_.write("html/err.html", "our page\n");
  ASSERT_TRUE(
      start("error_page 404 /err.html; location = /err.html { }\n"
            "location /i { proxy_pass http://" +
            nf.address() +
            "; proxy_intercept_errors on; }\n"
            "location /p { proxy_pass http://" +
            nf.address() + "; }"))
      << server_.output();
  Response r = request(simple_get("/i"));
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.body, "our page\n");
  r = request(simple_get("/p"));
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.body, "backend's 404");
}

// nginx-tests' proxy_intercept_errors.t: an error_page for 500 applies to an
// intercepted 500 too, its location's `return` answering (not the built-in
// page); the connection still closes after a 500, as nginx's.
TEST_F(ProxyErrors, InterceptedErrorThatClosesStillGetsItsErrorPage) {
  Backend b([](BackendConn& c, const BackendRequest&) {
    return c.send(backend_response(500, "backend's 500"));
  });
  ASSERT_TRUE(start("location / { proxy_pass http://" + b.address() +
                    "; proxy_intercept_errors on; error_page 500 /intercepted; }\n"
                    "location = /intercepted { return 200 \"intercepted\\n\"; }"))
      << server_.output();
  Client c(port_);
  ASSERT_TRUE(c.send(simple_get("/500")));
  Response r = c.read_response();
  EXPECT_EQ(r.status, 500);
  EXPECT_EQ(r.body, "intercepted\n");
  EXPECT_EQ(r.header("connection"), "close");
  EXPECT_TRUE(c.closed_within(3000));
}

// The page of an intercepted error runs through the phases as any
// error_page: its location's access rules apply (a denied page is 403), a
// named location answers, and a proxied page is proxied (the first
// backend's connection is let go first).
TEST_F(ProxyErrors, InterceptedErrorPageRunsThroughThePhases) {
  server_.write("html/closed.html", "secret\n");
  Backend nf([](BackendConn& c, const BackendRequest& req) {
    if (req.target == "/page") return c.send(backend_response(200, "proxied page\n"));
    return c.send(backend_response(404, "backend's 404"));
  });
  ASSERT_TRUE(start("location /deny { proxy_pass http://" + nf.address() +
                    "; proxy_intercept_errors on; error_page 404 /closed.html; }\n"
                    "location = /closed.html { deny all; }\n"
                    "location /named { proxy_pass http://" + nf.address() +
                    "; proxy_intercept_errors on; error_page 404 @fallback; }\n"
                    "location @fallback { return 200 \"named\\n\"; }\n"
                    "location /prox { proxy_pass http://" + nf.address() +
                    "; proxy_intercept_errors on; error_page 404 = /page; }\n"
                    "location = /page { proxy_pass http://" + nf.address() + "; }"))
      << server_.output();
  Response r = request(simple_get("/deny"));
  EXPECT_EQ(r.status, 403);
  EXPECT_EQ(r.body.find("secret"), std::string::npos);
  r = request(simple_get("/named"));
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.body, "named\n");
  r = request(simple_get("/prox"));
  EXPECT_EQ(r.status, 200);  // "=": the page's own status
  EXPECT_EQ(r.body, "proxied page\n");
}

// A body the proxy already read (request buffering off) is the page's
// $request_body, not read a second time (nginx-tests'
// proxy_request_buffering.t, "body in error page").
TEST_F(ProxyErrors, InterceptedErrorPageSeesTheBodyAlreadyRead) {
  Backend nf([](BackendConn& c, const BackendRequest&) {
    return c.send(backend_response(404, "backend's 404"));
  });
  ASSERT_TRUE(start("proxy_request_buffering off;\n"
                    "location /e { proxy_pass http://" + nf.address() +
                    "; proxy_intercept_errors on; error_page 404 /page; }\n"
                    "location = /page { return 200 \"[$request_body]\\n\"; }"))
      << server_.output();
  Response r = request("GET /e HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n0123456789");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.body, "[0123456789]\n");
}

TEST_F(ProxyErrors, ClientGoingAwayAbortsTheUpstreamRequest) {
  std::atomic<bool> saw_close{false};
  Backend slow([&](BackendConn& c, const BackendRequest&) {
    pollfd p{c.fd(), POLLIN, 0};
    if (::poll(&p, 1, 3000) > 0) {
      char ch;
      if (::recv(c.fd(), &ch, 1, 0) <= 0) saw_close = true;
    }
    return false;
  });
  ASSERT_TRUE(start("location / { proxy_pass http://" + slow.address() + "; }"))
      << server_.output();
  {
    Client c(port_);
    ASSERT_TRUE(c.send(simple_get("/wait")));
    ASSERT_TRUE(wait_until([&] { return slow.requests() == 1; }));
  }  // the client closes
  EXPECT_TRUE(wait_until([&] { return saw_close.load(); }, 3000));
  EXPECT_TRUE(server_.wait_output(
      "client prematurely closed connection while reading response header from upstream"))
      << server_.output();
}

}  // namespace
}  // namespace vigil::test
