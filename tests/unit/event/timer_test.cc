// Tests for src/event/timer.cc: a randomized model check against std::multimap
// plus the edge cases the event loop relies on (wrap-around, lazy re-arm,
// cancelable accounting, handlers that change the tree while it expires).

#include "vigil/event/timer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <random>
#include <vector>

namespace vigil {
namespace {

// Handlers append the event they ran for; tests read it back.
std::vector<Event*>* g_fired = nullptr;

void record(Event& ev) {
  g_fired->push_back(&ev);
}

class TimerTest : public ::testing::Test {
 protected:
  void SetUp() override { g_fired = &fired_; }
  // No invariant check here: the tests' events are gone by now, and the tree
  // may still point at them. Each test checks before its events go away.
  void TearDown() override { g_fired = nullptr; }

  // A fresh pool of events whose handler records them.
  std::vector<Event> make_events(std::size_t n) {
    std::vector<Event> evs(n);
    for (auto& ev : evs) ev.handler = record;
    return evs;
  }

  TimerTree tree_;
  std::vector<Event*> fired_;
};

// ---- basics --------------------------------------------------------------------

TEST_F(TimerTest, EmptyTree) {
  EXPECT_TRUE(tree_.empty());
  EXPECT_EQ(tree_.size(), 0u);
  EXPECT_EQ(tree_.nearest(), nullptr);
  EXPECT_EQ(tree_.find(12345), kTimerInfinite);
  EXPECT_EQ(tree_.expire(~Msec{0}), 0u);
  EXPECT_TRUE(tree_.no_timers_left());
  EXPECT_TRUE(tree_.check_invariants());
  EXPECT_TRUE(tree_.check_invariants());
}

TEST_F(TimerTest, DelOfUnarmedEventIsNoop) {
  auto evs = make_events(2);
  tree_.add(evs[0], 10, 0);
  tree_.del(evs[1]);
  EXPECT_EQ(tree_.size(), 1u);
  EXPECT_EQ(tree_.nearest(), &evs[0]);
  tree_.del(evs[0]);
  tree_.del(evs[0]);
  EXPECT_EQ(tree_.size(), 0u);
  EXPECT_FALSE(evs[0].timer_set);
  EXPECT_TRUE(tree_.check_invariants());
}

TEST_F(TimerTest, FindReportsTimeLeft) {
  auto evs = make_events(2);
  const Msec now = 1000;
  tree_.add(evs[0], 250, now);
  tree_.add(evs[1], 100, now);
  EXPECT_EQ(tree_.find(now), 100u);
  EXPECT_EQ(tree_.find(now + 99), 1u);
  EXPECT_EQ(tree_.find(now + 100), 0u);
  EXPECT_EQ(tree_.find(now + 5000), 0u);  // overdue is still "now"
  tree_.del(evs[1]);
  EXPECT_EQ(tree_.find(now), 250u);
  tree_.del(evs[0]);
  EXPECT_EQ(tree_.find(now), kTimerInfinite);
  EXPECT_TRUE(tree_.check_invariants());
}

TEST_F(TimerTest, ExpireFiresDueTimersInDeadlineOrder) {
  auto evs = make_events(5);
  const Msec delays[] = {50, 10, 40, 20, 30};
  for (int i = 0; i < 5; ++i) tree_.add(evs[i], delays[i], 0);

  EXPECT_EQ(tree_.expire(25), 2u);
  ASSERT_EQ(fired_.size(), 2u);
  EXPECT_EQ(fired_[0], &evs[1]);
  EXPECT_EQ(fired_[1], &evs[3]);
  EXPECT_TRUE(evs[1].timedout);
  EXPECT_FALSE(evs[1].timer_set);
  EXPECT_FALSE(evs[2].timedout);
  EXPECT_TRUE(evs[2].timer_set);
  EXPECT_EQ(tree_.size(), 3u);

  EXPECT_EQ(tree_.expire(29), 0u);
  EXPECT_EQ(tree_.expire(30), 1u);  // a deadline equal to now is due
  EXPECT_EQ(fired_.back(), &evs[4]);
  EXPECT_EQ(tree_.expire(1000), 2u);
  EXPECT_EQ(fired_[3], &evs[2]);
  EXPECT_EQ(fired_[4], &evs[0]);
  EXPECT_TRUE(tree_.empty());
  EXPECT_TRUE(tree_.check_invariants());
}

TEST_F(TimerTest, EqualDeadlinesFireInArmingOrder) {
  auto evs = make_events(64);
  for (auto& ev : evs) tree_.add_at(ev, 500);
  // Re-arming moves a timer behind the others with the same deadline.
  tree_.add_at(evs[0], 500);
  tree_.add_at(evs[10], 500);
  ASSERT_TRUE(tree_.check_invariants());

  std::vector<Event*> want;
  for (std::size_t i = 1; i < evs.size(); ++i) {
    if (i != 10) want.push_back(&evs[i]);
  }
  want.push_back(&evs[0]);
  want.push_back(&evs[10]);
  EXPECT_EQ(tree_.nearest(), &evs[1]);
  EXPECT_EQ(tree_.expire(500), evs.size());
  EXPECT_EQ(fired_, want);
  EXPECT_TRUE(tree_.check_invariants());
}

// ---- wrap-around ------------------------------------------------------------------

TEST_F(TimerTest, DeadlinesStraddlingTheWrapFireInOrder) {
  auto evs = make_events(6);
  const Msec now = ~Msec{0} - 49;  // 2^64 - 50: the counter wraps 50 ms from now
  const Msec delays[] = {200, 10, 60, 49, 50, 100};
  for (int i = 0; i < 6; ++i) tree_.add(evs[i], delays[i], now);
  ASSERT_TRUE(tree_.check_invariants());

  // Plain < would put the wrapped keys (60, 100, 200, 50 -> small numbers)
  // first; the earliest is 10 ms away.
  EXPECT_EQ(tree_.nearest(), &evs[1]);
  EXPECT_EQ(tree_.find(now), 10u);

  EXPECT_EQ(tree_.expire(now + 49), 2u);  // still before the wrap: 10, 49
  EXPECT_EQ(tree_.find(now + 49), 1u);    // 50 is the key 0
  EXPECT_EQ(tree_.expire(now + 50), 1u);  // now == 0 after the wrap
  EXPECT_EQ(tree_.find(now + 50), 10u);
  EXPECT_EQ(tree_.expire(now + 1000), 3u);
  const std::vector<Event*> want = {&evs[1], &evs[3], &evs[4], &evs[2], &evs[5], &evs[0]};
  EXPECT_EQ(fired_, want);
  EXPECT_TRUE(tree_.check_invariants());
}

TEST_F(TimerTest, OverdueTimerAcrossTheWrapIsDue) {
  auto evs = make_events(1);
  tree_.add_at(evs[0], ~Msec{0} - 5);  // deadline before the wrap
  EXPECT_EQ(tree_.find(3), 0u);        // now is after the wrap
  EXPECT_EQ(tree_.expire(3), 1u);
  EXPECT_TRUE(tree_.check_invariants());
}

// ---- lazy re-arm --------------------------------------------------------------------

TEST_F(TimerTest, LazyReArmLeavesSmallMovesAlone) {
  auto evs = make_events(2);
  const Msec now = 10'000;
  tree_.add(evs[0], 1000, now);  // key 11000

  tree_.add(evs[0], 1000, now + 299);  // +299 ms: stays
  EXPECT_EQ(evs[0].timer.key, now + 1000);
  tree_.add(evs[0], 701, now);  // -299 ms: stays
  EXPECT_EQ(evs[0].timer.key, now + 1000);
  EXPECT_EQ(tree_.size(), 1u);

  tree_.add(evs[0], 1000, now + 300);  // +300 ms: moves
  EXPECT_EQ(evs[0].timer.key, now + 1300);
  tree_.add(evs[0], 1000, now);  // -300 ms: moves
  EXPECT_EQ(evs[0].timer.key, now + 1000);
  EXPECT_EQ(tree_.size(), 1u);

  // A small move does not change its place among other timers either.
  tree_.add(evs[1], 1100, now);  // key 11100
  tree_.add(evs[0], 1250, now);  // would be 11250, stays at 11000
  EXPECT_EQ(tree_.nearest(), &evs[0]);
  tree_.add(evs[0], 1400, now);  // 11400: moves behind evs[1]
  EXPECT_EQ(tree_.nearest(), &evs[1]);
  EXPECT_TRUE(tree_.check_invariants());
}

TEST_F(TimerTest, LazyReArmAcrossTheWrap) {
  auto evs = make_events(1);
  const Msec now = ~Msec{0} - 100;
  tree_.add(evs[0], 50, now);        // before the wrap
  tree_.add(evs[0], 50 + 250, now);  // after the wrap, 250 ms later: stays
  EXPECT_EQ(evs[0].timer.key, now + 50);
  tree_.add(evs[0], 50 + 300, now);  // 300 ms later: moves
  EXPECT_EQ(evs[0].timer.key, now + 350);
  EXPECT_TRUE(tree_.check_invariants());
}

TEST_F(TimerTest, AddAtIsNeverLazy) {
  auto evs = make_events(1);
  tree_.add_at(evs[0], 1000);
  tree_.add_at(evs[0], 1001);
  EXPECT_EQ(evs[0].timer.key, 1001u);
  EXPECT_EQ(tree_.size(), 1u);
  EXPECT_TRUE(tree_.check_invariants());
}

// ---- cancelable accounting ------------------------------------------------------------

TEST_F(TimerTest, CancelableAccounting) {
  auto evs = make_events(4);
  evs[0].cancelable = 1;
  evs[1].cancelable = 1;
  tree_.add(evs[0], 100, 0);
  tree_.add(evs[1], 200, 0);
  EXPECT_TRUE(tree_.no_timers_left());  // only cancelable timers armed

  tree_.add(evs[2], 300, 0);
  tree_.add(evs[3], 50, 0);
  EXPECT_FALSE(tree_.no_timers_left());
  tree_.del(evs[2]);  // del of a non-cancelable timer
  EXPECT_FALSE(tree_.no_timers_left());
  tree_.del(evs[0]);  // del of a cancelable timer changes nothing
  EXPECT_FALSE(tree_.no_timers_left());
  EXPECT_EQ(tree_.expire(60), 1u);  // evs[3] (non-cancelable) fires
  EXPECT_TRUE(tree_.no_timers_left());
  EXPECT_EQ(tree_.expire(1000), 1u);  // evs[1] (cancelable) fires
  EXPECT_TRUE(tree_.no_timers_left());
  EXPECT_TRUE(tree_.empty());
  EXPECT_TRUE(tree_.check_invariants());
}

TEST_F(TimerTest, CancelableIsTakenWhenArmed) {
  auto evs = make_events(1);
  tree_.add(evs[0], 1000, 0);  // non-cancelable
  evs[0].cancelable = 1;       // flipped while armed: the timer still counts
  EXPECT_FALSE(tree_.no_timers_left());
  EXPECT_TRUE(tree_.check_invariants());
  tree_.del(evs[0]);
  EXPECT_TRUE(tree_.no_timers_left());

  tree_.add(evs[0], 1000, 0);  // cancelable now
  EXPECT_TRUE(tree_.no_timers_left());
  evs[0].cancelable = 0;
  tree_.add(evs[0], 1001, 0);  // lazy re-arm still takes the new flag
  EXPECT_EQ(evs[0].timer.key, 1000u);
  EXPECT_FALSE(tree_.no_timers_left());
  EXPECT_EQ(tree_.expire(1000), 1u);
  EXPECT_TRUE(tree_.no_timers_left());
  EXPECT_TRUE(tree_.check_invariants());
}

// ---- handlers that change the tree -------------------------------------------------

struct Periodic {
  TimerTree* tree;
  Msec now;
  Msec period;
  int runs = 0;
};

void rearm_self(Event& ev) {
  auto* p = ev.owner<Periodic>();
  ++p->runs;
  p->tree->add(ev, p->period, p->now);
}

TEST_F(TimerTest, HandlerReArmsItself) {
  Periodic p{&tree_, 1000, 100};
  Event ev;
  ev.handler = rearm_self;
  ev.data = &p;
  auto others = make_events(3);
  tree_.add(others[0], 0, p.now);
  tree_.add(ev, 0, p.now);
  tree_.add(others[1], 0, p.now);
  tree_.add(others[2], 50, p.now);

  EXPECT_EQ(tree_.expire(p.now), 3u);
  EXPECT_EQ(p.runs, 1);
  EXPECT_TRUE(ev.timer_set);
  EXPECT_EQ(ev.timer.key, p.now + 100);
  EXPECT_EQ(tree_.size(), 2u);
  ASSERT_TRUE(tree_.check_invariants());

  p.now += 100;
  EXPECT_EQ(tree_.expire(p.now), 2u);  // others[2] then ev again
  EXPECT_EQ(p.runs, 2);
  EXPECT_EQ(ev.timer.key, p.now + 100);
  EXPECT_TRUE(tree_.check_invariants());
}

TEST_F(TimerTest, HandlerReArmingAtZeroDelayDoesNotSpin) {
  Periodic p{&tree_, 1000, 0};
  Event ev;
  ev.handler = rearm_self;
  ev.data = &p;
  tree_.add(ev, 0, p.now);
  EXPECT_EQ(tree_.expire(p.now), 1u);
  EXPECT_EQ(p.runs, 1);
  EXPECT_TRUE(ev.timer_set);
  EXPECT_EQ(tree_.find(p.now), 0u);  // due again: the next pass fires it
  EXPECT_EQ(tree_.expire(p.now), 1u);
  EXPECT_EQ(p.runs, 2);
  EXPECT_TRUE(tree_.check_invariants());
}

struct Killer {
  TimerTree* tree;
  Event* victim;
};

void delete_victim(Event& ev) {
  auto* k = ev.owner<Killer>();
  g_fired->push_back(&ev);
  k->tree->del(*k->victim);
}

TEST_F(TimerTest, HandlerDeletesAnotherPendingTimer) {
  auto evs = make_events(4);
  Event killer;
  Killer k{&tree_, &evs[1]};
  killer.handler = delete_victim;
  killer.data = &k;
  tree_.add(evs[0], 5, 0);
  tree_.add(killer, 10, 0);
  tree_.add(evs[1], 20, 0);  // due in the same expire, but deleted first
  tree_.add(evs[2], 30, 0);
  tree_.add(evs[3], 500, 0);

  EXPECT_EQ(tree_.expire(100), 3u);
  const std::vector<Event*> want = {&evs[0], &killer, &evs[2]};
  EXPECT_EQ(fired_, want);
  EXPECT_FALSE(evs[1].timer_set);
  EXPECT_FALSE(evs[1].timedout);
  EXPECT_EQ(tree_.size(), 1u);
  EXPECT_EQ(tree_.nearest(), &evs[3]);
  EXPECT_TRUE(tree_.check_invariants());
}

// ---- randomized model check -----------------------------------------------------------

// The reference: a multimap keyed by the deadline's distance from a fixed
// origin (so plain < is the right order) that keeps equal keys in insertion
// order, as std::multimap::insert promises.
class Model {
 public:
  using Map = std::multimap<Msec, std::size_t>;

  Model(std::size_t n, Msec origin) : origin_(origin), where_(n), armed_(n), cancelable_(n) {}

  void arm(std::size_t id, Msec key, bool cancelable) {
    disarm(id);
    where_[id] = map_.insert({key - origin_, id});
    armed_[id] = true;
    cancelable_[id] = cancelable;
  }
  void add(std::size_t id, Msec delay, Msec now, bool cancelable) {
    const Msec key = now + delay;
    if (armed_[id]) {
      const MsecDiff d = msec_diff(key, where_[id]->first + origin_);
      if (d > -300 && d < 300) {
        cancelable_[id] = cancelable;
        return;
      }
    }
    arm(id, key, cancelable);
  }
  void disarm(std::size_t id) {
    if (!armed_[id]) return;
    map_.erase(where_[id]);
    armed_[id] = false;
  }
  std::vector<std::size_t> expire(Msec now) {
    std::vector<std::size_t> out;
    while (!map_.empty() && map_.begin()->first <= now - origin_) {
      const std::size_t id = map_.begin()->second;
      out.push_back(id);
      disarm(id);
    }
    return out;
  }
  std::size_t size() const { return map_.size(); }
  bool armed(std::size_t id) const { return armed_[id]; }
  long nearest() const { return map_.empty() ? -1 : static_cast<long>(map_.begin()->second); }
  Msec find(Msec now) const {
    if (map_.empty()) return kTimerInfinite;
    const MsecDiff d = msec_diff(map_.begin()->first + origin_, now);
    return d > 0 ? static_cast<Msec>(d) : 0;
  }
  bool no_timers_left() const {
    for (const auto& [key, id] : map_) {
      if (!cancelable_[id]) return false;
    }
    return true;
  }

 private:
  Msec origin_;
  Map map_;
  std::vector<Map::iterator> where_;
  std::vector<bool> armed_;
  std::vector<bool> cancelable_;
};

TEST_F(TimerTest, RandomizedAgainstMultimap) {
  std::mt19937_64 rng(0x5eed'7113'2026ULL);
  auto pick = [&](std::uint64_t n) {
    return std::uniform_int_distribution<std::uint64_t>(0, n - 1)(rng);
  };

  constexpr int kSequences = 2000;
  std::size_t total_fired = 0;
  for (int seq = 0; seq < kSequences; ++seq) {
    const std::size_t n_events = 1 + pick(seq % 4 == 0 ? 400 : 40);
    const int steps = 50 + static_cast<int>(pick(250));
    // Every fourth sequence starts just before the counter wraps.
    Msec now = seq % 4 == 1 ? ~Msec{0} - pick(20'000) : pick(Msec{1} << 62);
    // Delays make lazy re-arms likely: a few distinct values, some close.
    const Msec max_delay = 1 + pick(5000);

    TimerTree tree;
    std::vector<Event> evs = make_events(n_events);
    Model model(n_events, now - (Msec{1} << 32));

    for (int step = 0; step < steps; ++step) {
      const std::size_t id = pick(n_events);
      Event& ev = evs[id];
      const auto op = pick(100);
      if (op < 40) {
        ev.cancelable = pick(3) == 0;
        const Msec delay = pick(max_delay);
        tree.add(ev, delay, now);
        model.add(id, delay, now, ev.cancelable);
      } else if (op < 55) {
        ev.cancelable = pick(3) == 0;
        const Msec key = now - 500 + pick(max_delay + 500);  // may be overdue
        tree.add_at(ev, key);
        model.arm(id, key, ev.cancelable);
      } else if (op < 75) {
        tree.del(ev);
        model.disarm(id);
      } else if (op < 80) {
        ev.cancelable = pick(2);  // flipping the flag while armed must not matter
      } else {
        now += pick(op < 95 ? 300 : 3000);
        fired_.clear();
        const std::size_t fired = tree.expire(now);
        const std::vector<std::size_t> want = model.expire(now);
        ASSERT_EQ(fired, want.size()) << "seq " << seq << " step " << step;
        ASSERT_EQ(fired_.size(), want.size());
        for (std::size_t i = 0; i < want.size(); ++i) {
          ASSERT_EQ(fired_[i], &evs[want[i]]) << "seq " << seq << " step " << step << " #" << i;
          ASSERT_TRUE(fired_[i]->timedout);
          ASSERT_FALSE(fired_[i]->timer_set);
          fired_[i]->timedout = 0;
        }
        total_fired += fired;
      }

      ASSERT_EQ(tree.size(), model.size()) << "seq " << seq << " step " << step;
      ASSERT_EQ(ev.timer_set != 0, model.armed(id));
      const long want_nearest = model.nearest();
      ASSERT_EQ(tree.nearest(), want_nearest < 0 ? nullptr : &evs[want_nearest]);
      ASSERT_EQ(tree.find(now), model.find(now));
      ASSERT_EQ(tree.no_timers_left(), model.no_timers_left());
      if (step % 16 == 0) {
        ASSERT_TRUE(tree.check_invariants()) << "seq " << seq << " step " << step;
      }
    }
    ASSERT_TRUE(tree.check_invariants()) << "seq " << seq;

    // Drain: everything left fires in model order.
    now += Msec{1} << 40;
    fired_.clear();
    const std::vector<std::size_t> want = model.expire(now);
    ASSERT_EQ(tree.expire(now), want.size());
    for (std::size_t i = 0; i < want.size(); ++i) ASSERT_EQ(fired_[i], &evs[want[i]]);
    ASSERT_TRUE(tree.empty());
    ASSERT_TRUE(tree.check_invariants());
  }
  // The sequences must actually exercise expire, not just arm and disarm.
  EXPECT_GT(total_fired, 50'000u);
}

// Large trees, built and torn down in the orders that stress rebalancing.
TEST_F(TimerTest, MonotonicAndReverseBulkLoads) {
  auto evs = make_events(5000);
  for (std::size_t i = 0; i < evs.size(); ++i) tree_.add_at(evs[i], 1000 + i);  // rightmost inserts
  ASSERT_TRUE(tree_.check_invariants());
  for (std::size_t i = 0; i < evs.size(); i += 2) tree_.del(evs[i]);
  ASSERT_TRUE(tree_.check_invariants());
  for (std::size_t i = 0; i < evs.size(); ++i) {
    tree_.add_at(evs[i], 100'000 - i);  // every insert is a new minimum
  }
  ASSERT_TRUE(tree_.check_invariants());
  EXPECT_EQ(tree_.nearest(), &evs.back());
  EXPECT_EQ(tree_.expire(200'000), evs.size());
  for (std::size_t i = 0; i < evs.size(); ++i) ASSERT_EQ(fired_[i], &evs[evs.size() - 1 - i]);
  EXPECT_TRUE(tree_.check_invariants());
}

}  // namespace
}  // namespace vigil
