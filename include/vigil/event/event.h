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

class Event {
 public:
  void* data = nullptr;  // the owner: usually the Connection
  EventHandler handler = nullptr;

  unsigned write : 1 = 0;     // write event (0: read event)
  unsigned accept : 1 = 0;    // read event of a listening socket
  unsigned active : 1 = 0;    // registered with the backend
  unsigned disabled : 1 = 0;
  unsigned ready : 1 = 0;  // the kernel said readable/writable; cleared on EAGAIN
  unsigned oneshot : 1 = 0;
  unsigned eof : 1 = 0;  // the peer closed its side
  unsigned error : 1 = 0;
  unsigned timedout : 1 = 0;
  unsigned timer_set : 1 = 0;
  unsigned delayed : 1 = 0;
  unsigned deferred_accept : 1 = 0;
  unsigned pending_eof : 1 = 0;  // EPOLLRDHUP seen: a short read means EOF
  unsigned posted : 1 = 0;
  unsigned closed : 1 = 0;
  unsigned cancelable : 1 = 0;  // a timer that must not delay graceful shutdown

  // read: bytes known to be readable, -1 when unknown; accept: 1 = multi_accept.
  int available = 0;

  // Slot of this event in a level-triggered backend's table (poll, select).
  std::uint32_t index = kNoIndex;
  static constexpr std::uint32_t kNoIndex = 0xffffffffu;

  Log* log = nullptr;
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
inline constexpr unsigned kCapGreedy = 1u << 2;  // a read that filled the buffer must be retried
inline constexpr unsigned kCapEpoll = 1u << 3;   // EPOLLRDHUP / pending_eof available
inline constexpr unsigned kCapFd = 1u << 4;      // events are per fd (poll/select table)
inline constexpr unsigned kCapExclusive = 1u << 5;  // EPOLLEXCLUSIVE on listening sockets

// ---- flags for add/del ------------------------------------------------------
inline constexpr unsigned kEvLevel = 0;
inline constexpr unsigned kEvClear = 1u << 0;      // edge-triggered registration
inline constexpr unsigned kEvOneshot = 1u << 1;
inline constexpr unsigned kEvExclusive = 1u << 2;  // EPOLLEXCLUSIVE
inline constexpr unsigned kEvClose = 1u << 3;      // del: the fd is about to be closed
inline constexpr unsigned kEvDisable = 1u << 4;
inline constexpr unsigned kEvFlush = 1u << 5;

// ---- flags for process_events -----------------------------------------------
inline constexpr unsigned kProcUpdateTime = 1u << 0;  // refresh the cached time after the wait
inline constexpr unsigned kProcPostEvents = 1u << 1;  // post instead of calling handlers

}  // namespace vigil
