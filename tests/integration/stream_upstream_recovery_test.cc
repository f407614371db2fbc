// A failed stream upstream server recovers once a connection to it is
// established (nginx's NGX_STREAM_UPSTREAM_NOTIFY_CONNECT), not when that
// session ends: sessions can be long, and the server takes new ones at once.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "integration/http_harness.h"
#include "integration/tcp_backend.h"
#include "test_util.h"

namespace vigil::test {
namespace {

// Holds each connection open until the peer closes it.
class HoldingBackend : public TcpBackend {
 public:
  HoldingBackend()
      : TcpBackend([](int c) {
          char buf[4096];
          while (::read(c, buf, sizeof buf) > 0) {
          }
        }) {}
};

// Accepts what is pending on the listening socket `fd`; the connections are
// kept in `held`. Returns how many there are.
std::size_t accept_pending(int fd, std::vector<int>& held) {
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 0) <= 0) break;
    const int c = ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (c == -1) break;
    held.push_back(c);
  }
  return held.size();
}

TEST(StreamUpstreamRecovery, ARecoveredServerTakesNewSessionsAtOnce) {
  HoldingBackend backup;
  ASSERT_TRUE(backup.ready());
  // The primary: bound, not listening (connections are refused) until the
  // test listens on it.
  int primary_port = 0;
  const int primary = bind_loopback(&primary_port, -1);
  ASSERT_NE(primary, -1);
  std::vector<int> held;
  const int port = free_port();
  VigilServer server;
  ASSERT_TRUE(server.start_raw(
      "daemon off;\nmaster_process off;\nerror_log stderr info;\npid logs/vigil.pid;\n"
      "events { worker_connections 256; }\nstream {\n"
      "upstream u { server 127.0.0.1:" + std::to_string(primary_port) +
      " fail_timeout=1s; server " + backup.addr() + " backup; }\n"
      "server { listen 127.0.0.1:" + std::to_string(port) + "; proxy_pass u; }\n}\n"))
      << server.output();

  std::vector<std::unique_ptr<Client>> clients;
  auto open_client = [&] {
    clients.push_back(std::make_unique<Client>(port));
    return clients.back()->ok() && clients.back()->send("x");
  };
  // The primary refuses: the first session goes to the backup, and the
  // primary is out for fail_timeout.
  ASSERT_TRUE(open_client());
  ASSERT_TRUE(wait_for([&] { return backup.accepted() == 1; })) << server.output();
  ASSERT_EQ(::listen(primary, 64), 0);
  // New sessions go to the backup until fail_timeout has passed, then one
  // probes the primary.
  ASSERT_TRUE(wait_for(
      [&] {
        if (accept_pending(primary, held) > 0) return true;
        if (static_cast<std::size_t>(backup.accepted()) == clients.size()) (void)open_client();
        return false;
      },
      10000, 20))
      << server.output();
  // Its connection is established: the next sessions go to the primary
  // while the probe's session still runs.
  const int to_backup = backup.accepted();
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(open_client());
  EXPECT_TRUE(wait_for([&] { return accept_pending(primary, held) == 6; })) << server.output();
  EXPECT_EQ(backup.accepted(), to_backup);
  clients.clear();
  for (int c : held) ::close(c);
  ::close(primary);
  EXPECT_EQ(server.stop(), 0);
}

}  // namespace
}  // namespace vigil::test
