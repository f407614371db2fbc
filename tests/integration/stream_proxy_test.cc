// The TCP stream proxy, end to end: a real vigil in front of a real echo
// server, real sockets, every backend.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <poll.h>

#include <chrono>
#include <regex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "integration/http_harness.h"
#include "integration/tcp_backend.h"
#include "test_util.h"

namespace vigil::test {
namespace {

// A plain blocking echo server, a thread per connection. (The echo example
// drops a client whose echo does not fit its socket buffer at once, which the
// proxy's backpressure can provoke; blocking writes simply wait.)
// Echoes what it reads; at the client's EOF it closes (the proxy sees the
// upstream close).
class EchoBackend : public TcpBackend {
 public:
  EchoBackend()
      : TcpBackend([](int c) {
          char buf[65536];
          for (;;) {
            ssize_t n = ::read(c, buf, sizeof buf);
            if (n <= 0 || !send_all(c, std::string_view(buf, static_cast<std::size_t>(n)))) break;
          }
        }) {}
};

std::string stream_block(int listen_port, const std::string& body) {
  return "stream {\n" + body + "\n server {\n  listen 127.0.0.1:" + std::to_string(listen_port) +
         ";\n";
}

class StreamProxy : public ::testing::TestWithParam<std::string> {
 protected:
  bool start(const std::string& stream) {
    return server_.start("", stream, "worker_connections 256;\nuse " + GetParam() + ";");
  }
  VigilServer server_;
};

TEST_P(StreamProxy, RelaysBothWaysWithBackpressure) {
  EchoBackend echo;
  ASSERT_TRUE(echo.ready());
  ASSERT_TRUE(start(stream_block(0, "") + "  proxy_pass " + echo.addr() +
                    ";\n  proxy_buffer_size 4k;\n }\n}\n"))
      << server_.output();
  const int port = server_.port();
  Client c(port);
  ASSERT_TRUE(c.ok());
  const std::string hello = "hello through the proxy\n";
  ASSERT_TRUE(c.send(hello));
  EXPECT_EQ(read_n(c.fd(), hello.size()), hello);

  // 4 MiB one way while reading the echo back: through 4 KiB buffers, so the
  // proxy must stop reading whenever a side is slower, and lose nothing.
  std::string big(4 << 20, '\0');
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>('a' + (i * 7) % 26);
  std::thread writer([&] { EXPECT_TRUE(send_all(c.fd(), big)); });
  std::string back = read_n(c.fd(), big.size(), 20000);
  writer.join();
  EXPECT_EQ(back.size(), big.size());
  EXPECT_TRUE(back == big) << "the relayed bytes differ";
  c.close();
  EXPECT_EQ(server_.stop(), 0);
}

// A one-byte buffer per direction (nginx allows it), with tcp_nodelay off:
// every byte still goes through, both ways.
TEST_P(StreamProxy, OneByteBuffers) {
  EchoBackend echo;
  ASSERT_TRUE(echo.ready());
  ASSERT_TRUE(start(stream_block(0, "  proxy_buffer_size 1;\n  tcp_nodelay off;") +
                    "  proxy_pass " + echo.addr() + ";\n }\n}\n"))
      << server_.output();
  Client c(server_.port());
  ASSERT_TRUE(c.ok());
  std::string data;
  for (int i = 0; data.size() < 3000; ++i) data += std::to_string(i) + " ";
  ASSERT_TRUE(c.send(data));
  EXPECT_EQ(read_n(c.fd(), data.size()), data);
}

// Bytes the client has back by time since it sent `data` through an echo,
// one sample per read, until all of it came back or 10 s passed.
std::vector<std::pair<std::int64_t, std::size_t>> echo_timed(int fd, const std::string& data) {
  std::vector<std::pair<std::int64_t, std::size_t>> seen;
  const auto t0 = std::chrono::steady_clock::now();
  if (!send_all(fd, data)) return seen;
  std::size_t got = 0;
  char buf[4096];
  while (got < data.size() && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10)) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
    seen.emplace_back(std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::steady_clock::now() - t0)
                          .count(),
                      got);
  }
  return seen;
}

// proxy_download_rate and proxy_upload_rate: through an echo, what comes
// back is at most one second's worth (free at the start, as nginx's) plus
// the rate per second since the client sent (a lower bound on the time,
// from the limit; none above), and all of it comes.
TEST_P(StreamProxy, UploadAndDownloadRates) {
  EchoBackend echo;
  ASSERT_TRUE(echo.ready());
  constexpr std::size_t kRate = 16 * 1024;
  const std::string data(40 * 1024, 'd');
  for (const char* directive : {"proxy_download_rate 16k;", "proxy_upload_rate 16k;"}) {
    VigilServer server;
    ASSERT_TRUE(server.start("",
                             stream_block(0, "") + "  " + directive + "\n  proxy_pass " +
                                 echo.addr() + ";\n }\n}\n",
                             "worker_connections 256;\nuse " + GetParam() + ";"))
        << server.output();
    Client c(server.port());
    ASSERT_TRUE(c.ok());
    const auto seen = echo_timed(c.fd(), data);
    ASSERT_FALSE(seen.empty()) << directive;
    EXPECT_EQ(seen.back().second, data.size()) << directive;
    for (const auto& [ms, bytes] : seen) {
      EXPECT_LE(bytes, kRate + kRate * static_cast<std::size_t>(ms + 20) / 1000)
          << directive << " at " << ms << " ms";
    }
  }
}

// proxy_bind: the upstream sees the session come from the address given
// (an HTTP server of the same vigil says whom it sees).
TEST_P(StreamProxy, ProxyBind) {
  const int http_port = free_port();
  const std::string http = "server { listen 127.0.0.1:" + std::to_string(http_port) +
                           "; access_log off; location / { return 200 \"$remote_addr\"; } }";
  ASSERT_TRUE(server_.start(http,
                            stream_block(0, "") + "  proxy_bind 127.0.0.2;\n  proxy_pass 127.0.0.1:" +
                                std::to_string(http_port) + ";\n }\n}\n",
                            "worker_connections 256;\nuse " + GetParam() + ";"))
      << server_.output();
  ASSERT_GT(server_.port(1), 0) << server_.output();  // both listeners are up
  int stream_port = 0;
  for (int p : server_.listen_ports()) {
    if (p != http_port) stream_port = p;
  }
  ASSERT_NE(stream_port, 0);
  EXPECT_EQ(get(stream_port, simple_get("/")).body, "127.0.0.2");
}

TEST_P(StreamProxy, HalfCloseIsPassedOnAndTheSessionEnds) {
  EchoBackend echo;
  ASSERT_TRUE(echo.ready());
  ASSERT_TRUE(start(stream_block(0, "") + "  proxy_pass " + echo.addr() +
                    ";\n  proxy_half_close on;\n }\n}\n"));
  const int port = server_.port();
  Client c(port);
  ASSERT_TRUE(c.send("abc"));
  ASSERT_EQ(::shutdown(c.fd(), SHUT_WR), 0);
  // The echo server sees EOF after "abc", echoes and closes; the proxy passes
  // both on: the client reads "abc" and then EOF.
  EXPECT_EQ(read_n(c.fd(), 100, 5000), "abc");
  EXPECT_TRUE(server_.wait_output("both sides closed")) << server_.output();
  EXPECT_EQ(server_.stop(), 0);
}

// A backend that answers only once the client's side has ended (as a
// protocol that reads "until EOF" does).
class AnswerAtEofBackend : public TcpBackend {
 public:
  AnswerAtEofBackend()
      : TcpBackend([](int c) {
          char buf[4096];
          std::size_t total = 0;
          for (ssize_t n; (n = ::read(c, buf, sizeof buf)) > 0;)
            total += static_cast<std::size_t>(n);
          (void)send_all(c, "got " + std::to_string(total));
        }) {}
};

// nginx's default (proxy_half_close off): the client's EOF ends the session,
// so the answer the backend gives at EOF never reaches it; with "on" it does.
TEST_P(StreamProxy, ProxyHalfCloseOffEndsTheSessionAtTheFirstEof) {
  for (const bool on : {false, true}) {
    AnswerAtEofBackend b;
    ASSERT_TRUE(b.ready());
    ASSERT_TRUE(start(stream_block(0, "") + "  proxy_pass " + b.addr() + ";\n" +
                      (on ? "  proxy_half_close on;\n" : "") + " }\n}\n"))
        << server_.output();
    Client c(server_.port());
    ASSERT_TRUE(c.send("four"));
    ASSERT_EQ(::shutdown(c.fd(), SHUT_WR), 0);
    EXPECT_EQ(read_n(c.fd(), 100, 5000), on ? "got 4" : "") << on;
    EXPECT_TRUE(server_.wait_output(on ? "both sides closed" : "client closed"))
        << server_.output();
    c.close();
    EXPECT_EQ(server_.stop(), 0);
  }
}

TEST_P(StreamProxy, NextUpstreamWhenAServerRefuses) {
  EchoBackend echo;
  ASSERT_TRUE(echo.ready());
  ClosedPort closed;  // bound, never listening: refused
  const int dead = closed.port();
  ASSERT_TRUE(start(stream_block(0, "upstream pair {\n server 127.0.0.1:" + std::to_string(dead) +
                                        ";\n server " + echo.addr() + ";\n}\n") +
                    "  proxy_pass pair;\n }\n}\n"))
      << server_.output();
  const int port = server_.port();
  // Round robin starts on the dead server half of the time: every client
  // must still reach the live one.
  for (int i = 0; i < 4; ++i) {
    Client c(port);
    std::string msg = "try " + std::to_string(i) + "\n";
    ASSERT_TRUE(c.send(msg));
    EXPECT_EQ(read_n(c.fd(), msg.size()), msg);
  }
  EXPECT_TRUE(server_.wait_output("127.0.0.1:" + std::to_string(dead))) << server_.output();
  EXPECT_EQ(server_.stop(), 0);
}

TEST_P(StreamProxy, NoLiveUpstreamClosesTheClient) {
  ClosedPort closed;
  const int dead = closed.port();
  ASSERT_TRUE(
      start(stream_block(0, "") + "  proxy_pass 127.0.0.1:" + std::to_string(dead) + ";\n }\n}\n"));
  const int port = server_.port();
  Client c(port);
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c.closed_within(3000));
  EXPECT_TRUE(server_.wait_output("no live upstreams")) << server_.output();
  EXPECT_EQ(server_.stop(), 0);
}

TEST_P(StreamProxy, IdleSessionsEndAfterProxyTimeout) {
  EchoBackend echo;
  ASSERT_TRUE(echo.ready());
  ASSERT_TRUE(start(stream_block(0, "") + "  proxy_pass " + echo.addr() +
                    ";\n  proxy_timeout 1s;\n }\n}\n"));
  const int port = server_.port();
  Client c(port);
  ASSERT_TRUE(c.send("x"));
  EXPECT_EQ(read_n(c.fd(), 1), "x");
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(c.closed_within(5000));
  auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  EXPECT_GE(ms, 700);
  EXPECT_TRUE(server_.wait_output("timed out")) << server_.output();
  EXPECT_EQ(server_.stop(), 0);
}

INSTANTIATE_TEST_SUITE_P(Backends, StreamProxy, ::testing::ValuesIn(backend_params()),
                         backend_param_name);

TEST(StreamConf, ErrorsNameTheProblem) {
  VigilServer s;
  auto check = [&](const std::string& stream, const std::string& want) {
    s.write("conf/t.conf", "events {}\n" + stream);
    auto [rc, out] = run({kVigil, "-t", "-p", s.dir(), "-c", "conf/t.conf"});
    EXPECT_EQ(rc, 1) << out;
    EXPECT_NE(out.find(want), std::string::npos) << out;
  };
  check("stream { server { listen 127.0.0.1:9; } }",
        "no handler for server: \"proxy_pass\" is missing");
  check("stream { server { listen 127.0.0.1:9; proxy_pass nowhere; } }",
        "no port in upstream \"nowhere\" in /");
  check("stream { upstream u { } server { listen 127.0.0.1:9; proxy_pass u; } }",
        "no servers are inside upstream");
  check("stream { upstream u { server 127.0.0.1; } }", "no port in upstream \"127.0.0.1\" in /");
  check(
      "stream { server { listen 127.0.0.1:9; proxy_pass 127.0.0.1:1; }\n"
      " server { listen 127.0.0.1:9; proxy_pass 127.0.0.1:1; } }",
      "duplicate \"127.0.0.1:9\" address and port pair");
  check("stream { server { listen 127.0.0.1:9; proxy_pass 127.0.0.1:1; proxy_timeout 5x; } }",
        "invalid value \"5x\" in \"proxy_timeout\" directive");
}

}  // namespace
}  // namespace vigil::test
