// The loop's accept paths that the master/worker model relies on: accepting
// before other handlers with EPOLLEXCLUSIVE, reuseport sockets untouched by
// the accept mutex, a busy worker giving up its listening events
// (accept_disabled), and close_listening() really unregistering a socket that
// stays open elsewhere.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "test_util.h"
#include "vigil/core/log.h"
#include "vigil/event/connection.h"
#include "vigil/event/listening.h"
#include "vigil/event/loop.h"

namespace vigil {
namespace {

std::vector<std::string> g_order;

void note_accept(Connection& c) {
  g_order.push_back("accept");
  c.loop->pool().close_connection(c);
}

void note_read(Event& rev) {
  g_order.push_back("read");
  char buf[64];
  auto& c = *rev.owner<Connection>();
  while (c.recv(c, buf, sizeof buf) > 0) {
  }
}

// One loop pass that returns within 20 ms even when nothing happens (a
// holder of the accept mutex would otherwise wait without a limit).
void pass(EventLoop& loop) {
  static Event tick;
  tick.handler = [](Event&) {};
  loop.add_timer(tick, 20);
  loop.process_events_and_timers();
  loop.del_timer(tick);
}

struct Fixture {
  Fixture() {
    EventLoopConfig cfg;
    cfg.use = "epoll";
    cfg.connections = 16;
    auto r = EventLoop::create(cfg, Log::global());
    EXPECT_TRUE(r) << r.status().to_string();
    loop = std::move(r).value();
    ls.handler = note_accept;
    EXPECT_TRUE(ls.set_address("127.0.0.1:0"));
    EXPECT_TRUE(ls.open());
  }
  std::unique_ptr<EventLoop> loop;
  Listening ls;
};

// A connection whose data arrived first and a new client, ready in the same
// wait: with EPOLLEXCLUSIVE the accept runs first.
TEST(LoopAccept, ExclusiveAcceptsBeforeOtherHandlers) {
  Fixture f;
  if (!(f.loop->capabilities() & kCapExclusive)) GTEST_SKIP() << "no EPOLLEXCLUSIVE";
  f.loop->set_accept_flags(kEvExclusive);
  ASSERT_TRUE(f.loop->add_listening(f.ls));

  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
  Connection* c = f.loop->pool().get(sv[0], Log::global());
  ASSERT_NE(c, nullptr);
  c->recv = unix_recv;
  c->read->handler = note_read;
  ASSERT_TRUE(f.loop->handle_read_event(*c->read));

  ASSERT_EQ(::write(sv[1], "x", 1), 1);  // ready first
  int client = test::connect_loopback(f.ls.port());
  ASSERT_GE(client, 0);
  ASSERT_TRUE(test::readable(f.ls.fd, 2000)) << "the connection waits in the listen queue";
  g_order.clear();
  f.loop->process_events_and_timers();
  ASSERT_EQ(g_order.size(), 2u);
  EXPECT_EQ(g_order[0], "accept");
  EXPECT_EQ(g_order[1], "read");
  f.loop->pool().close_connection(*c);
  ::close(sv[1]);
  ::close(client);
}

class AlwaysTaken : public ProcessMutex {
 public:
  bool trylock() override { return free_; }
  void unlock() override {}
  bool free_ = false;
};

// With the accept mutex a shared socket is registered only by the holder; a
// reuseport one (this worker's own) always.
TEST(LoopAccept, AcceptMutexLeavesReuseportSocketsRegistered) {
  Fixture f;
  Listening own;
  own.handler = note_accept;
  own.reuseport = true;
  ASSERT_TRUE(own.set_address("127.0.0.1:0"));
  ASSERT_TRUE(own.open());
  AlwaysTaken mutex;
  f.loop->set_accept_mutex(&mutex);
  ASSERT_TRUE(f.loop->add_listening(f.ls));
  ASSERT_TRUE(f.loop->add_listening(own));
  EXPECT_FALSE(f.ls.connection->read->active);
  EXPECT_TRUE(own.connection->read->active);

  mutex.free_ = true;
  pass(*f.loop);
  EXPECT_TRUE(f.loop->accept_mutex_held());
  EXPECT_TRUE(f.ls.connection->read->active);
  mutex.free_ = false;
  pass(*f.loop);  // lost it: the shared socket goes, ours stays
  EXPECT_FALSE(f.loop->accept_mutex_held());
  EXPECT_FALSE(f.ls.connection->read->active);
  EXPECT_TRUE(own.connection->read->active);
}

// Seed 002 9.8.3: a worker with accept_disabled > 0 handles no new
// connections, even if it held the mutex on the previous pass.
TEST(LoopAccept, BusyWorkerGivesUpItsListeningEvents) {
  Fixture f;
  AlwaysTaken mutex;
  mutex.free_ = true;
  f.loop->set_accept_mutex(&mutex);
  ASSERT_TRUE(f.loop->add_listening(f.ls));
  pass(*f.loop);
  ASSERT_TRUE(f.ls.connection->read->active);

  f.loop->accept_disabled = 2;
  int client = test::connect_loopback(f.ls.port());
  ASSERT_GE(client, 0);
  ASSERT_TRUE(test::readable(f.ls.fd, 2000)) << "the connection waits in the listen queue";
  g_order.clear();
  pass(*f.loop);
  EXPECT_FALSE(f.ls.connection->read->active);
  EXPECT_TRUE(g_order.empty()) << "accepted while sitting out";
  pass(*f.loop);  // accept_disabled 1 -> 0
  pass(*f.loop);  // trylock again: listening, accepting
  EXPECT_EQ(g_order, std::vector<std::string>{"accept"});
  ::close(client);
}

// After close_listening() the socket, still open in another process (here a
// dup), no longer wakes this loop.
TEST(LoopAccept, CloseListeningUnregistersASocketOpenElsewhere) {
  Fixture f;
  ASSERT_TRUE(f.loop->add_listening(f.ls));
  int port = f.ls.port();
  int elsewhere = ::dup(f.ls.fd);
  ASSERT_GE(elsewhere, 0);
  f.loop->close_listening();
  EXPECT_TRUE(f.loop->listening().empty());
  EXPECT_EQ(f.ls.fd, -1);
  int client = test::connect_loopback(port);  // queued on the socket `elsewhere` keeps
  ASSERT_GE(client, 0);
  g_order.clear();
  f.loop->stats().iterations = 0;
  std::uint64_t events_before = f.loop->stats().events;
  Event stop;
  stop.data = f.loop.get();
  stop.handler = [](Event& ev) { static_cast<EventLoop*>(ev.data)->stop(); };
  f.loop->add_timer(stop, 100);
  f.loop->run();
  EXPECT_EQ(f.loop->stats().events, events_before) << "woken by a socket it closed";
  EXPECT_TRUE(g_order.empty());
  ::close(client);
  ::close(elsewhere);
}

}  // namespace
}  // namespace vigil
