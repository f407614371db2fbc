// process_events_and_timers runs its stages in the order of seed 001 (算法 1):
// process_events -> posted accept -> release the accept mutex -> expire timers
// -> posted (with posted_next moved in front at the start of the pass).
#include "vigil/event/loop.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"
#include "vigil/core/log.h"
#include "vigil/event/listening.h"

namespace vigil {
namespace {

std::vector<std::string>* g_order = nullptr;

// A lock that is always free: lets one process exercise the accept-mutex path.
class FreeMutex : public ProcessMutex {
 public:
  bool trylock() override { return true; }
  void unlock() override { g_order->push_back("unlock"); }
};

void on_accepted(Connection& c) {
  g_order->push_back("accept");
  c.loop->pool().close_connection(c);
}
void on_timer(Event&) { g_order->push_back("timer"); }
void on_next(Event&) { g_order->push_back("next"); }
void on_read(Event& ev) {
  g_order->push_back("read");
  char buf[16];
  auto& c = *ev.owner<Connection>();
  while (c.recv(c, buf, sizeof buf) > 0) {
  }
}

class LoopOrder : public ::testing::TestWithParam<std::string> {};

TEST_P(LoopOrder, OnePassRunsStagesInSeedOrder) {
  std::vector<std::string> order;
  g_order = &order;
  EventLoopConfig cfg;
  cfg.use = GetParam();
  cfg.connections = 64;
  auto loop_r = EventLoop::create(cfg, Log::global());
  ASSERT_TRUE(loop_r) << loop_r.status().to_string();
  EventLoop& loop = *loop_r.value();
  FreeMutex mutex;
  loop.set_accept_mutex(&mutex);

  Listening ls;
  ASSERT_TRUE(ls.set_address("127.0.0.1:0"));
  ASSERT_TRUE(ls.open());
  ls.handler = on_accepted;
  ASSERT_TRUE(loop.add_listening(ls));

  // A connection with data waiting.
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
  Connection* c = loop.pool().get(sv[0], Log::global());
  ASSERT_NE(c, nullptr);
  c->recv = unix_recv;
  c->read->handler = on_read;
  ASSERT_TRUE(loop.handle_read_event(*c->read));
  ASSERT_EQ(::write(sv[1], "x", 1), 1);

  // A timer already due, and an event deferred to the next pass.
  Event timer_ev;
  timer_ev.handler = on_timer;
  loop.timers().add_at(timer_ev, clock::current_msec() - 1);
  Event next_ev;
  next_ev.handler = on_next;
  loop.posted_next().post(next_ev);

  // A client waiting in the listen queue.
  int client = test::connect_loopback(ls.port());
  ASSERT_GE(client, 0);
  ASSERT_TRUE(test::readable(ls.fd, 2000)) << "the connection waits in the listen queue";

  loop.process_events_and_timers();
  std::vector<std::string> want{"accept", "unlock", "timer", "next", "read"};
  EXPECT_EQ(order, want);
  EXPECT_TRUE(next_ev.ready) << "posted_next events are marked ready when moved";

  loop.pool().close_connection(*c);
  ::close(sv[1]);
  ::close(client);
  g_order = nullptr;
}

TEST_P(LoopOrder, WithoutAcceptMutexHandlersRunInsideTheWait) {
  std::vector<std::string> order;
  g_order = &order;
  EventLoopConfig cfg;
  cfg.use = GetParam();
  cfg.connections = 16;
  auto loop_r = EventLoop::create(cfg, Log::global());
  ASSERT_TRUE(loop_r);
  EventLoop& loop = *loop_r.value();
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
  Connection* c = loop.pool().get(sv[0], Log::global());
  c->recv = unix_recv;
  c->read->handler = on_read;
  ASSERT_TRUE(loop.handle_read_event(*c->read));
  ASSERT_EQ(::write(sv[1], "x", 1), 1);
  Event timer_ev;
  timer_ev.handler = on_timer;
  loop.timers().add_at(timer_ev, clock::current_msec() - 1);
  loop.process_events_and_timers();
  // No accept mutex: nothing is posted, the read handler runs before timers.
  std::vector<std::string> want{"read", "timer"};
  EXPECT_EQ(order, want);
  EXPECT_TRUE(loop.posted().empty());
  loop.pool().close_connection(*c);
  ::close(sv[1]);
  g_order = nullptr;
}

TEST_P(LoopOrder, PostedNextForcesAZeroWait) {
  EventLoopConfig cfg;
  cfg.use = GetParam();
  cfg.connections = 8;
  auto loop_r = EventLoop::create(cfg, Log::global());
  ASSERT_TRUE(loop_r);
  EventLoop& loop = *loop_r.value();
  std::vector<std::string> order;
  g_order = &order;
  Event far;  // a timer far away would make the wait long
  far.handler = on_timer;
  loop.add_timer(far, 10000);
  Event next_ev;
  next_ev.handler = on_next;
  loop.posted_next().post(next_ev);
  auto t0 = std::chrono::steady_clock::now();
  loop.process_events_and_timers();
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(order, std::vector<std::string>{"next"});
  EXPECT_LT(ms, 5000) << "the wait must not block while posted_next events exist";
  loop.del_timer(far);
  g_order = nullptr;
}

// timer_resolution (seed 002, 9.7.2): the wait is unbounded and the cached
// time moves only on the loop's tick, yet timers still expire on schedule.
TEST_P(LoopOrder, TimerResolutionRefreshesTimeFromTheTick) {
  EventLoopConfig cfg;
  cfg.use = GetParam();
  cfg.connections = 8;
  cfg.timer_resolution = 20;
  auto loop_r = EventLoop::create(cfg, Log::global());
  ASSERT_TRUE(loop_r) << loop_r.status().to_string();
  EventLoop& loop = *loop_r.value();
  std::vector<std::string> order;
  g_order = &order;
  Event t;
  t.handler = on_timer;
  Msec start = clock::current_msec();
  loop.add_timer(t, 100);
  int passes = 0;
  ASSERT_TRUE(test::run_until([&] { loop.process_events_and_timers(); ++passes; },
                              [&] { return !order.empty(); }, 3000));
  EXPECT_EQ(order, std::vector<std::string>{"timer"});
  EXPECT_GE(msec_diff(clock::current_msec(), start), 100);
  // The passes were ended by the tick (an event: nothing else is registered),
  // not by a wait sized to the timer; about 100 ms / 20 ms of them, not a
  // spin. (Their number alone is no proof: a thread descheduled past the
  // timer's 100 ms sees one tick and the timer in its first pass.)
  EXPECT_GE(loop.stats().events, 1u);
  EXPECT_LE(passes, 50);
  g_order = nullptr;
}

void count_fire(Event& ev) { ++*static_cast<int*>(ev.data); }

// Two loops with timer_resolution in one process, each on its own thread:
// each loop's tick keeps its own thread's clock moving, and the end of one
// loop leaves the other's tick alone (a process-wide SIGALRM once did not:
// the first loop's destructor stopped the alarm, and the second waited
// forever on a clock that no longer moved).
TEST_P(LoopOrder, TwoLoopsWithTimerResolutionKeepTheirOwnClocks) {
  const std::string use = GetParam();
  std::atomic<bool> first_done{false};
  std::atomic<bool> give_up{false};
  std::atomic<bool> second_done{false};
  std::atomic<EventLoop*> second_loop{nullptr};
  std::mutex loops_mu;  // a loop is notified only while it exists
  int second_fired = 0;
  MsecDiff second_elapsed = 0;

  auto make = [&use] {
    EventLoopConfig cfg;
    cfg.use = use;
    cfg.connections = 8;
    cfg.timer_resolution = 10;
    return EventLoop::create(cfg, Log::global());
  };
  std::thread second([&] {
    auto r = make();
    if (!r) {
      second_done = true;
      return;
    }
    EventLoop& loop = *r.value();
    second_loop = &loop;
    while (!first_done) std::this_thread::yield();
    Event t;
    t.handler = count_fire;
    t.data = &second_fired;
    const Msec start = clock::current_msec();
    loop.add_timer(t, 100);
    while (second_fired == 0 && !give_up) loop.process_events_and_timers();
    second_elapsed = msec_diff(clock::current_msec(), start);
    if (t.timer_set) loop.del_timer(t);
    std::lock_guard<std::mutex> g(loops_mu);
    second_loop = nullptr;
    second_done = true;
  });
  std::atomic<EventLoop*> first_loop{nullptr};
  std::atomic<bool> first_ran{false};
  std::thread first([&] {
    auto r = make();
    if (r) {
      EventLoop& loop = *r.value();
      first_loop = &loop;
      int fired = 0;
      Event t;
      t.handler = count_fire;
      t.data = &fired;
      loop.add_timer(t, 30);
      while (fired == 0 && !give_up) loop.process_events_and_timers();
      first_ran = fired == 1;
      if (t.timer_set) loop.del_timer(t);
      std::lock_guard<std::mutex> g(loops_mu);  // not notified once it is going
      first_loop = nullptr;
    }
    first_done = true;  // its loop is destroyed by now
  });
  // Either loop may wait forever on a clock that does not move: after a
  // bound, wake them (notify is safe from any thread) so each can report.
  if (!test::wait_for([&] { return first_done.load() && second_done.load(); }, 5000)) {
    give_up = true;
    while (!first_done || !second_done) {
      {
        std::lock_guard<std::mutex> g(loops_mu);
        if (EventLoop* l = first_loop.load()) (void)l->backend().notify();
        if (EventLoop* l = second_loop.load()) (void)l->backend().notify();
      }
      std::this_thread::yield();
    }
  }
  first.join();
  second.join();
  EXPECT_TRUE(first_ran) << "the first loop's timer never fired: its clock stopped";
  EXPECT_EQ(second_fired, 1) << "the second loop's timer never fired: its clock stopped";
  EXPECT_GE(second_elapsed, 100);
}

INSTANTIATE_TEST_SUITE_P(Backends, LoopOrder, ::testing::ValuesIn(test::backend_params()),
                         test::backend_param_name);

}  // namespace
}  // namespace vigil

namespace vigil {
namespace {

TEST(LoopContext, DataAndModuleContexts) {
  EventLoopConfig cfg;
  cfg.connections = 8;
  auto loop_r = EventLoop::create(cfg, Log::global());
  ASSERT_TRUE(loop_r) << loop_r.status().to_string();
  EventLoop& loop = *loop_r.value();
  EXPECT_EQ(loop.data(), nullptr);
  int user = 1;
  loop.set_data(&user);
  EXPECT_EQ(loop.data(), &user);

  static const char key_a = 0, key_b = 0;
  int a = 0, b = 0;
  EXPECT_EQ(loop.context(&key_a), nullptr);
  ASSERT_TRUE(loop.set_context(&key_a, &a));
  ASSERT_TRUE(loop.set_context(&key_b, &b));
  EXPECT_EQ(loop.context(&key_a), &a);
  EXPECT_EQ(loop.context(&key_b), &b);
  ASSERT_TRUE(loop.set_context(&key_a, nullptr));
  EXPECT_EQ(loop.context(&key_a), nullptr);
  EXPECT_EQ(loop.context(&key_b), &b);

  // Every slot taken: the next key is refused, an existing one still updates.
  static char keys[EventLoop::kMaxContexts];
  std::size_t taken = 1;  // key_b
  for (auto& k : keys) {
    if (taken == EventLoop::kMaxContexts) {
      EXPECT_FALSE(loop.set_context(&k, &a));
      break;
    }
    ASSERT_TRUE(loop.set_context(&k, &a));
    ++taken;
  }
  EXPECT_TRUE(loop.set_context(&key_b, &a));
  EXPECT_EQ(loop.context(&key_b), &a);
}

TEST(LoopContext, ContextOrMakeMakesOnceAndDropFreesIt) {
  EventLoopConfig cfg;
  cfg.connections = 8;
  auto loop_r = EventLoop::create(cfg, Log::global());
  ASSERT_TRUE(loop_r) << loop_r.status().to_string();
  EventLoop& loop = *loop_r.value();
  struct State {
    int value = 7;
  };
  static const char key = 0;
  State* s = loop.context_or_make<State>(&key);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->value, 7);
  s->value = 8;
  EXPECT_EQ(loop.context_or_make<State>(&key), s) << "made again instead of found";
  EXPECT_EQ(loop.context(&key), s);
  loop.drop_context<State>(&key);
  EXPECT_EQ(loop.context(&key), nullptr);
  loop.drop_context<State>(&key);  // nothing there: no effect

  // Every key taken: nothing is made (and nothing leaks, under ASan).
  static char keys[EventLoop::kMaxContexts];
  int dummy = 0;
  for (auto& k : keys) ASSERT_TRUE(loop.set_context(&k, &dummy));
  EXPECT_EQ(loop.context_or_make<State>(&key), nullptr);
}

}  // namespace
}  // namespace vigil
