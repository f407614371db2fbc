// allow / deny in stream (nginx's ngx_stream_access_module), end to end: a
// real vigil in front of a real echo server; TCP, unix-domain and UDP
// clients, every backend.
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

// "ping" through the proxy: the echo when the session is let in, "" when it
// is closed first.
std::string ping(Client& c) {
  if (!c.ok()) return "error";
  // A refused session may be closed before the send: a unix-domain socket
  // then fails it (EPIPE), and what is read tells.
  (void)c.send("ping");
  return read_n(c.fd(), 4, 5000);
}

class StreamAccess : public ::testing::TestWithParam<std::string> {
 protected:
  bool start(const std::string& stream) {
    return server_.start("", "stream {\n" + stream + "\n}\n",
                         "worker_connections 64;\nuse " + GetParam() + ";");
  }
  VigilServer server_;
};

// The first rule that matches decides; a server without rules of its own
// has the stream block's, one with rules has only its own.
TEST_P(StreamAccess, FirstMatchingRuleDecides) {
  TcpBackend echo = echo_backend();
  ASSERT_TRUE(echo.ready());
  const int denied = free_port(), allowed = free_port(), inherited = free_port(), own = free_port();
  const std::string pass = "  proxy_pass " + echo.addr() + ";\n";
  ASSERT_TRUE(
      start("log_format st \"$server_port $status\";\n"
            "access_log logs/st.log st;\n"
            "deny 127.0.0.1;\n"
            "server {\n" +
            listen_on(denied) + pass +
            "  deny 10.0.0.0/8; deny 127.0.0.0/24; allow all;\n}\n"
            "server {\n" +
            listen_on(allowed) + pass +
            "  allow 127.0.0.1; deny all;\n}\n"
            "server {\n" +
            listen_on(inherited) + pass +
            "}\n"
            "server {\n" +
            listen_on(own) + pass + "  allow ::1;\n}\n"))
      << server_.output();
  {
    Client c(denied);
    EXPECT_EQ(ping(c), "");
    EXPECT_TRUE(c.closed_within(5000));
  }
  {
    Client c(allowed);
    EXPECT_EQ(ping(c), "ping");
  }
  {
    Client c(inherited);
    EXPECT_EQ(ping(c), "");
  }
  {
    // Its own rule (for another address) matches nothing: let in.
    Client c(own);
    EXPECT_EQ(ping(c), "ping");
  }
  EXPECT_TRUE(server_.wait_output("access forbidden by rule, client: 127.0.0.1"))
      << server_.output();
  EXPECT_EQ(server_.stop(), 0);
  // Only the two allowed sessions reached the upstream; the denied ones are
  // logged with $status 403.
  EXPECT_EQ(echo.accepted(), 2);
  const std::string log = server_.read("logs/st.log");
  EXPECT_NE(log.find(std::to_string(denied) + " 403\n"), std::string::npos) << log;
  EXPECT_NE(log.find(std::to_string(inherited) + " 403\n"), std::string::npos) << log;
  EXPECT_NE(log.find(std::to_string(allowed) + " 200\n"), std::string::npos) << log;
}

// "unix:" matches the clients of a unix-domain listener, and only them.
TEST_P(StreamAccess, UnixRuleMatchesUnixClients) {
  TcpBackend echo = echo_backend();
  ASSERT_TRUE(echo.ready());
  const int port = free_port();
  const std::string sock = server_.path("s.sock");
  ASSERT_TRUE(start("server {\n" + listen_on(port) + "  listen unix:" + sock + ";\n" +
                    "  proxy_pass " + echo.addr() + ";\n  deny unix:;\n}\n"))
      << server_.output();
  ASSERT_TRUE(wait_for([&] { return ::access(sock.c_str(), F_OK) == 0; })) << server_.output();
  {
    Client c(sock);
    EXPECT_EQ(ping(c), "");
  }
  {
    Client c(port);
    EXPECT_EQ(ping(c), "ping");
  }
  EXPECT_EQ(server_.stop(), 0);
}

// A denied datagram is dropped: nothing reaches the upstream, nothing comes
// back, and the session is logged with 403.
TEST_P(StreamAccess, DeniedDatagramIsDropped) {
  int ufd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ASSERT_NE(ufd, -1);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ASSERT_EQ(::bind(ufd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::getsockname(ufd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const int upstream_port = ntohs(a.sin_port);
  const int port = free_port();
  ASSERT_TRUE(start(
      "log_format st \"$status\";\n"
      "server {\n  listen 127.0.0.1:" +
      std::to_string(port) + " udp;\n" + "  proxy_pass 127.0.0.1:" + std::to_string(upstream_port) +
      ";\n" + "  access_log logs/udp.log st;\n  deny all;\n}\n"))
      << server_.output();
  int cfd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ASSERT_NE(cfd, -1);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<std::uint16_t>(port));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(cfd, reinterpret_cast<sockaddr*>(&to), sizeof to), 0);
  ASSERT_EQ(::send(cfd, "x", 1, 0), 1);
  EXPECT_TRUE(server_.wait_output("access forbidden by rule")) << server_.output();
  EXPECT_TRUE(wait_for([&] { return server_.read("logs/udp.log") == "403\n"; }))
      << server_.read("logs/udp.log");
  pollfd p{ufd, POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 0), 0);  // the upstream got nothing
  ::close(cfd);
  ::close(ufd);
  EXPECT_EQ(server_.stop(), 0);
}

INSTANTIATE_TEST_SUITE_P(Backends, StreamAccess, ::testing::ValuesIn(backend_params()),
                         backend_param_name);

// What is no address: nginx's [emerg], naming the file and line.
TEST(StreamAccessConf, BadAddressNamesFileAndLine) {
  VigilServer s;
  for (const std::string bad : {"300.1.1.1", "10.0.0.0/33", "::1/129", "localhost"}) {
    s.write("conf/t.conf",
            "events {}\nstream {\n server {\n  listen 127.0.0.1:" + std::to_string(free_port()) +
                ";\n  deny " + bad + ";\n  return x;\n }\n}\n");
    auto [rc, out] = run({kVigil, "-t", "-p", s.dir(), "-c", "conf/t.conf"});
    EXPECT_NE(rc, 0) << bad;
    EXPECT_NE(out.find("[emerg] invalid parameter \"" + bad + "\" in "), std::string::npos) << out;
    EXPECT_NE(out.find("t.conf:5"), std::string::npos) << out;
  }
}

}  // namespace
}  // namespace vigil::test
