// Tests for src/event/listening.cc: address parsing and opening sockets.

#include "vigil/event/listening.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

namespace vigil {
namespace {

struct GoodAddress {
  const char* text;
  int family;
  const char* addr_text;
  int port;
};

class ListeningGoodAddress : public ::testing::TestWithParam<GoodAddress> {};

TEST_P(ListeningGoodAddress, Parses) {
  const GoodAddress& g = GetParam();
  Listening l;
  Status s = l.set_address(g.text);
  ASSERT_TRUE(s.is_ok()) << g.text << ": " << s.to_string();
  EXPECT_EQ(l.addr.ss_family, g.family);
  EXPECT_EQ(l.addr_text, g.addr_text);
  EXPECT_EQ(l.port(), g.port);
  EXPECT_EQ(l.addrlen, g.family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6));
}

INSTANTIATE_TEST_SUITE_P(
    Table, ListeningGoodAddress,
    ::testing::Values(GoodAddress{"127.0.0.1:8080", AF_INET, "127.0.0.1:8080", 8080},
                      GoodAddress{"[::1]:8080", AF_INET6, "[::1]:8080", 8080},
                      GoodAddress{"*:8080", AF_INET, "0.0.0.0:8080", 8080},
                      GoodAddress{"8080", AF_INET, "0.0.0.0:8080", 8080},
                      GoodAddress{"localhost:8080", AF_INET, "127.0.0.1:8080", 8080},
                      GoodAddress{"LocalHost:80", AF_INET, "127.0.0.1:80", 80},
                      GoodAddress{"[::]:443", AF_INET6, "[::]:443", 443},
                      GoodAddress{"[0:0::1]:443", AF_INET6, "[::1]:443", 443},
                      GoodAddress{"10.1.2.3:65535", AF_INET, "10.1.2.3:65535", 65535},
                      GoodAddress{"127.0.0.1:0", AF_INET, "127.0.0.1:0", 0},
                      GoodAddress{"127.0.0.1:00080", AF_INET, "127.0.0.1:80", 80}));

struct BadAddress {
  const char* text;
  const char* message_part;  // what the error must say
};

class ListeningBadAddress : public ::testing::TestWithParam<BadAddress> {};

TEST_P(ListeningBadAddress, IsRejectedWithAClearMessage) {
  const BadAddress& b = GetParam();
  Listening l;
  ASSERT_TRUE(l.set_address("127.0.0.1:1").is_ok());
  Status s = l.set_address(b.text);
  ASSERT_FALSE(s.is_ok()) << b.text;
  EXPECT_NE(s.message().find(b.message_part), std::string::npos) << b.text << " -> " << s.message();
  // A failed parse leaves the previous address alone.
  EXPECT_EQ(l.addr_text, "127.0.0.1:1");
}

INSTANTIATE_TEST_SUITE_P(
    Table, ListeningBadAddress,
    ::testing::Values(BadAddress{"", "empty listen address"},
                      BadAddress{"127.0.0.1", "no port in \"127.0.0.1\""},
                      BadAddress{"abc", "no port"}, BadAddress{":8080", "no host in \":8080\""},
                      BadAddress{"127.0.0.1:", "no port in \"127.0.0.1:\""},
                      BadAddress{"127.0.0.1:65536", "invalid port \"65536\""},
                      BadAddress{"127.0.0.1:80x", "invalid port \"80x\""},
                      BadAddress{"127.0.0.1:-1", "invalid port \"-1\""},
                      BadAddress{"127.0.0.1: 80", "invalid port"},
                      BadAddress{"99999999", "invalid port \"99999999\""},
                      BadAddress{"example.com:80",
                                 "host \"example.com\" in \"example.com:80\" is not an IP address"},
                      BadAddress{"999.1.1.1:80", "invalid IPv4 address \"999.1.1.1\""},
                      BadAddress{"1.2.3:80", "invalid IPv4 address \"1.2.3\""},
                      BadAddress{"[::1]", "expected \":port\" after \"]\""},
                      BadAddress{"[::1]8080", "expected \":port\""},
                      BadAddress{"[::1:80", "missing \"]\""},
                      BadAddress{"[zz::1]:80", "invalid IPv6 address \"zz::1\""},
                      BadAddress{"[127.0.0.1]:80", "invalid IPv6 address"},
                      BadAddress{"::1:8080", "IPv6 address must be in brackets"}));

bool has_flag(int fd, int cmd, int flag) {
  return (fcntl(fd, cmd) & flag) != 0;
}

int sockopt(int fd, int level, int name) {
  int v = -1;
  socklen_t len = sizeof(v);
  if (getsockopt(fd, level, name, &v, &len) != 0) return -1;
  return v;
}

// Connects to 127.0.0.1:port; returns the connected fd or -1.
int connect_to(int port) {
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return -1;
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_port = htons(static_cast<uint16_t>(port));
  sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(s, reinterpret_cast<sockaddr*>(&sin), sizeof(sin)) != 0) {
    close(s);
    return -1;
  }
  return s;
}

TEST(Listening, OpensOnPortZeroAndAccepts) {
  Listening l;
  ASSERT_TRUE(l.set_address("127.0.0.1:0").is_ok());
  ASSERT_TRUE(l.open().is_ok());
  ASSERT_GE(l.fd, 0);
  EXPECT_TRUE(has_flag(l.fd, F_GETFL, O_NONBLOCK));
  EXPECT_TRUE(has_flag(l.fd, F_GETFD, FD_CLOEXEC));
  EXPECT_EQ(sockopt(l.fd, SOL_SOCKET, SO_REUSEADDR), 1);
  EXPECT_EQ(sockopt(l.fd, SOL_SOCKET, SO_REUSEPORT), 0);
  EXPECT_EQ(sockopt(l.fd, SOL_SOCKET, SO_ACCEPTCONN), 1);
  const int port = l.port();
  ASSERT_GT(port, 0);

  // Nonblocking: nobody there yet.
  EXPECT_LT(accept4(l.fd, nullptr, nullptr, SOCK_CLOEXEC), 0);
  EXPECT_TRUE(errno == EAGAIN || errno == EWOULDBLOCK);

  const int client = connect_to(port);
  ASSERT_GE(client, 0);
  pollfd pfd{l.fd, POLLIN, 0};
  ASSERT_EQ(poll(&pfd, 1, 5000), 1);
  const int conn = accept4(l.fd, nullptr, nullptr, SOCK_CLOEXEC);
  ASSERT_GE(conn, 0);
  ASSERT_EQ(write(client, "hi", 2), 2);
  char buf[2];
  ASSERT_EQ(read(conn, buf, 2), 2);
  EXPECT_EQ(std::string(buf, 2), "hi");
  close(conn);
  close(client);

  // Opening again is a no-op (nginx skips sockets already open or inherited).
  const int fd = l.fd;
  EXPECT_TRUE(l.open().is_ok());
  EXPECT_EQ(l.fd, fd);

  l.close();
  EXPECT_EQ(l.fd, -1);
  EXPECT_EQ(connect_to(port), -1);  // nobody listens any more
  l.close();                        // twice is harmless
}

TEST(Listening, BindFailureNamesCallAddressAndErrno) {
  Listening holder;
  ASSERT_TRUE(holder.set_address("127.0.0.1:0").is_ok());
  ASSERT_TRUE(holder.open().is_ok());
  const std::string addr = "127.0.0.1:" + std::to_string(holder.port());

  Listening l;
  ASSERT_TRUE(l.set_address(addr).is_ok());
  Status s = l.open(1);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.err(), EADDRINUSE);
  EXPECT_EQ(s.to_string(), "bind() to " + addr + " failed (98: Address already in use)");
  EXPECT_EQ(l.fd, -1);
  holder.close();
}

TEST(Listening, BindIsRetriedEveryHalfSecond) {
  Listening holder;
  ASSERT_TRUE(holder.set_address("127.0.0.1:0").is_ok());
  ASSERT_TRUE(holder.open().is_ok());
  Listening l;
  ASSERT_TRUE(l.set_address("127.0.0.1:" + std::to_string(holder.port())).is_ok());

  // Two tries, both fail: one 500 ms pause between them.
  auto t0 = std::chrono::steady_clock::now();
  Status s = l.open(2);
  auto waited = std::chrono::steady_clock::now() - t0;
  ASSERT_FALSE(s.is_ok());
  EXPECT_GE(waited, std::chrono::milliseconds(450));
  EXPECT_LT(waited, std::chrono::milliseconds(2000));

  // The holder goes away during the wait: a later try succeeds.
  std::thread closer([&holder] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    holder.close();
  });
  s = l.open(4);
  closer.join();
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  l.close();
}

TEST(Listening, ReuseportLetsTwoSocketsShareAPort) {
  Listening a;
  a.reuseport = true;
  ASSERT_TRUE(a.set_address("127.0.0.1:0").is_ok());
  ASSERT_TRUE(a.open().is_ok());
  EXPECT_EQ(sockopt(a.fd, SOL_SOCKET, SO_REUSEPORT), 1);

  Listening b;
  b.reuseport = true;
  ASSERT_TRUE(b.set_address("127.0.0.1:" + std::to_string(a.port())).is_ok());
  Status s = b.open();
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  a.close();
  b.close();
}

TEST(Listening, SocketOptions) {
  Listening l;
  l.rcvbuf = 65536;
  l.sndbuf = 32768;
  l.deferred_accept = true;
  l.backlog = 16;
  ASSERT_TRUE(l.set_address("127.0.0.1:0").is_ok());
  ASSERT_TRUE(l.open().is_ok()) << l.addr_text;
  // Linux doubles the requested buffer sizes for its bookkeeping.
  EXPECT_GE(sockopt(l.fd, SOL_SOCKET, SO_RCVBUF), 65536);
  EXPECT_GE(sockopt(l.fd, SOL_SOCKET, SO_SNDBUF), 32768);
  EXPECT_GT(sockopt(l.fd, IPPROTO_TCP, TCP_DEFER_ACCEPT), 0);
  l.close();
}

TEST(Listening, Ipv6LoopbackIsV6Only) {
  const int probe = socket(AF_INET6, SOCK_STREAM, 0);
  if (probe < 0) GTEST_SKIP() << "no IPv6 sockets here";
  close(probe);

  Listening l;
  ASSERT_TRUE(l.set_address("[::1]:0").is_ok());
  Status s = l.open();
  if (!s.is_ok() && s.err() == EADDRNOTAVAIL) GTEST_SKIP() << "no ::1 here";
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(sockopt(l.fd, IPPROTO_IPV6, IPV6_V6ONLY), 1);
  EXPECT_GT(l.port(), 0);
  l.close();
}

TEST(Listening, OpenWithoutAddressFails) {
  Listening l;
  Status s = l.open();
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(l.fd, -1);
}

}  // namespace
}  // namespace vigil
