// The stream proxy for UDP ("listen ... udp"), end to end: a real vigil in
// front of UDP servers run by the test, real datagrams, every backend.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "integration/http_harness.h"
#include "test_util.h"

namespace vigil::test {
namespace {

// A UDP server on 127.0.0.1 (a port the kernel picks): for every datagram,
// `reply(datagram, sender's port, own port)` gives the datagrams it sends
// back.
class UdpBackend {
 public:
  using Reply = std::function<std::vector<std::string>(const std::string&, int, int)>;
  explicit UdpBackend(Reply reply) : reply_(std::move(reply)) {
    fd_ = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (fd_ == -1 || ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == -1 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == -1) {
      return;
    }
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~UdpBackend() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    if (fd_ != -1) ::close(fd_);
  }
  UdpBackend(const UdpBackend&) = delete;
  UdpBackend& operator=(const UdpBackend&) = delete;

  bool ready() const { return port_ != 0; }
  int port() const { return port_; }
  std::string addr() const { return "127.0.0.1:" + std::to_string(port_); }
  int received() const { return received_.load(); }
  // The source ports the datagrams came from (the proxy's sockets).
  std::vector<int> senders() {
    std::lock_guard<std::mutex> lock(mu_);
    return senders_;
  }

 private:
  void serve() {
    char buf[65536];
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      sockaddr_in from{};
      socklen_t len = sizeof from;
      const ssize_t n =
          ::recvfrom(fd_, buf, sizeof buf, 0, reinterpret_cast<sockaddr*>(&from), &len);
      if (n < 0) continue;
      const int port = ntohs(from.sin_port);
      {
        std::lock_guard<std::mutex> lock(mu_);
        senders_.push_back(port);
      }
      ++received_;
      for (const std::string& out :
           reply_(std::string(buf, static_cast<std::size_t>(n)), port, port_)) {
        (void)::sendto(fd_, out.data(), out.size(), 0, reinterpret_cast<sockaddr*>(&from), len);
      }
    }
  }

  Reply reply_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> received_{0};
  std::mutex mu_;
  std::vector<int> senders_;
  std::thread thread_;
};

UdpBackend::Reply echo() {
  return [](const std::string& d, int, int) { return std::vector<std::string>{d}; };
}

// A client socket connected to vigil's UDP port.
class UdpClient {
 public:
  explicit UdpClient(int port) {
    fd_ = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ != -1 && ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == -1) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~UdpClient() {
    if (fd_ != -1) ::close(fd_);
  }
  UdpClient(const UdpClient&) = delete;
  UdpClient& operator=(const UdpClient&) = delete;

  bool ok() const { return fd_ != -1; }
  bool send(const std::string& d) {
    return ::send(fd_, d.data(), d.size(), 0) == static_cast<ssize_t>(d.size());
  }
  // The next datagram, or nullopt-like "timed out" (false) after timeout_ms.
  bool recv(std::string& out, int timeout_ms = 5000) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) <= 0) return false;
    char buf[65536];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n < 0) return false;
    out.assign(buf, static_cast<std::size_t>(n));
    return true;
  }
  std::string io(const std::string& d, int timeout_ms = 5000) {
    std::string got;
    if (!send(d) || !recv(got, timeout_ms)) return "<none>";
    return got;
  }

 private:
  int fd_ = -1;
};

class StreamUdp : public ::testing::TestWithParam<std::string> {
 protected:
  // A stream block with `body` (servers listen on port 0 with "udp").
  bool start(const std::string& body) {
    return server_.start("",
                         "stream {\n log_format u \"$status $protocol $bytes_received $bytes_sent "
                         "$upstream_addr $upstream_bytes_sent $upstream_bytes_received\";\n" +
                             body + "\n}\n",
                         "worker_connections 256;\nuse " + GetParam() + ";");
  }
  // The lines of logs/u.log once it has `n` of them (empty after 10 s).
  std::vector<std::string> log_lines(std::size_t n, int timeout_ms = 10000) {
    std::vector<std::string> lines;
    wait_for(
        [&] {
          lines.clear();
          std::string text = server_.read("logs/u.log");
          std::size_t from = 0;
          for (std::size_t at; (at = text.find('\n', from)) != std::string::npos; from = at + 1) {
            lines.push_back(text.substr(from, at - from));
          }
          return lines.size() >= n;
        },
        timeout_ms, 20);
    return lines;
  }
  VigilServer server_;
};

std::string udp_server(const std::string& body) {
  return " server {\n  listen 127.0.0.1:0 udp;\n  access_log logs/u.log u;\n" + body + " }\n";
}

// Each datagram goes on as one and comes back as one, an empty one too.
TEST_P(StreamUdp, DatagramBoundariesBothWays) {
  UdpBackend echo_server(echo());
  ASSERT_TRUE(echo_server.ready());
  ASSERT_TRUE(start(udp_server("  proxy_pass " + echo_server.addr() + ";\n"))) << server_.output();
  UdpClient c(server_.port());
  ASSERT_TRUE(c.ok());
  const std::vector<std::string> sent = {"one", std::string(3000, 'x'), "", "three"};
  for (const std::string& d : sent) ASSERT_TRUE(c.send(d));
  for (const std::string& d : sent) {
    std::string got;
    ASSERT_TRUE(c.recv(got)) << server_.output();
    EXPECT_EQ(got, d);
  }
  // One session: the backend saw every datagram from one proxy socket.
  const std::vector<int> from = echo_server.senders();
  ASSERT_EQ(from.size(), sent.size());
  for (int p : from) EXPECT_EQ(p, from[0]);
  EXPECT_EQ(server_.stop(), 0);
}

// proxy_responses 0: the session ends once the datagram went on, before any
// reply is read (the server here answers at once), with 200 and the counts
// logged; proxy_timeout is long.
TEST_P(StreamUdp, ProxyResponsesZeroEndsAtOnce) {
  UdpBackend echo_server(echo());
  ASSERT_TRUE(echo_server.ready());
  ASSERT_TRUE(start(udp_server("  proxy_pass " + echo_server.addr() +
                               ";\n  proxy_responses 0;\n  proxy_timeout 60s;\n")))
      << server_.output();
  constexpr int kClients = 5;
  for (int i = 0; i < kClients; ++i) {
    UdpClient c(server_.port());
    ASSERT_TRUE(c.send("ping!"));
    const auto lines = log_lines(static_cast<std::size_t>(i + 1));
    ASSERT_EQ(lines.size(), static_cast<std::size_t>(i + 1)) << server_.output();
    EXPECT_EQ(lines[static_cast<std::size_t>(i)], "200 UDP 5 0 " + echo_server.addr() + " 5 0");
  }
  EXPECT_TRUE(wait_for([&] { return echo_server.received() == kClients; }));
}

// proxy_responses 2: both replies reach the client, then the session ends
// (long before proxy_timeout); the next datagram is a new session.
TEST_P(StreamUdp, ProxyResponsesN) {
  UdpBackend twice([](const std::string& d, int, int) {
    return std::vector<std::string>{d, d + "+"};
  });
  ASSERT_TRUE(twice.ready());
  ASSERT_TRUE(start(udp_server("  proxy_pass " + twice.addr() +
                               ";\n  proxy_responses 2;\n  proxy_timeout 60s;\n")))
      << server_.output();
  UdpClient c(server_.port());
  ASSERT_EQ(c.io("ab"), "ab");
  std::string second;
  ASSERT_TRUE(c.recv(second));
  EXPECT_EQ(second, "ab+");
  auto lines = log_lines(1);
  ASSERT_EQ(lines.size(), 1u) << server_.output();
  EXPECT_EQ(lines[0], "200 UDP 2 5 " + twice.addr() + " 2 5");
  ASSERT_EQ(c.io("cd"), "cd");
  ASSERT_TRUE(c.recv(second));
  lines = log_lines(2);
  ASSERT_EQ(lines.size(), 2u) << server_.output();
  const std::vector<int> from = twice.senders();
  ASSERT_EQ(from.size(), 2u);
  EXPECT_NE(from[0], from[1]) << "a new session has a socket of its own";
}

// proxy_requests 1: every datagram is a session of its own (a new upstream
// socket); unset, the client keeps its session and its socket.
TEST_P(StreamUdp, ProxyRequestsReleasesTheBinding) {
  UdpBackend ports([](const std::string&, int from, int) {
    return std::vector<std::string>{std::to_string(from)};
  });
  ASSERT_TRUE(ports.ready());
  ASSERT_TRUE(start(udp_server("  proxy_pass " + ports.addr() +
                               ";\n  proxy_requests 1;\n  proxy_responses 1;\n") +
                    " server {\n  listen 127.0.0.1:0 udp;\n  proxy_pass " + ports.addr() +
                    ";\n }\n"))
      << server_.output();
  UdpClient one(server_.port(0));
  const std::string a = one.io("x");
  const std::string b = one.io("x");
  EXPECT_NE(a, "<none>");
  EXPECT_NE(b, "<none>");
  EXPECT_NE(a, b);
  UdpClient kept(server_.port(1));
  const std::string c = kept.io("x");
  EXPECT_NE(c, "<none>");
  EXPECT_EQ(kept.io("x"), c);
  EXPECT_EQ(kept.io("x"), c);
}

// proxy_timeout ends an idle session (200: no reply count was expected);
// the client's next datagram then starts a new one.
TEST_P(StreamUdp, IdleTimeoutEndsTheSession) {
  UdpBackend echo_server(echo());
  ASSERT_TRUE(echo_server.ready());
  ASSERT_TRUE(
      start(udp_server("  proxy_pass " + echo_server.addr() + ";\n  proxy_timeout 300ms;\n")))
      << server_.output();
  UdpClient c(server_.port());
  ASSERT_EQ(c.io("hi"), "hi");
  const auto lines = log_lines(1);
  ASSERT_EQ(lines.size(), 1u) << server_.output();
  EXPECT_EQ(lines[0], "200 UDP 2 2 " + echo_server.addr() + " 2 2");
  EXPECT_TRUE(server_.wait_output("udp timed out, packets from/to client:1/1"));
  ASSERT_EQ(c.io("again"), "again");
  const std::vector<int> from = echo_server.senders();
  ASSERT_EQ(from.size(), 2u);
  EXPECT_NE(from[0], from[1]);
}

// proxy_responses 1 and a server that never answers: 502 at proxy_timeout.
TEST_P(StreamUdp, MissingReplyIs502) {
  UdpBackend sink([](const std::string&, int, int) { return std::vector<std::string>{}; });
  ASSERT_TRUE(sink.ready());
  ASSERT_TRUE(start(udp_server("  proxy_pass " + sink.addr() +
                               ";\n  proxy_responses 1;\n  proxy_timeout 300ms;\n")))
      << server_.output();
  UdpClient c(server_.port());
  ASSERT_TRUE(c.send("q"));
  const auto lines = log_lines(1);
  ASSERT_EQ(lines.size(), 1u) << server_.output();
  EXPECT_EQ(lines[0], "502 UDP 1 0 " + sink.addr() + " 1 0");
}

// Round robin over two servers, one session per client socket; `hash
// $remote_addr` keeps every client of one address on one server.
TEST_P(StreamUdp, BalancesAcrossServers) {
  auto own_port = [](const std::string&, int, int self) {
    return std::vector<std::string>{std::to_string(self)};
  };
  UdpBackend b1(own_port);
  UdpBackend b2(own_port);
  ASSERT_TRUE(b1.ready() && b2.ready());
  const int p1 = b1.port();
  const int p2 = b2.port();
  const std::string servers = "  server " + b1.addr() + ";\n  server " + b2.addr() + ";\n";
  ASSERT_TRUE(start(" upstream rr {\n" + servers + " }\n upstream h {\n  hash $remote_addr;\n" +
                    servers + " }\n" + udp_server("  proxy_pass rr;\n  proxy_responses 1;\n") +
                    udp_server("  proxy_pass h;\n  proxy_responses 1;\n")))
      << server_.output();
  std::map<std::string, int> rr;
  std::map<std::string, int> hashed;
  for (int i = 0; i < 10; ++i) {
    UdpClient a(server_.port(0));
    ++rr[a.io(".")];
    UdpClient b(server_.port(1));
    ++hashed[b.io(".")];
  }
  EXPECT_EQ(rr[std::to_string(p1)], 5);
  EXPECT_EQ(rr[std::to_string(p2)], 5);
  EXPECT_EQ(hashed.size(), 1u);
  EXPECT_EQ(hashed.begin()->second, 10);
}

// A server whose port is closed answers with ICMP port unreachable: the
// session gets nothing (nginx moves no datagram to another server), the
// server counts as failed, and the next sessions go to the live one.
TEST_P(StreamUdp, UnreachableServerIsMarkedFailed) {
  UdpBackend live(echo());
  ASSERT_TRUE(live.ready());
  // A port nobody listens on: bind one, note it, close it.
  int dead_port = 0;
  {
    UdpBackend gone(echo());
    ASSERT_TRUE(gone.ready());
    dead_port = gone.port();
  }
  const std::string dead = "127.0.0.1:" + std::to_string(dead_port);
  ASSERT_TRUE(start(" upstream u {\n  server " + dead + ";\n  server " + live.addr() + ";\n }\n" +
                    udp_server("  proxy_pass u;\n  proxy_responses 1;\n")))
      << server_.output();
  {
    UdpClient first(server_.port());
    ASSERT_TRUE(first.send("x"));
    auto lines = log_lines(1);
    ASSERT_EQ(lines.size(), 1u) << server_.output();
    EXPECT_EQ(lines[0], "200 UDP 1 0 " + dead + " 1 0");
  }
  EXPECT_TRUE(server_.wait_output("Connection refused"));
  for (int i = 0; i < 4; ++i) {
    UdpClient c(server_.port());
    EXPECT_EQ(c.io("y" + std::to_string(i)), "y" + std::to_string(i)) << i;
  }
  EXPECT_EQ(live.received(), 4);
}

// proxy_upload_rate: a datagram that comes while the client's rate waits is
// dropped, the first one is not cut.
TEST_P(StreamUdp, UploadRateDropsWhatComesWhileWaiting) {
  UdpBackend echo_server(echo());
  ASSERT_TRUE(echo_server.ready());
  ASSERT_TRUE(start(udp_server("  proxy_pass " + echo_server.addr() +
                               ";\n  proxy_upload_rate 100;\n  proxy_timeout 3s;\n")))
      << server_.output();
  UdpClient c(server_.port());
  const std::string big(300, 'r');
  ASSERT_TRUE(c.send(big));
  ASSERT_TRUE(c.send("late"));
  std::string got;
  ASSERT_TRUE(c.recv(got));
  EXPECT_EQ(got, big);
  const auto lines = log_lines(1);
  ASSERT_EQ(lines.size(), 1u) << server_.output();
  EXPECT_EQ(lines[0], "200 UDP 300 300 " + echo_server.addr() + " 300 300");
  EXPECT_EQ(echo_server.received(), 1);
}

// `return` on a UDP port: one datagram with the variables ($protocol UDP).
TEST_P(StreamUdp, ReturnSendsOneDatagram) {
  ASSERT_TRUE(start(udp_server("  return \"$protocol $remote_addr\";\n"))) << server_.output();
  UdpClient c(server_.port());
  EXPECT_EQ(c.io("?"), "UDP 127.0.0.1");
  EXPECT_EQ(c.io("?"), "UDP 127.0.0.1");
  EXPECT_EQ(log_lines(2).size(), 2u);
}

// A UDP and a TCP listener on one port are two sockets; each gets its own.
TEST_P(StreamUdp, TcpAndUdpOnOnePort) {
  const int port = free_port();
  ASSERT_TRUE(start(" server {\n  listen 127.0.0.1:" + std::to_string(port) +
                    ";\n  listen 127.0.0.1:" + std::to_string(port) +
                    " udp;\n  return $protocol;\n }\n"))
      << server_.output();
  UdpClient u(port);
  EXPECT_EQ(u.io("?"), "UDP");
  const int fd = connect_loopback(port);
  ASSERT_NE(fd, -1);
  EXPECT_EQ(read_n(fd, 3), "TCP");
  ::close(fd);
}

// "listen ... udp reuseport" with two workers: a socket per worker, and the
// kernel keeps a client on one of them, so its datagrams all reach one worker.
TEST_P(StreamUdp, ReuseportKeepsAClientOnOneWorker) {
  ASSERT_TRUE(server_.start("",
                            "worker_processes 2;\nmaster_process on;\nstream {\n server {\n"
                            "  listen 127.0.0.1:0 udp reuseport;\n  return $pid;\n }\n}\n",
                            "worker_connections 256;\nuse " + GetParam() + ";"))
      << server_.output();
  ASSERT_TRUE(server_.wait_output_count("running:", 2)) << server_.output();
  const int port = server_.port();
  for (int i = 0; i < 8; ++i) {
    UdpClient c(port);
    const std::string worker = c.io("?");
    ASSERT_NE(worker, "<none>") << server_.output();
    EXPECT_EQ(c.io("?"), worker);
    EXPECT_EQ(c.io("?"), worker);
  }
}

// A wildcard UDP listener answers from the address the client reached (a
// connected client takes datagrams from that address only), and
// $server_addr is that address (nginx's IP_PKTINFO).
TEST_P(StreamUdp, WildcardListenerAnswersFromTheAddressReached) {
  ASSERT_TRUE(start(" server {\n  listen 0.0.0.0:0 udp;\n  return $server_addr;\n }\n"))
      << server_.output();
  const int port = server_.port();
  for (const char* ip : {"127.0.0.1", "127.0.0.2"}) {
    const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ASSERT_NE(fd, -1);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    ASSERT_EQ(::inet_pton(AF_INET, ip, &a.sin_addr), 1);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    ASSERT_EQ(::send(fd, "?", 1, 0), 1);
    pollfd p{fd, POLLIN, 0};
    char buf[64];
    ssize_t n = -1;
    if (::poll(&p, 1, 5000) > 0) n = ::recv(fd, buf, sizeof buf, 0);
    ::close(fd);
    ASSERT_GT(n, 0) << ip << "\n" << server_.output();
    EXPECT_EQ(std::string(buf, static_cast<std::size_t>(n)), ip);
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, StreamUdp, ::testing::ValuesIn(backend_params()),
                         backend_param_name);

// What a datagram socket cannot have: nginx's [emerg] for each.
TEST(StreamUdpConf, IncompatibleListenParameters) {
  VigilServer s;
  for (const std::string bad : {"ssl", "proxy_protocol", "backlog=10", "so_keepalive=on"}) {
    s.write("conf/t.conf",
            "events {}\nstream {\n server {\n  listen 127.0.0.1:" + std::to_string(free_port()) +
                " udp " + bad + ";\n  return x;\n }\n}\n");
    auto [rc, out] = run({kVigil, "-t", "-p", s.dir(), "-c", "conf/t.conf"});
    EXPECT_NE(rc, 0) << bad;
    const std::string name = bad.substr(0, bad.find('='));
    EXPECT_NE(out.find("[emerg] \"" + name + "\" parameter is incompatible with \"udp\" in "),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("t.conf:4"), std::string::npos) << out;
  }
  // http has no UDP.
  s.write("conf/t.conf", "events {}\nhttp {\n server {\n  listen 127.0.0.1:" +
                             std::to_string(free_port()) + " udp;\n }\n}\n");
  auto [rc, out] = run({kVigil, "-t", "-p", s.dir(), "-c", "conf/t.conf"});
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("invalid parameter \"udp\""), std::string::npos) << out;
}

TEST(StreamUdpConf, ProxyRequestsAndResponsesTakeNumbers) {
  VigilServer s;
  for (const std::string bad : {"proxy_requests x", "proxy_responses -1"}) {
    s.write("conf/t.conf",
            "events {}\nstream {\n server {\n  listen 127.0.0.1:" + std::to_string(free_port()) +
                " udp;\n  " + bad + ";\n  proxy_pass 127.0.0.1:1;\n }\n}\n");
    auto [rc, out] = run({kVigil, "-t", "-p", s.dir(), "-c", "conf/t.conf"});
    EXPECT_NE(rc, 0) << bad;
    EXPECT_NE(out.find("[emerg] invalid value"), std::string::npos) << out;
  }
}

}  // namespace
}  // namespace vigil::test
