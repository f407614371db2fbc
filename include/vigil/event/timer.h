#pragma once
// Timers (seed 001 算法 2): an intrusive red-black tree of events keyed by the
// absolute deadline in clock::current_msec() milliseconds, compared wrap-safely.
// The leftmost node is cached, so the nearest deadline is O(1); so is the
// rightmost, so arming the latest deadline so far needs no descent.

#include <cstddef>

#include "vigil/event/event.h"

namespace vigil {

class TimerTree {
 public:
  // nginx's NGX_TIMER_LAZY_DELAY: re-arming a timer whose new deadline is
  // within this many ms of the old one leaves it in place, so a keep-alive
  // connection does not reinsert its timer on every request.
  static constexpr Msec kLazyDelay = 300;

  TimerTree() = default;
  TimerTree(const TimerTree&) = delete;
  TimerTree& operator=(const TimerTree&) = delete;

  // Arms ev to fire `delay` ms after `now` (see kLazyDelay). Sets ev.timer_set.
  void add(Event& ev, Msec delay, Msec now);
  // Arms ev at the absolute deadline `key` (no lazy logic).
  void add_at(Event& ev, Msec key);
  // Disarms ev if it is armed. Clears ev.timer_set.
  void del(Event& ev);

  // ms until the nearest deadline (0 when one is due), kTimerInfinite when empty.
  Msec find(Msec now) const;
  // Fires every timer with deadline <= now, nearest first: removes it, clears
  // timer_set, sets timedout, calls the handler. Returns how many fired.
  std::size_t expire(Msec now);

  Event* nearest() const;  // nullptr when empty
  bool empty() const { return size_ == 0; }
  std::size_t size() const { return size_; }
  // True when every armed timer is cancelable (graceful shutdown may finish).
  bool no_timers_left() const { return non_cancelable_ == 0; }

  // Verifies the red-black invariants and the cached minimum (for tests).
  bool check_invariants() const;

 private:
  void insert_node(TimerNode* n);
  void erase_node(TimerNode* n);
  void rotate_left(TimerNode* x);
  void rotate_right(TimerNode* x);

  TimerNode* root_ = nullptr;
  TimerNode* min_ = nullptr;
  // The rightmost node: most timers are "now + a configured timeout", the
  // latest deadline so far, and attach here without a descent.
  TimerNode* max_ = nullptr;
  std::size_t size_ = 0;
  std::size_t non_cancelable_ = 0;
};

}  // namespace vigil
