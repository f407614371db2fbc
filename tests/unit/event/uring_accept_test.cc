// io_uring's listening sockets: a multishot IORING_OP_ACCEPT takes the
// connections (uring_accept.cc), and the seeds' accept model still holds:
// one connection per event without multi_accept, the peer's address, the
// accept mutex and accept_disabled taking the socket away from the kernel's
// accept (the connection stays in the listen queue for another worker), and
// close_listening(). Multishot accept is the default; each case also runs
// with VIGIL_URING_ACCEPT=poll, the fallback a kernel without multishot
// accept gets (readiness + accept4).
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "test_util.h"
#include "vigil/core/log.h"
#include "vigil/core/process_mutex.h"
#include "vigil/event/connection.h"
#include "vigil/event/listening.h"
#include "vigil/event/loop.h"

namespace vigil {
namespace {

int g_accepted = 0;
std::string g_addr;

void greet_and_close(Connection& c) {
  ++g_accepted;
  g_addr = std::string(c.addr_text);
  (void)c.send(c, "hello\n", 6);
  c.loop->pool().close_connection(c);
}

class Taken : public ProcessMutex {
 public:
  bool trylock() override { return free_; }
  void unlock() override {}
  bool free_ = false;
};

// One pass that returns within 20 ms even when nothing happens.
void pass(EventLoop& loop) {
  static Event tick;
  tick.handler = [](Event&) {};
  loop.add_timer(tick, 20);
  loop.process_events_and_timers();
  loop.del_timer(tick);
}

// A connection still in the listen queue, taken by the test itself (what
// another worker would get): the loop's kernel accept must not have taken it.
int take_from_queue(int listen_fd, int timeout_ms) {
  pollfd p{listen_fd, POLLIN, 0};
  if (::poll(&p, 1, timeout_ms) != 1) return -1;
  return ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

class UringAccept : public ::testing::TestWithParam<std::string> {
 protected:
  // An io_uring loop whose listening sockets accept as the parameter says
  // (the backend reads VIGIL_URING_ACCEPT when the loop is made).
  std::unique_ptr<EventLoop> make_loop() {
    ::setenv("VIGIL_URING_ACCEPT", GetParam().c_str(), 1);
    EventLoopConfig cfg;
    cfg.use = "io_uring";
    cfg.connections = 16;
    auto r = EventLoop::create(cfg, Log::global());
    ::unsetenv("VIGIL_URING_ACCEPT");
    EXPECT_TRUE(r) << "io_uring refused: " << r.status().to_string();
    return r ? std::move(r).value() : nullptr;
  }

  void SetUp() override {
    loop_ = make_loop();
    ASSERT_NE(loop_, nullptr);
    ls_.handler = greet_and_close;
    ASSERT_TRUE(ls_.set_address("127.0.0.1:0"));
    ASSERT_TRUE(ls_.open());
    g_accepted = 0;
    g_addr.clear();
  }
  bool multishot() const { return GetParam() == "multishot"; }

  std::unique_ptr<EventLoop> loop_;
  Listening ls_;
};

TEST_P(UringAccept, OneConnectionPerEventAndTheRestOnLaterPasses) {
  ASSERT_TRUE(loop_->add_listening(ls_));
  std::vector<int> clients;
  for (int i = 0; i < 3; ++i) clients.push_back(test::connect_loopback(ls_.port()));
  for (int fd : clients) ASSERT_GE(fd, 0);
  ASSERT_TRUE(test::readable(ls_.fd, 2000));
  pass(*loop_);
  EXPECT_EQ(g_accepted, 1) << "without multi_accept one event accepts one connection";
  EXPECT_EQ(g_addr, "127.0.0.1");  // getpeername for the kernel's accepts
  int left = ::accept4(ls_.fd, nullptr, nullptr, SOCK_NONBLOCK);
  if (multishot()) {
    // The kernel took all three for this loop at its first submit.
    EXPECT_EQ(left, -1);
    EXPECT_EQ(errno, EAGAIN);
  } else {
    EXPECT_GE(left, 0) << "a polled socket keeps the rest in the listen queue";
  }
  const int expect = left >= 0 ? 2 : 3;
  if (left >= 0) ::close(left);
  ASSERT_TRUE(test::run_until([&] { pass(*loop_); }, [&] { return g_accepted >= expect; }));
  EXPECT_EQ(g_accepted, expect);
  int served = 0;
  for (int fd : clients) {
    if (test::read_n(fd, 6, 2000) == "hello\n") ++served;
    ::close(fd);
  }
  EXPECT_EQ(served, expect);
}

TEST_P(UringAccept, LosingTheAcceptMutexLeavesConnectionsToOthers) {
  Taken mutex;
  mutex.free_ = true;
  loop_->set_accept_mutex(&mutex);
  ASSERT_TRUE(loop_->add_listening(ls_));
  pass(*loop_);
  ASSERT_TRUE(loop_->accept_mutex_held());
  int c1 = test::connect_loopback(ls_.port());
  ASSERT_GE(c1, 0);
  ASSERT_TRUE(test::run_until([&] { pass(*loop_); }, [&] { return g_accepted == 1; }));

  mutex.free_ = false;
  pass(*loop_);  // lost: the accept is cancelled
  ASSERT_FALSE(loop_->accept_mutex_held());
  ASSERT_FALSE(ls_.connection->read->active);
  int c2 = test::connect_loopback(ls_.port());
  ASSERT_GE(c2, 0);
  for (int i = 0; i < 5; ++i) pass(*loop_);
  EXPECT_EQ(g_accepted, 1) << "accepted without the mutex";
  // Still in the listen queue: another worker would get it.
  int other = take_from_queue(ls_.fd, 2000);
  EXPECT_GE(other, 0);

  // Holding it again, the next connection is this loop's.
  mutex.free_ = true;
  int c3 = test::connect_loopback(ls_.port());
  ASSERT_GE(c3, 0);
  ASSERT_TRUE(test::run_until([&] { pass(*loop_); }, [&] { return g_accepted == 2; }));
  EXPECT_EQ(test::read_n(c3, 6, 2000), "hello\n");
  for (int fd : {c1, c2, c3, other}) {
    if (fd >= 0) ::close(fd);
  }
}

TEST_P(UringAccept, BusyWorkerSitsOutAndThenAcceptsAgain) {
  Taken mutex;
  mutex.free_ = true;
  loop_->set_accept_mutex(&mutex);
  ASSERT_TRUE(loop_->add_listening(ls_));
  pass(*loop_);
  ASSERT_TRUE(ls_.connection->read->active);
  loop_->accept_disabled = 2;
  pass(*loop_);  // gives the listening socket up
  EXPECT_FALSE(ls_.connection->read->active);
  int client = test::connect_loopback(ls_.port());
  ASSERT_GE(client, 0);
  ASSERT_TRUE(test::readable(ls_.fd, 2000)) << "the connection waits in the listen queue";
  pass(*loop_);  // accept_disabled 1 -> 0
  EXPECT_EQ(g_accepted, 0) << "accepted while sitting out";
  ASSERT_TRUE(test::run_until([&] { pass(*loop_); }, [&] { return g_accepted == 1; }));
  EXPECT_EQ(test::read_n(client, 6, 2000), "hello\n");
  ::close(client);
}

TEST_P(UringAccept, CloseListeningStopsTheKernelAccepting) {
  ASSERT_TRUE(loop_->add_listening(ls_));
  pass(*loop_);
  const int port = ls_.port();
  int elsewhere = ::dup(ls_.fd);  // the master and the other workers keep it open
  ASSERT_GE(elsewhere, 0);
  loop_->close_listening();
  int client = test::connect_loopback(port);
  ASSERT_GE(client, 0);
  for (int i = 0; i < 5; ++i) pass(*loop_);
  EXPECT_EQ(g_accepted, 0);
  int other = take_from_queue(elsewhere, 2000);
  EXPECT_GE(other, 0) << "the closed loop's accept took the connection";
  if (other >= 0) ::close(other);
  ::close(client);
  ::close(elsewhere);
}

TEST_P(UringAccept, ACancelledAcceptLeavesNoConnectionBehind) {
  // Two workers on one listening socket (no reuseport). The kernel's accept
  // polls wait exclusively: a new connection wakes only the first request in
  // the socket's wait queue, here this worker's. It is cancelled (the accept
  // mutex is lost, the worker is busy, or requeue_accepts moves it to the
  // back) before its worker got to run the wake-up: the request ends without
  // accepting, and the other worker's request was never woken for the
  // connection. Someone must still take it.
  std::unique_ptr<EventLoop> other = make_loop();
  ASSERT_NE(other, nullptr);
  Listening shared;  // the same socket, as a second worker holds it
  shared.handler = greet_and_close;
  ASSERT_TRUE(shared.set_address("127.0.0.1:0"));
  shared.fd = ::dup(ls_.fd);
  ASSERT_GE(shared.fd, 0);

  ASSERT_TRUE(loop_->add_listening(ls_));
  pass(*loop_);  // this worker's accept is first in the socket's wait queue
  ASSERT_TRUE(other->add_listening(shared));
  pass(*other);  // the other's behind it
  int client = test::connect_loopback(ls_.port());
  ASSERT_GE(client, 0);  // wakes this worker's request, which has not run yet
  ASSERT_TRUE(loop_->disable_accept_events());
  ASSERT_FALSE(ls_.connection->read->active);
  ASSERT_TRUE(test::run_until(
      [&] {
        pass(*other);
        pass(*loop_);
      },
      [&] { return g_accepted == 1; }, 2000))
      << "the connection was left in the listen queue with no accept woken for it";
  EXPECT_EQ(test::read_n(client, 6, 2000), "hello\n");
  ::close(client);
  other->close_listening();
}

INSTANTIATE_TEST_SUITE_P(Modes, UringAccept, ::testing::Values("multishot", "poll"),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

}  // namespace
}  // namespace vigil
