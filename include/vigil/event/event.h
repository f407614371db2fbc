#pragma once
// The event object (seed 000 "Nginx 的事件", seed 001 ngx_event_t).
// Events are never created on the hot path: every Connection of the pool owns
// one read and one write Event, preallocated at worker start. An event carries
// its own intrusive timer-tree node and posted-queue node, so arming a timer or
// posting an event allocates nothing.

#include <cstddef>
#include <cstdint>

#include "vigil/core/clock.h"

namespace vigil {

class Event;
class Log;

using EventHandler = void (*)(Event& ev);

inline constexpr Msec kTimerInfinite = ~Msec{0};

// Intrusive red-black tree node; `key` is the absolute deadline in
// clock::current_msec() milliseconds. key, left and right come first: they
// are all a descent reads, and 24 contiguous bytes share one cache line
// wherever the Event lands in a 96-byte-stride pool.
struct TimerNode {
  Msec key = 0;
  TimerNode* left = nullptr;
  TimerNode* right = nullptr;
  TimerNode* parent = nullptr;
  bool red = false;
  // Event::cancelable as it was when the timer was armed, so TimerTree's
  // non-cancelable count stays right if the flag changes while armed.
  bool cancelable = false;
};

// Intrusive circular doubly-linked list node (posted queues, reusable list).
struct QueueNode {
  QueueNode* prev = nullptr;
  QueueNode* next = nullptr;
  bool linked() const { return next != nullptr; }
};

// Lifetime: a connection's events belong to the pool (see connection.h). An
// Event of your own (a timer, say) must outlive its armed timer and any
// posting: delete the timer (EventLoop::del_timer) and remove it from a
// posted queue (PostedQueue::remove) before it goes away.
class Event {
 public:
  // The owner, not owned: the Connection for a connection's events, anything
  // for an Event of your own (owner<T>() casts it back).
  void* data = nullptr;
  EventHandler handler = nullptr;

  unsigned write : 1 = 0;     // write event (0: read event)
  unsigned accept : 1 = 0;    // read event of a listening socket
  unsigned active : 1 = 0;    // registered with the backend
  unsigned ready : 1 = 0;  // the kernel said readable/writable; cleared on EAGAIN
  unsigned eof : 1 = 0;  // the peer closed its side
  unsigned error : 1 = 0;
  unsigned timedout : 1 = 0;
  unsigned timer_set : 1 = 0;
  unsigned delayed : 1 = 0;
  unsigned deferred_accept : 1 = 0;
  unsigned pending_eof : 1 = 0;  // EPOLLRDHUP seen: a short read means EOF
  unsigned posted : 1 = 0;
  unsigned cancelable : 1 = 0;  // a timer that must not delay graceful shutdown

  // read: bytes known to be readable, -1 when unknown; accept: 1 = multi_accept.
  int available = 0;

  // Slot of this event in a level-triggered backend's table (poll, select),
  // or of its pending change in kqueue's change list.
  std::uint32_t index = kNoIndex;
  static constexpr std::uint32_t kNoIndex = 0xffffffffu;
  // The socket error kqueue reported with EV_EOF (its fflags), 0 when none
  // (nginx's kq_errno): libkqueue reads SO_ERROR to fill it, which clears it.
  int kq_errno = 0;

  Log* log = nullptr;  // not owned; must outlive the event's use
  TimerNode timer;
  QueueNode queue;

  template <class T>
  T* owner() const {
    return static_cast<T*>(data);
  }
  static Event* from_timer(TimerNode* n) {
    return reinterpret_cast<Event*>(reinterpret_cast<char*>(n) - offsetof(Event, timer));
  }
  static Event* from_queue(QueueNode* n) {
    return reinterpret_cast<Event*>(reinterpret_cast<char*>(n) - offsetof(Event, queue));
  }
};

// ---- backend capability flags (nginx's ngx_event_flags) ----------------------
inline constexpr unsigned kCapLevel = 1u << 0;   // level-triggered (poll, select)
inline constexpr unsigned kCapClear = 1u << 1;   // edge-triggered (epoll ET, io_uring)
inline constexpr unsigned kCapEpoll = 1u << 3;   // EPOLLRDHUP / pending_eof available
inline constexpr unsigned kCapExclusive = 1u << 5;  // EPOLLEXCLUSIVE on listening sockets
// The backend refreshes the time every timer_resolution by itself (kqueue's
// EVFILT_TIMER, nginx's NGX_USE_TIMER_EVENT): the loop arms no timerfd tick.
inline constexpr unsigned kCapTimer = 1u << 6;

// ---- flags for add/del ------------------------------------------------------
inline constexpr unsigned kEvLevel = 0;
inline constexpr unsigned kEvClear = 1u << 0;      // edge-triggered registration
inline constexpr unsigned kEvExclusive = 1u << 2;  // EPOLLEXCLUSIVE
inline constexpr unsigned kEvClose = 1u << 3;      // del: the fd is about to be closed

// ---- flags for process_events -----------------------------------------------
inline constexpr unsigned kProcUpdateTime = 1u << 0;  // refresh the cached time after the wait
inline constexpr unsigned kProcPostEvents = 1u << 1;  // post instead of calling handlers

}  // namespace vigil
