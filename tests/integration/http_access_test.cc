// allow / deny through the real vigil binary, as nginx answers: the first
// matching rule decides, a denied request is 403 with "access forbidden by
// rule" in the error log, a level without rules inherits its parent's, the
// rules hold for every handler (static, proxy_pass, stub_status, metrics)
// and for a location a try_files redirect reaches; IPv6 clients match IPv6
// networks.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "integration/http_harness.h"
#include "integration/proxy_backend.h"

namespace vigil::test {
namespace {

class Access : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* dir : {"in", "out", "net", "open", "inh", "v6", "v6net", "tf"}) {
      server_.write(std::string("html/") + dir + "/a.txt", "a\n");
    }
    server_.write("html/a.txt", "a\n");
  }
  bool start(const std::string& server_body, const std::string& http = "") {
    port_ = free_port();
    return server_.start("access_log off;\n" + http + "server { listen 127.0.0.1:" +
                         std::to_string(port_) + "; root html;\n" + server_body + "}\n");
  }
  int status(const std::string& target) { return get(port_, simple_get(target)).status; }

  VigilServer server_;
  int port_ = 0;
};

TEST_F(Access, FirstMatchDecides) {
  ASSERT_TRUE(start("location /in/ { allow 127.0.0.1; deny all; }\n"
                    "location /out/ { deny 127.0.0.0/8; allow all; }\n"
                    "location /net/ { allow 10.0.0.0/8; allow ::1; deny all; }\n"
                    "location /open/ { allow 10.0.0.0/8; }\n"))
      << server_.output();
  EXPECT_EQ(status("/in/a.txt"), 200);
  EXPECT_EQ(status("/out/a.txt"), 403);
  EXPECT_TRUE(server_.wait_output("access forbidden by rule, client: 127.0.0.1"))
      << server_.output();
  EXPECT_EQ(status("/net/a.txt"), 403);
  EXPECT_EQ(status("/open/a.txt"), 200) << "no rule matched: allowed";
  EXPECT_EQ(status("/a.txt"), 200) << "no rules at all";
}

TEST_F(Access, ALevelWithoutRulesInheritsItsParents) {
  ASSERT_TRUE(start("deny 127.0.0.1;\n"
                    "location /open/ { allow all; }\n"
                    "location /inh/ { }\n",
                    "allow all;\n"))
      << server_.output();
  EXPECT_EQ(status("/a.txt"), 403);
  EXPECT_EQ(status("/inh/a.txt"), 403);
  EXPECT_EQ(status("/open/a.txt"), 200);
}

TEST_F(Access, EveryHandlerAndTryFilesRedirects) {
  Backend backend;
  ASSERT_NE(backend.port(), 0);
  ASSERT_TRUE(start("location /p/ { deny all; proxy_pass http://" + backend.address() +
                    "; }\n"
                    "location = /status { stub_status; deny 127.0.0.1; }\n"
                    "location = /metrics { metrics; deny 127.0.0.0/24; }\n"
                    "location /tf/ { try_files /nothing /out/a.txt; }\n"
                    "location /out/ { deny all; }\n"))
      << server_.output();
  EXPECT_EQ(status("/p/x"), 403);
  EXPECT_EQ(status("/status"), 403);
  EXPECT_EQ(status("/metrics"), 403);
  EXPECT_EQ(status("/tf/a.txt"), 403);
  EXPECT_EQ(backend.requests(), 0);
}

// One request over IPv6 to [::1]:port; the status, or 0.
int status6(int port, const std::string& target) {
  const int fd = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd == -1) return 0;
  sockaddr_in6 sa{};
  sa.sin6_family = AF_INET6;
  sa.sin6_port = htons(static_cast<std::uint16_t>(port));
  sa.sin6_addr = in6addr_loopback;
  int status = 0;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0 &&
      send_all(fd, "GET " + target + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")) {
    std::string got;
    char buf[4096];
    for (;;) {
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      got.append(buf, static_cast<std::size_t>(n));
    }
    if (got.starts_with("HTTP/1.1 ") && got.size() >= 12) status = std::stoi(got.substr(9, 3));
  }
  ::close(fd);
  return status;
}

TEST_F(Access, IPv6ClientsMatchIPv6Networks) {
  const int fd = ::socket(AF_INET6, SOCK_STREAM, 0);
  ASSERT_NE(fd, -1);
  sockaddr_in6 probe{};
  probe.sin6_family = AF_INET6;
  probe.sin6_addr = in6addr_loopback;
  const bool have_v6 = ::bind(fd, reinterpret_cast<sockaddr*>(&probe), sizeof probe) == 0;
  ::close(fd);
  ASSERT_TRUE(have_v6) << "this test needs ::1";
  const int port6 = free_port();
  ASSERT_TRUE(start("listen [::1]:" + std::to_string(port6) +
                    ";\n"
                    "location /v6/ { deny ::1; allow all; }\n"
                    "location /v6net/ { allow ::/127; deny all; }\n"
                    "location /in/ { allow 127.0.0.1; deny all; }\n"))
      << server_.output();
  EXPECT_EQ(status6(port6, "/v6/a.txt"), 403);
  EXPECT_EQ(status6(port6, "/v6net/a.txt"), 200);
  EXPECT_EQ(status6(port6, "/in/a.txt"), 403) << "an IPv4 rule never matches an IPv6 client";
  EXPECT_EQ(status("/v6/a.txt"), 200);
}

}  // namespace
}  // namespace vigil::test
