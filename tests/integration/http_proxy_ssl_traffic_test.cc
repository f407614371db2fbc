// Traffic over "proxy_pass https://" to a real nginx (proxy_ssl_harness.h):
// keepalive on one TLS connection, session resumption, a 16 MiB response
// through small buffers to a slow reader, request bodies, and a WebSocket
// tunnel through the TLS connection.
#include <gtest/gtest.h>

#include <poll.h>
#include <unistd.h>

#include <set>
#include <string>

#include "integration/proxy_ssl_harness.h"

namespace vigil::test {
namespace {

std::string addr(int port) {
  return "127.0.0.1:" + std::to_string(port);
}

// Ten requests, one TLS connection at the upstream (its $connection is the
// same, $connection_requests counts 1..10). Then nginx restarts: the cached
// connection is dead and dropped, the next request goes out on a new one.
TEST_F(ProxySsl, KeepaliveReusesOneTlsConnection) {
  ASSERT_TRUE(
      start_vigil("location / { proxy_pass https://ka; proxy_http_version 1.1;"
                  " proxy_set_header Connection \"\"; }",
                  "upstream ka { server " + addr(tls_) + "; keepalive 4; }\n"))
      << v_.output();
  for (int i = 0; i < 10; ++i) {
    Response r = get("/index.html");
    ASSERT_EQ(r.body, "nginx tls\n") << i << r.head << v_.output();
  }
  auto h = hits(10);
  ASSERT_EQ(h.size(), 10u) << nginx_.read("logs/access.log");
  std::set<std::string> connections;
  for (std::size_t i = 0; i < h.size(); ++i) {
    connections.insert(h[i].connection);
    EXPECT_EQ(h[i].requests, std::to_string(i + 1));
  }
  EXPECT_EQ(connections.size(), 1u);

  nginx_.stop();
  ASSERT_TRUE(start_nginx()) << nginx_.log();
  Response r = get("/index.html");
  EXPECT_EQ(r.body, "nginx tls\n") << r.head << v_.output();
  h = hits(11);
  ASSERT_EQ(h.size(), 11u);
  EXPECT_EQ(h[10].requests, "1") << "a new connection after the restart";
}

// One keepalive group used by two locations with different TLS settings
// (here the SNI name): a connection cached by one is not handed to the other,
// whose request would otherwise arrive under the first one's SNI.
TEST_F(ProxySsl, KeepaliveConnectionsStayWithTheirTlsContext) {
  ASSERT_TRUE(
      start_vigil("proxy_http_version 1.1; proxy_set_header Connection \"\";\n"
                  "location /a/ { proxy_ssl_server_name on; proxy_ssl_name other.test;"
                  " proxy_pass https://ka/; }\n"
                  "location /b/ { proxy_pass https://ka/; }\n",
                  "upstream ka { server " + addr(tls_) + "; keepalive 4; }\n"))
      << v_.output();
  ASSERT_EQ(get("/a/index.html").body, "nginx tls\n") << v_.output();
  ASSERT_EQ(get("/b/index.html").body, "nginx tls\n");
  ASSERT_EQ(get("/a/index.html").body, "nginx tls\n");
  auto h = hits(3);
  ASSERT_EQ(h.size(), 3u);
  EXPECT_EQ(h[0].sni, "other.test");
  EXPECT_EQ(h[1].sni, "-");
  EXPECT_NE(h[1].connection, h[0].connection);
  // /a/ finds its own connection again.
  EXPECT_EQ(h[2].connection, h[0].connection);
  EXPECT_EQ(h[2].requests, "2");
}

// proxy_ssl_session_reuse on (the default): the first connection makes a
// full handshake, the next ones resume ($ssl_session_reused "r"); off: none
// does. proxy_http_version 1.0 closes every connection after its request.
TEST_F(ProxySsl, SessionReuse) {
  ASSERT_TRUE(start_vigil("location /on/ { proxy_pass https://" + addr(tls_) +
                          "/; }\n"
                          "location /off/ { proxy_ssl_session_reuse off; proxy_pass https://" +
                          addr(tls_) + "/; }\n"))
      << v_.output();
  for (int i = 0; i < 3; ++i) ASSERT_EQ(get("/on/index.html").body, "nginx tls\n") << v_.output();
  for (int i = 0; i < 3; ++i) ASSERT_EQ(get("/off/index.html").body, "nginx tls\n");
  auto h = hits(6);
  ASSERT_EQ(h.size(), 6u);
  std::set<std::string> connections;
  for (const auto& hit : h) connections.insert(hit.connection);
  EXPECT_EQ(connections.size(), 6u) << "one connection per request";
  EXPECT_EQ(h[0].reused, ".");
  EXPECT_EQ(h[1].reused, "r");
  EXPECT_EQ(h[2].reused, "r");
  EXPECT_EQ(h[3].reused, ".");
  EXPECT_EQ(h[4].reused, ".");
  EXPECT_EQ(h[5].reused, ".");
}

// 16 MiB through four 16k buffers to a client that first reads slowly
// (small reads with pauses, so the ring fills and the TLS reads stop and
// resume), then at full speed: every byte arrives, in order.
TEST_F(ProxySsl, LargeResponseToASlowReader) {
  ASSERT_TRUE(
      start_vigil("location / { proxy_buffers 4 16k; proxy_busy_buffers_size 32k;"
                  " proxy_pass https://" +
                  addr(tls_) + "; }"))
      << v_.output();
  Client c(front_);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c.send(simple_get("/big.bin")));
  std::string in;
  char buf[65536];
  for (int i = 0; i < 40; ++i) {
    ::usleep(10000);
    ssize_t n = ::recv(c.fd(), buf, 4096, MSG_DONTWAIT);
    if (n > 0) in.append(buf, static_cast<std::size_t>(n));
  }
  const std::size_t want = (std::size_t{16} << 20);
  std::size_t head_end = std::string::npos;
  while (head_end == std::string::npos || in.size() < head_end + 4 + want) {
    if (head_end == std::string::npos) head_end = in.find("\r\n\r\n");
    pollfd p{c.fd(), POLLIN, 0};
    if (::poll(&p, 1, 5000) <= 0) break;
    ssize_t n = ::recv(c.fd(), buf, sizeof buf, 0);
    if (n <= 0) break;
    in.append(buf, static_cast<std::size_t>(n));
  }
  ASSERT_NE(head_end, std::string::npos) << in.substr(0, 512);
  EXPECT_EQ(in.substr(0, 15), "HTTP/1.1 200 OK");
  ASSERT_EQ(in.size() - head_end - 4, want) << v_.output();
  EXPECT_TRUE(in.compare(head_end + 4, want, nginx_.read("html/big.bin")) == 0)
      << "the body differs";
}

// Request bodies over TLS: a Content-Length body larger than
// client_body_buffer_size (streamed) and a chunked one (proxy_http_version
// 1.1 sends it chunked), both echoed by the backend behind nginx.
TEST_F(ProxySsl, RequestBodies) {
  ASSERT_TRUE(start_vigil("location /echo { proxy_pass https://" + addr(tls_) +
                          "; }\n"
                          "location /echo11 { proxy_http_version 1.1; proxy_pass https://" +
                          addr(tls_) + "/echo; }\n"))
      << v_.output();
  std::string body(300000, 'b');
  for (std::size_t i = 0; i < body.size(); i += 1000) body[i] = static_cast<char>('0' + i % 10);
  {
    Client c(front_);
    ASSERT_TRUE(c.send("POST /echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: " +
                       std::to_string(body.size()) + "\r\n\r\n" + body));
    Response r = c.read_response(false, 20000);
    ASSERT_EQ(r.status, 200) << r.head << v_.output();
    EXPECT_TRUE(r.body == "POST " + std::to_string(body.size()) + "\n" + body);
  }
  {
    Client c(front_);
    std::string chunked;
    for (std::size_t off = 0; off < body.size(); off += 70000) {
      const std::string part = body.substr(off, 70000);
      char len[16];
      std::snprintf(len, sizeof len, "%zx", part.size());
      chunked += std::string(len) + "\r\n" + part + "\r\n";
    }
    chunked += "0\r\n\r\n";
    ASSERT_TRUE(
        c.send("POST /echo11 HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n" +
               chunked));
    Response r = c.read_response(false, 20000);
    ASSERT_EQ(r.status, 200) << r.head << v_.output();
    EXPECT_TRUE(r.body == "POST " + std::to_string(body.size()) + "\n" + body);
  }
  EXPECT_EQ(backend_.requests(), 2);
}

// A 101 from an https upstream: the tunnel reads and writes through the
// upstream connection's TLS functions both ways, and ends on the client's EOF.
TEST_F(ProxySsl, WebSocketOverHttps) {
  ASSERT_TRUE(start_vigil("location /ws { proxy_pass https://" + addr(tls_) +
                          "; proxy_http_version 1.1;"
                          " proxy_set_header Upgrade $http_upgrade;"
                          " proxy_set_header Connection \"upgrade\"; }"))
      << v_.output();
  Client c(front_);
  ASSERT_TRUE(
      c.send("GET /ws HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
             "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"));
  Response r = c.read_response(true);
  ASSERT_EQ(r.status, 101) << r.head << v_.output();
  EXPECT_EQ(r.header("upgrade"), "websocket");
  expect_echo_tunnel(c);
  if (HasFatalFailure()) return;
  ::shutdown(c.fd(), SHUT_WR);
  EXPECT_TRUE(c.closed_within(5000));
}

}  // namespace
}  // namespace vigil::test
