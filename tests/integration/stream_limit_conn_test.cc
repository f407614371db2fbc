// limit_conn in stream (nginx's ngx_stream_limit_conn_module), end to end:
// sessions per key counted in a shared zone, a refused one closed (TCP) or
// dropped (UDP) and logged 503, its entry given back when a session ends.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "integration/http_harness.h"
#include "integration/tcp_backend.h"
#include "test_util.h"

namespace vigil::test {
namespace {

TcpBackend echo_backend() {
  return TcpBackend([](int c) {
    char buf[4096];
    for (;;) {
      const ssize_t n = ::read(c, buf, sizeof buf);
      if (n <= 0 || !send_all(c, std::string_view(buf, static_cast<std::size_t>(n)))) break;
    }
  });
}

std::string listen_on(int port) {
  return "  listen 127.0.0.1:" + std::to_string(port) + ";\n";
}

std::string ping(Client& c) {
  if (!c.ok()) return "error";
  // A refused session may be closed before the send: a unix-domain socket
  // then fails it (EPIPE), and what is read tells.
  (void)c.send("ping");
  return read_n(c.fd(), 4, 5000);
}

class StreamLimitConn : public ::testing::TestWithParam<std::string> {
 protected:
  bool start(const std::string& stream) {
    return server_.start("", "stream {\n" + stream + "\n}\n",
                         "worker_connections 64;\nuse " + GetParam() + ";");
  }
  VigilServer server_;
};

// One session per address: a second one at the same time is closed before
// it reaches the upstream; once the first ends, its entry is free again. A
// server with another zone, or a larger number, is not held by it.
TEST_P(StreamLimitConn, SecondSessionIsRefusedUntilTheFirstEnds) {
  TcpBackend echo = echo_backend();
  ASSERT_TRUE(echo.ready());
  const int one = free_port(), other_zone = free_port(), five = free_port();
  const std::string pass = "  proxy_pass " + echo.addr() + ";\n";
  ASSERT_TRUE(
      start("limit_conn_zone $binary_remote_addr zone=addr:1m;\n"
            "limit_conn_zone $binary_remote_addr zone=addr2:1m;\n"
            "log_format st \"$server_port $status $limit_conn_status\";\n"
            "access_log logs/st.log st;\n"
            "server {\n" +
            listen_on(one) + pass +
            "  limit_conn addr 1;\n}\n"
            "server {\n" +
            listen_on(other_zone) + pass +
            "  limit_conn addr2 1;\n}\n"
            "server {\n" +
            listen_on(five) + pass + "  limit_conn addr 5;\n}\n"))
      << server_.output();
  auto first = std::make_unique<Client>(one);
  ASSERT_EQ(ping(*first), "ping");
  {
    Client c(one);
    EXPECT_EQ(ping(c), "");
    EXPECT_TRUE(c.closed_within(5000));
  }
  EXPECT_TRUE(server_.wait_output("limiting connections by zone \"addr\"")) << server_.output();
  {
    Client c(other_zone);
    EXPECT_EQ(ping(c), "ping");
  }
  {
    Client c(five);
    EXPECT_EQ(ping(c), "ping");
  }
  first.reset();
  // The first session's end gives its entry back (polled: the close is
  // seen by the server a moment later).
  std::string got;
  EXPECT_TRUE(wait_for([&] {
    Client c(one);
    got = ping(c);
    return got == "ping";
  })) << got
      << server_.output();
  EXPECT_EQ(server_.stop(), 0);
  const std::string log = server_.read("logs/st.log");
  EXPECT_NE(log.find(std::to_string(one) + " 503 REJECTED\n"), std::string::npos) << log;
  EXPECT_NE(log.find(std::to_string(one) + " 200 PASSED\n"), std::string::npos) << log;
}

// limit_conn_dry_run: the refusal is only logged; the session goes on.
TEST_P(StreamLimitConn, DryRunOnlyLogs) {
  TcpBackend echo = echo_backend();
  ASSERT_TRUE(echo.ready());
  const int port = free_port(), plain = free_port();
  const std::string pass = "  proxy_pass " + echo.addr() + ";\n";
  ASSERT_TRUE(
      start("limit_conn_zone $binary_remote_addr zone=addr:1m;\n"
            "log_format st \"$server_port $limit_conn_status\";\n"
            "access_log logs/st.log st;\n"
            "limit_conn_dry_run on;\n"
            "limit_conn_log_level warn;\n"
            "server {\n" +
            listen_on(port) + pass +
            "  limit_conn addr 1;\n}\n"
            "server {\n" +
            listen_on(plain) + pass + "}\n"))
      << server_.output();
  {
    Client first(port);
    ASSERT_EQ(ping(first), "ping");
    Client second(port);
    EXPECT_EQ(ping(second), "ping");
    Client third(plain);
    EXPECT_EQ(ping(third), "ping");
  }
  EXPECT_TRUE(server_.wait_output("[warn]")) << server_.output();
  EXPECT_TRUE(server_.wait_output("limiting connections, dry run, by zone \"addr\""))
      << server_.output();
  EXPECT_EQ(server_.stop(), 0);
  const std::string log = server_.read("logs/st.log");
  EXPECT_NE(log.find(std::to_string(port) + " REJECTED_DRY_RUN\n"), std::string::npos) << log;
  EXPECT_NE(log.find(std::to_string(port) + " PASSED\n"), std::string::npos) << log;
  EXPECT_NE(log.find(std::to_string(plain) + " -\n"), std::string::npos) << log;
}

int udp_socket(int connect_port, int* bound_port) {
  int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd == -1) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (bound_port != nullptr) {
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      ::close(fd);
      return -1;
    }
    *bound_port = ntohs(a.sin_port);
  }
  if (connect_port != 0) {
    a.sin_port = htons(static_cast<std::uint16_t>(connect_port));
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(fd);
      return -1;
    }
  }
  return fd;
}

// UDP: a client's session holds its entry until it ends; another client
// socket's datagram meanwhile is dropped, not proxied.
TEST_P(StreamLimitConn, DatagramOfASecondSessionIsDropped) {
  int upstream_port = 0;
  const int ufd = udp_socket(0, &upstream_port);
  ASSERT_NE(ufd, -1);
  const int port = free_port();
  ASSERT_TRUE(start(
      "limit_conn_zone $binary_remote_addr zone=addr:1m;\n"
      "log_format st \"$status $limit_conn_status\";\n"
      "server {\n  listen 127.0.0.1:" +
      std::to_string(port) + " udp;\n" + "  proxy_pass 127.0.0.1:" + std::to_string(upstream_port) +
      ";\n" + "  access_log logs/udp.log st;\n  limit_conn addr 1;\n  proxy_timeout 1h;\n}\n"))
      << server_.output();
  const int first = udp_socket(port, nullptr);
  const int second = udp_socket(port, nullptr);
  ASSERT_NE(first, -1);
  ASSERT_NE(second, -1);
  ASSERT_EQ(::send(first, "1", 1, 0), 1);
  pollfd p{ufd, POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 5000), 1) << server_.output();
  char buf[16];
  ASSERT_EQ(::recv(ufd, buf, sizeof buf, 0), 1);
  ASSERT_EQ(::send(second, "2", 1, 0), 1);
  EXPECT_TRUE(server_.wait_output("limiting connections by zone \"addr\"")) << server_.output();
  EXPECT_TRUE(wait_for([&] { return server_.read("logs/udp.log") == "503 REJECTED\n"; }))
      << server_.read("logs/udp.log");
  EXPECT_EQ(::poll(&p, 1, 0), 0);  // the second datagram never reached the upstream
  ::close(first);
  ::close(second);
  ::close(ufd);
  EXPECT_EQ(server_.stop(), 0);
}

INSTANTIATE_TEST_SUITE_P(Backends, StreamLimitConn, ::testing::ValuesIn(backend_params()),
                         backend_param_name);

// nginx's [emerg]s, naming the file and line.
TEST(StreamLimitConnConf, ErrorsNameFileAndLine) {
  VigilServer s;
  struct Case {
    std::string conf;  // the stream block's lines before the server
    std::string server;
    std::string error;
    int line;
  };
  const Case cases[] = {
      {"limit_conn_zone $binary_remote_addr zone=a:x;\n", "", "invalid zone size \"a:x\"", 3},
      {"limit_conn_zone $binary_remote_addr size=1m;\n", "", "invalid parameter \"size=1m\"", 3},
      {"limit_conn_zone $nope zone=a:1m;\n", "", "unknown \"nope\" variable", 3},
      {"limit_conn_zone $binary_remote_addr zone=a:1m;\n", "  limit_conn a 0;\n",
       "invalid number of connections \"0\"", 6},
      {"limit_conn_zone $binary_remote_addr zone=a:1m;\n", "  limit_conn a 1;\n  limit_conn a 2;\n",
       "\"limit_conn\" directive is duplicate", 7},
      {"", "  limit_conn_log_level debug;\n", "invalid value", 5},
  };
  for (const Case& k : cases) {
    s.write("conf/t.conf", "events {}\nstream {\n" + k.conf +
                               " server {\n  listen 127.0.0.1:" + std::to_string(free_port()) +
                               ";\n" + k.server + "  return x;\n }\n}\n");
    auto [rc, out] = run({kVigil, "-t", "-p", s.dir(), "-c", "conf/t.conf"});
    EXPECT_NE(rc, 0) << k.error;
    EXPECT_NE(out.find("[emerg] " + k.error), std::string::npos) << out;
    EXPECT_NE(out.find("t.conf:" + std::to_string(k.line)), std::string::npos) << k.error << out;
  }
}

}  // namespace
}  // namespace vigil::test
