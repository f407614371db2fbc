// Timers (seed 001 算法 2): an intrusive red-black tree keyed by the absolute
// deadline. Differences from nginx's ngx_rbtree: null leaves instead of a
// sentinel (the node type is shared with code that never sees the tree), the
// leftmost node is cached so find()/nearest() do not walk, the rightmost so
// the usual "now + timeout" deadline attaches without a descent, and keys are
// compared only through msec_diff() so the tree keeps working when the
// millisecond counter wraps.

#include "vigil/event/timer.h"

#include <cassert>
#include <limits>

namespace vigil {

namespace {

// a sorts strictly before b. Every key in the tree lies within 2^63 ms of
// every other one, so the signed difference orders them even across a wrap.
inline bool earlier(Msec a, Msec b) {
  return msec_diff(a, b) < 0;
}

inline bool is_red(const TimerNode* n) {
  return n != nullptr && n->red;
}

// Walks the tree for check_invariants(); returns the black height of `n`, or
// -1 when a property is broken below it. `prev` and `count` carry the in-order
// position across calls.
int check_subtree(const TimerNode* n, const TimerNode* parent, Msec base, const TimerNode*& prev,
                  std::size_t& count, std::size_t& non_cancelable) {
  if (n == nullptr) return 1;
  if (n->parent != parent) return -1;
  if (n->red && (is_red(n->left) || is_red(n->right))) return -1;
  const int lh = check_subtree(n->left, n, base, prev, count, non_cancelable);
  if (lh < 0) return -1;

  // In-order keys, measured from the minimum, must not decrease and must stay
  // in the half of the number circle the signed comparison can order.
  const Msec off = n->key - base;
  if (off > static_cast<Msec>(std::numeric_limits<MsecDiff>::max())) return -1;
  if (prev != nullptr && off < prev->key - base) return -1;
  prev = n;
  ++count;
  if (!n->cancelable) ++non_cancelable;
  if (!Event::from_timer(const_cast<TimerNode*>(n))->timer_set) return -1;

  const int rh = check_subtree(n->right, n, base, prev, count, non_cancelable);
  if (rh < 0 || rh != lh) return -1;
  return lh + (n->red ? 0 : 1);
}

}  // namespace

void TimerTree::add(Event& ev, Msec delay, Msec now) {
  const Msec key = now + delay;
  if (ev.timer_set) {
    // nginx's lazy re-arm: a deadline that moves by less than kLazyDelay is
    // left where it is, so a busy keep-alive connection does not churn the tree.
    const MsecDiff diff = msec_diff(key, ev.timer.key);
    constexpr auto kLazy = static_cast<MsecDiff>(kLazyDelay);
    if (diff > -kLazy && diff < kLazy) {
      // Still counts as re-arming for the cancelable snapshot.
      const bool cancelable = ev.cancelable;
      if (cancelable != ev.timer.cancelable) {
        ev.timer.cancelable = cancelable;
        if (cancelable) {
          --non_cancelable_;
        } else {
          ++non_cancelable_;
        }
      }
      return;
    }
    del(ev);
  }
  add_at(ev, key);
}

void TimerTree::add_at(Event& ev, Msec key) {
  if (ev.timer_set) del(ev);
  ev.timer.key = key;
  ev.timer.cancelable = ev.cancelable;
  if (!ev.timer.cancelable) ++non_cancelable_;
  insert_node(&ev.timer);
  ev.timer_set = 1;
}

void TimerTree::del(Event& ev) {
  if (!ev.timer_set) return;
  erase_node(&ev.timer);
  ev.timer_set = 0;
  if (!ev.timer.cancelable) --non_cancelable_;
}

Msec TimerTree::find(Msec now) const {
  if (min_ == nullptr) return kTimerInfinite;
  const MsecDiff left = msec_diff(min_->key, now);
  return left > 0 ? static_cast<Msec>(left) : 0;
}

Event* TimerTree::nearest() const {
  return min_ == nullptr ? nullptr : Event::from_timer(min_);
}

std::size_t TimerTree::expire(Msec now) {
  // A handler may arm, re-arm or delete any timer, itself included, so the
  // minimum is re-read after every call. The budget (the number armed on
  // entry) bounds the call: a handler that keeps re-arming itself at a
  // deadline that is already due fires again in the next call instead of
  // spinning here forever (nginx would spin).
  std::size_t budget = size_;
  std::size_t fired = 0;
  while (budget != 0 && min_ != nullptr && msec_diff(min_->key, now) <= 0) {
    --budget;
    TimerNode* n = min_;
    Event* ev = Event::from_timer(n);
    erase_node(n);
    ev->timer_set = 0;
    if (!n->cancelable) --non_cancelable_;
    ev->timedout = 1;
    ++fired;
    ev->handler(*ev);
  }
  return fired;
}

void TimerTree::rotate_left(TimerNode* x) {
  TimerNode* y = x->right;
  x->right = y->left;
  if (y->left != nullptr) y->left->parent = x;
  TimerNode* p = x->parent;
  y->parent = p;
  if (p == nullptr) {
    root_ = y;
  } else if (p->left == x) {
    p->left = y;
  } else {
    p->right = y;
  }
  y->left = x;
  x->parent = y;
}

void TimerTree::rotate_right(TimerNode* x) {
  TimerNode* y = x->left;
  x->left = y->right;
  if (y->right != nullptr) y->right->parent = x;
  TimerNode* p = x->parent;
  y->parent = p;
  if (p == nullptr) {
    root_ = y;
  } else if (p->right == x) {
    p->right = y;
  } else {
    p->left = y;
  }
  y->right = x;
  x->parent = y;
}

void TimerTree::insert_node(TimerNode* n) {
  n->left = nullptr;
  n->right = nullptr;
  n->red = true;
  ++size_;

  TimerNode* parent;
  if (min_ == nullptr) {
    n->parent = nullptr;
    n->red = false;
    root_ = min_ = max_ = n;
    return;
  }
  const Msec key = n->key;
  if (!earlier(key, max_->key)) {
    // The common case in a server (now + a fixed timeout): the latest deadline
    // so far hangs off the cached maximum, which has no right child. Equal
    // keys land here too, behind the timers already armed for that deadline.
    parent = max_;
    parent->right = n;
    max_ = n;
  } else if (earlier(key, min_->key)) {
    // Likewise a new earliest deadline hangs off the cached minimum.
    parent = min_;
    parent->left = n;
    min_ = n;
  } else {
    // Equal keys go right, so equal deadlines fire in the order they were armed.
    // Random deadlines make the direction a coin toss, so the step is written
    // to compile to a conditional move rather than a mispredicted branch.
    TimerNode* cur = root_;
    bool right;
    do {
      parent = cur;
      right = !earlier(key, cur->key);
      cur = right ? cur->right : cur->left;
    } while (cur != nullptr);
    if (right) {
      parent->right = n;
    } else {
      parent->left = n;
    }
  }
  n->parent = parent;

  // Rebalance: only a red parent breaks the red-black rules.
  while (parent->red) {
    TimerNode* grand = parent->parent;  // exists: the root is black
    if (parent == grand->left) {
      TimerNode* uncle = grand->right;
      if (is_red(uncle)) {
        parent->red = false;
        uncle->red = false;
        grand->red = true;
        n = grand;
        parent = n->parent;
        if (parent == nullptr) break;
        continue;
      }
      if (n == parent->right) {
        rotate_left(parent);
        n = parent;
        parent = n->parent;
      }
      parent->red = false;
      grand->red = true;
      rotate_right(grand);
    } else {
      TimerNode* uncle = grand->left;
      if (is_red(uncle)) {
        parent->red = false;
        uncle->red = false;
        grand->red = true;
        n = grand;
        parent = n->parent;
        if (parent == nullptr) break;
        continue;
      }
      if (n == parent->left) {
        rotate_right(parent);
        n = parent;
        parent = n->parent;
      }
      parent->red = false;
      grand->red = true;
      rotate_left(grand);
    }
    break;
  }
  root_->red = false;
}

void TimerTree::erase_node(TimerNode* z) {
  if (z == min_) {
    // The minimum has no left child, so its successor is the leftmost node of
    // its right subtree (in a red-black tree that subtree is a single red
    // node) or else its parent.
    TimerNode* next = z->right;
    if (next != nullptr) {
      while (next->left != nullptr) next = next->left;
    } else {
      next = z->parent;
    }
    min_ = next;
  }
  if (z == max_) {
    // Mirror image: the maximum has no right child.
    TimerNode* prev = z->left;
    if (prev != nullptr) {
      while (prev->right != nullptr) prev = prev->right;
    } else {
      prev = z->parent;
    }
    max_ = prev;
  }
  --size_;

  // `child` takes the place of the node that leaves its position; when that
  // node was black, `child`'s side is one black short and is fixed below.
  TimerNode* child;
  TimerNode* parent;
  bool removed_black;
  if (z->left == nullptr || z->right == nullptr) {
    child = z->left != nullptr ? z->left : z->right;
    parent = z->parent;
    removed_black = !z->red;
    if (child != nullptr) child->parent = parent;
    if (parent == nullptr) {
      root_ = child;
    } else if (parent->left == z) {
      parent->left = child;
    } else {
      parent->right = child;
    }
  } else {
    // Two children: the successor y (leftmost of the right subtree) takes z's
    // place and colour; y's old position loses a node instead.
    TimerNode* y = z->right;
    while (y->left != nullptr) y = y->left;
    child = y->right;
    removed_black = !y->red;
    if (y->parent == z) {
      parent = y;
    } else {
      parent = y->parent;
      parent->left = child;
      if (child != nullptr) child->parent = parent;
      y->right = z->right;
      y->right->parent = y;
    }
    y->left = z->left;
    y->left->parent = y;
    y->red = z->red;
    TimerNode* zp = z->parent;
    y->parent = zp;
    if (zp == nullptr) {
      root_ = y;
    } else if (zp->left == z) {
      zp->left = y;
    } else {
      zp->right = y;
    }
  }
  z->left = z->right = z->parent = nullptr;

  if (!removed_black) return;

  // `child` (possibly null) carries an extra black; push it up or absorb it.
  // The sibling always exists: its side has black height >= 1.
  while (child != root_ && !is_red(child)) {
    if (child == parent->left) {
      TimerNode* w = parent->right;
      assert(w != nullptr);
      if (w->red) {
        w->red = false;
        parent->red = true;
        rotate_left(parent);
        w = parent->right;
      }
      if (!is_red(w->left) && !is_red(w->right)) {
        w->red = true;
        child = parent;
        parent = child->parent;
        continue;
      }
      if (!is_red(w->right)) {
        w->left->red = false;
        w->red = true;
        rotate_right(w);
        w = parent->right;
      }
      w->red = parent->red;
      parent->red = false;
      w->right->red = false;
      rotate_left(parent);
    } else {
      TimerNode* w = parent->left;
      assert(w != nullptr);
      if (w->red) {
        w->red = false;
        parent->red = true;
        rotate_right(parent);
        w = parent->left;
      }
      if (!is_red(w->left) && !is_red(w->right)) {
        w->red = true;
        child = parent;
        parent = child->parent;
        continue;
      }
      if (!is_red(w->left)) {
        w->right->red = false;
        w->red = true;
        rotate_left(w);
        w = parent->left;
      }
      w->red = parent->red;
      parent->red = false;
      w->left->red = false;
      rotate_right(parent);
    }
    child = root_;
    break;
  }
  if (child != nullptr) child->red = false;
}

bool TimerTree::check_invariants() const {
  if (root_ == nullptr) {
    return min_ == nullptr && max_ == nullptr && size_ == 0 && non_cancelable_ == 0;
  }
  if (root_->parent != nullptr || root_->red) return false;
  const TimerNode* leftmost = root_;
  while (leftmost->left != nullptr) leftmost = leftmost->left;
  if (leftmost != min_) return false;
  const TimerNode* rightmost = root_;
  while (rightmost->right != nullptr) rightmost = rightmost->right;
  if (rightmost != max_) return false;

  const TimerNode* prev = nullptr;
  std::size_t count = 0;
  std::size_t non_cancelable = 0;
  if (check_subtree(root_, nullptr, min_->key, prev, count, non_cancelable) < 0) return false;
  return count == size_ && non_cancelable == non_cancelable_;
}

}  // namespace vigil
