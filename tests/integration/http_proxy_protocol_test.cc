// "listen ... proxy_protocol" on http listeners: a real vigil, raw sockets
// writing PROXY protocol v1 and v2 headers before the request, curl's
// --haproxy-protocol, the $proxy_protocol_* variables, realip's
// "real_ip_header proxy_protocol", and the errors that close the connection.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <string>

#include "integration/http_harness.h"
#include "integration/tls_harness.h"
#include "test_process.h"
#include "test_util.h"

namespace vigil::test {
namespace {

const std::string kTcp4 = "PROXY TCP4 192.0.2.1 192.0.2.2 123 5678\r\n";
const std::string kTcp6 = "PROXY TCP6 2001:DB8::1 2001:db8::2 123 5678\r\n";

std::string be16(unsigned v) {
  return std::string{static_cast<char>(v >> 8), static_cast<char>(v & 0xFF)};
}

// A v2 header: PROXY command, TCP over IPv4, 192.0.2.1:123 -> 192.0.2.2:5678,
// then `tlvs`.
std::string v2_tcp4(const std::string& tlvs = "") {
  const std::string body =
      std::string("\xC0\x00\x02\x01\xC0\x00\x02\x02", 8) + be16(123) + be16(5678) + tlvs;
  return std::string("\r\n\r\n\0\r\nQUIT\n", 12) + "\x21\x11" + be16(body.size()) + body;
}

const char* kVars =
    "   return 200 \"pp=$proxy_protocol_addr:$proxy_protocol_port "
    "server=$proxy_protocol_server_addr:$proxy_protocol_server_port "
    "remote=$remote_addr realip=$realip_remote_addr\\n\";\n";

class HttpProxyProtocol : public ::testing::Test {
 protected:
  // One server; `server_extra` adds to it (realip acts before "return" only
  // at the server level: post-read).
  bool start(const std::string& listen_extra, const std::string& server_extra = "") {
    return server_.start("server {\n  listen 127.0.0.1:0 proxy_protocol" + listen_extra +
                         ";\n  client_header_timeout 1s;\n" + server_extra +
                         "  location / {\n" + kVars + "  }\n}\n");
  }
  // The body of the answer to `header` + a GET of `path`.
  std::string body_of(const std::string& header, const std::string& path = "/") {
    Client c(server_.port());
    if (!c.ok() || !c.send(header + simple_get(path))) return "(no connection)";
    Response r = c.read_response();
    return r.status == 200 ? r.body : "(status " + std::to_string(r.status) + ")";
  }
  VigilServer server_;
};

TEST_F(HttpProxyProtocol, V1HeaderSetsTheVariablesNotTheClient) {
  ASSERT_TRUE(start("")) << server_.output();
  EXPECT_EQ(body_of(kTcp4),
            "pp=192.0.2.1:123 server=192.0.2.2:5678 remote=127.0.0.1 realip=127.0.0.1\n");
  EXPECT_EQ(body_of(kTcp6),
            "pp=2001:db8::1:123 server=2001:db8::2:5678 remote=127.0.0.1 realip=127.0.0.1\n");
  // UNKNOWN: accepted, no addresses.
  EXPECT_EQ(body_of("PROXY UNKNOWN\r\n"), "pp=: server=: remote=127.0.0.1 realip=127.0.0.1\n");
  EXPECT_EQ(server_.stop(), 0);
}

TEST_F(HttpProxyProtocol, V2HeaderWithTlvsAndLocalCommand) {
  ASSERT_TRUE(start("")) << server_.output();
  const std::string tlvs = std::string("\x02", 1) + be16(9) + "localhost" +
                           std::string("\x04", 1) + be16(3) + "abc";
  EXPECT_EQ(body_of(v2_tcp4(tlvs)),
            "pp=192.0.2.1:123 server=192.0.2.2:5678 remote=127.0.0.1 realip=127.0.0.1\n");
  // LOCAL (a health check of the balancer): no addresses.
  const std::string local = std::string("\r\n\r\n\0\r\nQUIT\n", 12) + std::string("\x20\x00", 2) + be16(0);
  EXPECT_EQ(body_of(local), "pp=: server=: remote=127.0.0.1 realip=127.0.0.1\n");
  EXPECT_EQ(server_.stop(), 0);
}

TEST_F(HttpProxyProtocol, RealIpTakesTheHeaderFromATrustedPeerOnly) {
  ASSERT_TRUE(start("", "  set_real_ip_from 127.0.0.1;\n  real_ip_header proxy_protocol;\n"))
      << server_.output();
  EXPECT_EQ(body_of(kTcp4),
            "pp=192.0.2.1:123 server=192.0.2.2:5678 remote=192.0.2.1 realip=127.0.0.1\n");
  EXPECT_EQ(body_of(kTcp6),
            "pp=2001:db8::1:123 server=2001:db8::2:5678 remote=2001:db8::1 realip=127.0.0.1\n");
  EXPECT_EQ(body_of("PROXY UNKNOWN\r\n"), "pp=: server=: remote=127.0.0.1 realip=127.0.0.1\n");
  EXPECT_EQ(server_.stop(), 0);
}

TEST_F(HttpProxyProtocol, RealIpIgnoresTheHeaderOfAnUntrustedPeer) {
  ASSERT_TRUE(start("", "  set_real_ip_from 10.0.0.0/8;\n  real_ip_header proxy_protocol;\n"))
      << server_.output();
  EXPECT_EQ(body_of(kTcp4),
            "pp=192.0.2.1:123 server=192.0.2.2:5678 remote=127.0.0.1 realip=127.0.0.1\n");
  EXPECT_EQ(server_.stop(), 0);
}

TEST_F(HttpProxyProtocol, AHeaderInPiecesIsWaitedFor) {
  ASSERT_TRUE(start("")) << server_.output();
  Client c(server_.port());
  ASSERT_TRUE(c.ok());
  int one = 1;
  ASSERT_EQ(::setsockopt(c.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one), 0);
  const std::string all = v2_tcp4() + simple_get("/");
  // Byte by byte through the header, each a segment of its own: the server
  // must consume exactly the header and leave the request.
  for (std::size_t i = 0; i < 28; ++i) {
    ASSERT_TRUE(c.send(all.substr(i, 1)));
    // Still open and silent while the header is incomplete.
    pollfd p{c.fd(), POLLIN, 0};
    ASSERT_EQ(::poll(&p, 1, 0), 0) << i;
  }
  ASSERT_TRUE(c.send(all.substr(28)));
  Response r = c.read_response();
  EXPECT_EQ(r.status, 200) << server_.output();
  EXPECT_EQ(r.body, "pp=192.0.2.1:123 server=192.0.2.2:5678 remote=127.0.0.1 realip=127.0.0.1\n");
  EXPECT_EQ(server_.stop(), 0);
}

TEST_F(HttpProxyProtocol, ABrokenHeaderClosesTheConnectionWithNginxsLogLine) {
  ASSERT_TRUE(start("")) << server_.output();
  const char* bad[] = {"GET / HTTP/1.0\r\n\r\n", "PROXY TCP4 192.0.2.1 192.0.2.2 123\r\n",
                       "PROXY TCP4 192.0.2.300 192.0.2.2 1 2\r\n"};
  for (const char* b : bad) {
    Client c(server_.port());
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE(c.send(b));
    EXPECT_TRUE(c.closed_within(3000)) << b;
    EXPECT_EQ(c.extra(), "") << b;  // no answer at all
  }
  EXPECT_TRUE(server_.wait_output("broken header: \"GET / HTTP/1.0\\x0D\\x0A"))
      << server_.output();
  EXPECT_TRUE(server_.wait_output("(wrong number of fields) while reading PROXY protocol"))
      << server_.output();
  EXPECT_TRUE(server_.wait_output("(invalid address) while reading PROXY protocol"))
      << server_.output();
  // A v2 header longer than the bound is refused before it arrives.
  Client c(server_.port());
  ASSERT_TRUE(c.send(std::string("\r\n\r\n\0\r\nQUIT\n", 12) + "\x21\x11" + be16(8000)));
  EXPECT_TRUE(c.closed_within(3000));
  EXPECT_TRUE(server_.wait_output("(header too large)")) << server_.output();
  EXPECT_EQ(server_.stop(), 0);
}

TEST_F(HttpProxyProtocol, AnIncompleteHeaderTimesOutWithClientHeaderTimeout) {
  ASSERT_TRUE(start("")) << server_.output();
  Client c(server_.port());
  ASSERT_TRUE(c.send("PROXY TCP4 192.0.2.1"));
  EXPECT_TRUE(c.closed_within(5000));
  EXPECT_TRUE(server_.wait_output("client timed out while reading PROXY protocol"))
      << server_.output();
  EXPECT_EQ(server_.stop(), 0);
}

TEST_F(HttpProxyProtocol, CurlHaproxyProtocol) {
  ASSERT_TRUE(start("")) << server_.output();
  auto [rc, out] = run({"curl", "-sS", "--haproxy-protocol",
                        "http://127.0.0.1:" + std::to_string(server_.port()) + "/"});
  ASSERT_EQ(rc, 0) << out;
  // curl's header names its own connection: source 127.0.0.1, our port.
  EXPECT_NE(out.find("server=127.0.0.1:" + std::to_string(server_.port()) + " remote=127.0.0.1"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("pp=:"), std::string::npos) << out;
  EXPECT_EQ(server_.stop(), 0);
}

TEST_F(HttpProxyProtocol, KeepAliveRequestsShareTheConnectionsHeader) {
  ASSERT_TRUE(start("", "  set_real_ip_from 127.0.0.1;\n  real_ip_header proxy_protocol;\n"))
      << server_.output();
  Client c(server_.port());
  ASSERT_TRUE(c.send(kTcp4 + simple_get("/a") + simple_get("/b")));
  // The header is the connection's: every request on it sees it.
  for (int i = 0; i < 2; ++i) {
    Response r = c.read_response();
    EXPECT_EQ(r.body,
              "pp=192.0.2.1:123 server=192.0.2.2:5678 remote=192.0.2.1 realip=127.0.0.1\n")
        << i;
  }
  EXPECT_EQ(server_.stop(), 0);
}

TEST_F(HttpProxyProtocol, ListenersWithoutItReadNoHeader) {
  ASSERT_TRUE(server_.start("server {\n listen 127.0.0.1:0;\n location / {\n" + std::string(kVars) +
                            " }\n}\n"))
      << server_.output();
  EXPECT_EQ(body_of(""), "pp=: server=: remote=127.0.0.1 realip=127.0.0.1\n");
  // The header is then just a bad request line.
  EXPECT_EQ(body_of(kTcp4), "(status 400)");
  EXPECT_EQ(server_.stop(), 0);
}

TEST(HttpProxyProtocolTls, TheHeaderComesBeforeTheHandshake) {
  TlsServer server;
  ASSERT_TRUE(server.pki_ok());
  ASSERT_TRUE(server.start(
      "server {\n  listen 127.0.0.1:0 ssl proxy_protocol;\n  ssl_certificate ../server.crt;\n"
      "  ssl_certificate_key ../server.key;\n  location / {\n" +
      std::string(kVars) + "  }\n}\n"))
      << server.output();
  TlsClient c(server.port());
  pollfd p{c.fd(), POLLOUT, 0};  // its connect is nonblocking
  ASSERT_EQ(::poll(&p, 1, 3000), 1);
  ASSERT_TRUE(send_all(c.fd(), kTcp4));
  ASSERT_TRUE(c.handshake()) << server.output();
  ASSERT_TRUE(c.send(simple_get("/")));
  Response r = c.read_response();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "pp=192.0.2.1:123 server=192.0.2.2:5678 remote=127.0.0.1 realip=127.0.0.1\n");
  // Without the header the ClientHello is a broken header.
  TlsClient bare(server.port());
  EXPECT_FALSE(bare.handshake(3000));
  EXPECT_TRUE(server.wait_output("broken header: \"\\x16\\x03")) << server.output();
  EXPECT_EQ(server.stop(), 0);
}

}  // namespace
}  // namespace vigil::test
