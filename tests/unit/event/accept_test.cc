// Accepting: EMFILE back-off (in a child with a low RLIMIT_NOFILE), multi_accept,
// accept_disabled, and the listener's handler seeing the peer's address.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.h"
#include "vigil/core/counters.h"
#include "vigil/core/log.h"
#include "vigil/event/listening.h"
#include "vigil/event/loop.h"

namespace vigil {
namespace {

int g_accepted = 0;
std::string g_last_addr;
void greet_and_close(Connection& c) {
  ++g_accepted;
  g_last_addr = std::string(c.addr_text);
  (void)c.send(c, "hello\n", 6);
  c.loop->pool().close_connection(c);
  if (g_accepted == 3) c.loop->stop();
}

std::vector<int>* g_hoard = nullptr;
std::uint64_t g_iterations_at_release = 0;
void release_fds(Event& ev) {
  for (int fd : *g_hoard) ::close(fd);
  g_hoard->clear();
  g_iterations_at_release = static_cast<EventLoop*>(ev.data)->stats().iterations;
}
void give_up(Event& ev) { static_cast<EventLoop*>(ev.data)->stop(); }

// Runs in the child: returns the exit status (0 = the loop backed off and recovered).
int emfile_child(int ready_fd, const std::string& log_path) {
  rlimit rl{64, 64};
  if (::setrlimit(RLIMIT_NOFILE, &rl) == -1) return 10;
  Log log;
  if (!log.open(log_path, LogLevel::kInfo)) return 11;
  EventLoopConfig cfg;
  cfg.connections = 32;
  cfg.accept_mutex_delay = 100;  // the back-off period
  auto r = EventLoop::create(cfg, log);
  if (!r) return 12;
  EventLoop& loop = *r.value();
  Listening ls;
  ls.handler = greet_and_close;
  ls.log = &log;
  if (!ls.set_address("127.0.0.1:0") || !ls.open()) return 13;
  if (!loop.add_listening(ls)) return 14;
  // Use up every descriptor the limit allows.
  std::vector<int> hoard;
  for (;;) {
    int fd = ::dup(2);
    if (fd == -1) break;
    hoard.push_back(fd);
  }
  if (errno != EMFILE) return 15;
  g_hoard = &hoard;
  Event release;
  release.data = &loop;
  release.handler = release_fds;
  loop.add_timer(release, 400);
  Event guard;
  guard.data = &loop;
  guard.handler = give_up;
  loop.add_timer(guard, 8000);
  int port = ls.port();
  if (::write(ready_fd, &port, sizeof port) != sizeof port) return 16;
  loop.run();
  loop.del_timer(guard);
  if (g_accepted != 3) return 20;
  // Backing off must not spin: a handful of passes, not thousands, in 400 ms.
  if (g_iterations_at_release > 50) return 21;
  return 0;
}

TEST(Accept, EmfileBacksOffAndAcceptsAgainOnceDescriptorsAreFree) {
  std::string log_path =
      ::testing::TempDir() + "accept_emfile_" + std::to_string(::getpid()) + ".log";
  ::unlink(log_path.c_str());
  int pipefd[2];
  ASSERT_EQ(::pipe(pipefd), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(pipefd[0]);
    ::_exit(emfile_child(pipefd[1], log_path));
  }
  ::close(pipefd[1]);
  int port = 0;
  std::string got = test::read_n(pipefd[0], sizeof port, 5000);
  ::close(pipefd[0]);
  ASSERT_EQ(got.size(), sizeof port) << "child did not get ready";
  std::memcpy(&port, got.data(), sizeof port);

  // Three clients complete the handshake in the kernel's queue while the
  // worker has no descriptor to accept them with; each must still be served.
  std::vector<int> clients;
  for (int i = 0; i < 3; ++i) {
    int fd = test::connect_loopback(port);
    ASSERT_GE(fd, 0);
    clients.push_back(fd);
  }
  for (int fd : clients) {
    EXPECT_EQ(test::read_n(fd, 6, 8000), "hello\n");
    ::close(fd);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "20: not all accepted, 21: spun while backing off";

  std::ifstream f(log_path);
  std::stringstream ss;
  ss << f.rdbuf();
  EXPECT_NE(ss.str().find("accept4() on 127.0.0.1:"), std::string::npos) << ss.str();
  EXPECT_NE(ss.str().find("(24: Too many open files)"), std::string::npos) << ss.str();
  ::unlink(log_path.c_str());
}

class AcceptBackends : public ::testing::TestWithParam<std::string> {};

TEST_P(AcceptBackends, MultiAcceptTakesTheWholeQueueInOneEvent) {
  for (bool multi : {false, true}) {
    EventLoopConfig cfg;
    cfg.use = GetParam();
    cfg.connections = 64;
    cfg.multi_accept = multi;
    auto r = EventLoop::create(cfg, Log::global());
    ASSERT_TRUE(r) << r.status().to_string();
    EventLoop& loop = *r.value();
    Listening ls;
    ls.handler = greet_and_close;
    ASSERT_TRUE(ls.set_address("127.0.0.1:0"));
    ASSERT_TRUE(ls.open());
    ASSERT_TRUE(loop.add_listening(ls));
    SharedCounters* counters = shared_counters();
    std::uint64_t accepted0 = counters->accepted.get();
    std::uint64_t handled0 = counters->handled.get();
    std::uint64_t active0 = counters->active.get();
    std::vector<int> clients;
    // Blocking connects: each returns once its connection is in the queue.
    for (int i = 0; i < 5; ++i) clients.push_back(test::connect_loopback(ls.port()));
    ASSERT_TRUE(test::readable(ls.fd, 2000));
    g_accepted = 0;
    loop.process_events_and_timers();
    // Without multi_accept one readiness report accepts one connection.
    if (multi) {
      EXPECT_EQ(g_accepted, 5);
    } else {
      EXPECT_EQ(g_accepted, 1);
    }
    EXPECT_EQ(g_last_addr, "127.0.0.1");
    // accept_disabled = n/8 - free: plenty free, so negative.
    EXPECT_LT(loop.accept_disabled, 0);
    // Computed before the new connection took its slot: 64/8 - (64 - listener).
    EXPECT_EQ(loop.accept_disabled, 64 / 8 - 63);
    test::run_until([&] { loop.process_events_and_timers(); }, [&] { return g_accepted >= 5; });
    for (int fd : clients) {
      EXPECT_EQ(test::read_n(fd, 6), "hello\n");
      ::close(fd);
    }
    // stub_status's counters: every accept counted, none left active.
    EXPECT_EQ(counters->accepted.get() - accepted0, 5u);
    EXPECT_EQ(counters->handled.get() - handled0, 5u);
    EXPECT_EQ(counters->active.get(), active0);
    ls.close();
  }
}

// A connection whose peer address cannot be copied (its arena's first block
// cannot be had) is closed at once; the active gauge it was counted in must
// come back down, or stub_status reports a connection that does not exist.
TEST_P(AcceptBackends, FailedPeerAddressCopyGivesTheActiveCountBack) {
  EventLoopConfig cfg;
  cfg.use = GetParam();
  cfg.connections = 16;
  auto r = EventLoop::create(cfg, Log::global());
  ASSERT_TRUE(r) << r.status().to_string();
  EventLoop& loop = *r.value();
  Listening ls;
  ls.handler = greet_and_close;
  // An arena block no allocator can give (64 TiB): the copy fails.
  ls.pool_size = std::size_t{1} << 46;
  ASSERT_TRUE(ls.set_address("127.0.0.1:0"));
  ASSERT_TRUE(ls.open());
  ASSERT_TRUE(loop.add_listening(ls));
  SharedCounters* counters = shared_counters();
  const std::uint64_t handled0 = counters->handled.get();
  const std::uint64_t active0 = counters->active.get();
  g_accepted = 0;
  const int fd = test::connect_loopback(ls.port());
  ASSERT_GE(fd, 0);
  test::run_until([&] { loop.process_events_and_timers(); },
                  [&] { return counters->handled.get() == handled0 + 1; });
  EXPECT_EQ(counters->handled.get(), handled0 + 1);
  EXPECT_EQ(g_accepted, 0) << "the handler never sees the connection";
  EXPECT_EQ(test::read_n(fd, 1), "") << "the client sees the close";
  EXPECT_EQ(counters->active.get(), active0);
  ::close(fd);
  ls.close();
}

INSTANTIATE_TEST_SUITE_P(Backends, AcceptBackends, ::testing::ValuesIn(test::backend_params()),
                         test::backend_param_name);

}  // namespace
}  // namespace vigil
