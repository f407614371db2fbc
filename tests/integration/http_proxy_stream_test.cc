// proxy_pass with long-lived and large traffic: a WebSocket-style upgrade
// tunnel, a 64 MiB response to a slow reader with the worker's memory
// staying bounded, and request smuggling attempts refused at the proxy.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include "integration/http_harness.h"
#include "integration/proxy_backend.h"

namespace vigil::test {
namespace {

class ProxyStream : public ::testing::Test {
 protected:
  bool start(const std::string& locations, const std::string& http = "") {
    port_ = free_port();
    return server_.start(http + "\nserver { listen 127.0.0.1:" + std::to_string(port_) +
                         "; access_log off;\n" + locations + "\n}");
  }
  VigilServer server_;
  int port_ = 0;
};

// An upgrade-aware echo backend: 101, then every byte back until EOF.
bool echo_upgrade(BackendConn& c, const BackendRequest& r) {
  if (r.header("upgrade") != "websocket") return c.send(backend_response(426, "upgrade please"));
  return upgrade_and_echo(c);
}

TEST_F(ProxyStream, WebSocketEchoThroughTheProxy) {
  Backend b(echo_upgrade);
  ASSERT_TRUE(
      start("location /ws { proxy_pass http://" + b.address() +
            "; proxy_http_version 1.1;"
            " proxy_set_header Upgrade $http_upgrade; proxy_set_header Connection \"upgrade\"; }\n"
            "location /plain { proxy_pass http://" +
            b.address() + "; }"))
      << server_.output();
  Client c(port_);
  ASSERT_TRUE(
      c.send("GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
             "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"));
  Response r = c.read_response(true);
  ASSERT_EQ(r.status, 101) << r.head;
  EXPECT_EQ(r.header("upgrade"), "websocket");
  EXPECT_EQ(r.header("connection"), "upgrade");
  EXPECT_EQ(b.last().header("upgrade"), "websocket");
  EXPECT_EQ(b.last().header("connection"), "upgrade");
  expect_echo_tunnel(c);
  if (HasFatalFailure()) return;
  // Closing our side ends the tunnel: the backend's EOF comes back as ours.
  ::shutdown(c.fd(), SHUT_WR);
  EXPECT_TRUE(c.closed_within(3000));

  // Without the Upgrade headers set, the Upgrade field is hop-by-hop and not sent.
  Client p(port_);
  ASSERT_TRUE(p.send(
      "GET /plain HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"));
  EXPECT_EQ(p.read_response().status, 426);
}

TEST_F(ProxyStream, Unrequested101Is502) {
  Backend b([](BackendConn& c, const BackendRequest&) {
    return c.send("HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: upgrade\r\n\r\n");
  });
  ASSERT_TRUE(start("location / { proxy_pass http://" + b.address() + "; }")) << server_.output();
  Client c(port_);
  ASSERT_TRUE(c.send(simple_get("/")));
  EXPECT_EQ(c.read_response().status, 502);
}

// The usual WebSocket configuration, and a client that asks for no Upgrade:
// `$http_upgrade` is empty, so no Upgrade field goes to the backend, and a
// 101 from it switches to a protocol nobody offered (RFC 9110 §7.8). That is
// an invalid response (502, §15.6.3); nginx 1.22 forwards the 101 head and
// then reads a body for it (ssl_proxy_upgrade.t, "log - bytes noupgrade").
TEST_F(ProxyStream, Unrequested101UnderWebSocketConfigIs502) {
  Backend b([](BackendConn& c, const BackendRequest&) {
    return c.send(
        "HTTP/1.1 101 Switching\r\nUpgrade: foo\r\nConnection: Upgrade\r\n\r\nhandshaked\r\n");
  });
  ASSERT_TRUE(start("location / { proxy_pass http://" + b.address() +
                        "; proxy_http_version 1.1;"
                        " proxy_set_header Upgrade $http_upgrade;"
                        " proxy_set_header Connection \"Upgrade\";"
                        " access_log logs/up.log up buffer=0; }",
                    "log_format up '$status $body_bytes_sent';"))
      << server_.output();
  Client c(port_);
  ASSERT_TRUE(c.send("GET / HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\n\r\n"));
  Response r = c.read_response();
  EXPECT_EQ(r.status, 502) << r.head;
  EXPECT_EQ(r.body.find("handshaked"), std::string::npos) << r.body;
  EXPECT_FALSE(b.last().has("upgrade"));
  EXPECT_EQ(b.last().header("connection"), "Upgrade");
  EXPECT_TRUE(wait_until([&] { return server_.read("logs/up.log").starts_with("502 "); }))
      << server_.read("logs/up.log");
}

long rss_kib(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

TEST_F(ProxyStream, SlowReaderOf64MiBKeepsWorkerMemoryBounded) {
  constexpr std::size_t kSize = std::size_t{64} << 20;
  Backend b([](BackendConn& c, const BackendRequest&) {
    if (!c.send("HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(kSize) + "\r\n\r\n")) {
      return false;
    }
    std::string block(1 << 20, '\0');
    for (std::size_t i = 0; i < kSize / block.size(); ++i) {
      for (std::size_t k = 0; k < block.size(); k += 4096)
        block[k] = static_cast<char>('a' + i % 26);
      if (!c.send(block)) return false;
    }
    return true;
  });
  ASSERT_TRUE(start("location / { proxy_pass http://" + b.address() + "; }")) << server_.output();
  const pid_t pid = server_.process().pid();
  const long base = rss_kib(pid);
  ASSERT_GT(base, 0);

  Client c(port_);
  ASSERT_TRUE(c.send(simple_get("/big")));
  std::size_t got = 0;
  std::string prefix;  // the bytes up to the end of the head
  std::size_t expected = 0;
  auto take = [&](const char* p, std::size_t n) {
    got += n;
    if (expected == 0) {
      prefix.append(p, std::min(n, std::size_t{8192}));
      std::size_t end = prefix.find("\r\n\r\n");
      if (end != std::string::npos) expected = end + 4 + kSize;
    }
  };
  long peak = base;
  char buf[65536];
  // Slow phase: small reads with pauses while the backend pushes as fast as it can.
  for (int i = 0; i < 40; ++i) {
    ::usleep(10000);
    ssize_t n = ::recv(c.fd(), buf, 4096, MSG_DONTWAIT);
    if (n > 0) take(buf, static_cast<std::size_t>(n));
    peak = std::max(peak, rss_kib(pid));
  }
  // Then the rest at full speed, up to the end the head announced.
  while (expected == 0 || got < expected) {
    pollfd p{c.fd(), POLLIN, 0};
    if (::poll(&p, 1, 5000) <= 0) break;
    ssize_t n = ::recv(c.fd(), buf, sizeof buf, 0);
    if (n <= 0) break;
    take(buf, static_cast<std::size_t>(n));
    if ((got & ((8u << 20) - 1)) < static_cast<std::size_t>(n)) peak = std::max(peak, rss_kib(pid));
  }
  peak = std::max(peak, rss_kib(pid));
  ASSERT_NE(expected, 0u) << prefix;
  EXPECT_EQ(got, expected);
  EXPECT_EQ(prefix.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << prefix;
  std::printf("worker RSS: %ld KiB before, %ld KiB at the peak\n", base, peak);
  // The proxy holds at most its buffers (8 x 4k + 4k by default) per request;
  // allow generous slack for the allocator and the rest of the worker.
  EXPECT_LT(peak - base, 16 * 1024) << "RSS grew from " << base << " KiB to " << peak << " KiB";
}

TEST_F(ProxyStream, SmugglingAttemptsAreRefusedAndNeverForwarded) {
  Backend b;
  ASSERT_TRUE(start("location / { proxy_pass http://" + b.address() + "; }")) << server_.output();
  const char* attacks[] = {
      "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n"
      "0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: h\r\n\r\n",
      "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\nContent-Length: 40\r\n\r\nabcd",
      "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 4, 4\r\n\r\nabcd",
      "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n x\r\n\r\n0\r\n\r\n",
      "POST / HTTP/1.1\r\nHost: h\r\nX-A: a\r\n folded: yes\r\nContent-Length: 0\r\n\r\n",
      "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\nTransfer-Encoding: "
      "chunked\r\n\r\n0\r\n\r\n",
      "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\n",
      "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n4;x\r\nabc\r\n0\r\n\r\n",
  };
  for (const char* a : attacks) {
    Client c(port_);
    ASSERT_TRUE(c.send(a));
    Response r = c.read_response();
    EXPECT_EQ(r.status, 400) << a;
  }
  EXPECT_EQ(b.requests(), 0);
  EXPECT_EQ(b.connections(), 0);
}

}  // namespace
}  // namespace vigil::test
