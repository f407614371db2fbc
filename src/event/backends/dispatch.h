#pragma once
// Internal: how every backend hands a ready event to the loop (seed 001,
// 算法 3 ngx_epoll_process_events). Shared so the four backends agree exactly on
// the ready/available bits, on which queue a posted event goes to, and on the
// stale-event rule.

#include <cstdint>

#include "vigil/event/connection.h"
#include "vigil/event/event.h"
#include "vigil/event/loop.h"

namespace vigil::backends {

// Marks ev ready and runs its handler, or with kProcPostEvents posts it: accept
// events to posted_accept (run before the accept mutex is released), the rest
// to posted.
inline void deliver(EventLoop& loop, Event& ev, unsigned flags) {
  ev.ready = 1;
  if (!ev.write) ev.available = -1;  // unknown: the handler reads until EAGAIN
  if (flags & kProcPostEvents) {
    (ev.accept ? loop.posted_accept() : loop.posted()).post(ev);
  } else {
    ev.handler(ev);
  }
}

// True when a kernel report tagged with `instance` no longer belongs to c: the
// connection was closed (fd == -1), or closed and its slot handed to a new fd
// (the pool flipped the instance bit; seed 000 "instance").
inline bool is_stale(const Connection& c, unsigned instance) {
  return c.fd == -1 || c.read->instance != instance;
}

// One kernel report for connection c: the read side first, then the write side.
// The read handler may close c and even reuse its slot, so the stale check is
// repeated before the write side, as nginx does.
inline void deliver_conn(EventLoop& loop, Connection& c, unsigned instance, bool readable,
                         bool writable, bool rdhup, unsigned flags) {
  if (is_stale(c, instance)) return;
  Event* rev = c.read;
  if (readable && rev->active) {
    if (rdhup) rev->pending_eof = 1;  // EPOLLRDHUP: a short read means EOF
    deliver(loop, *rev, flags);
  }
  Event* wev = c.write;
  if (writable && wev->active) {
    if (c.fd == -1 || wev->instance != instance) return;
    deliver(loop, *wev, flags);
  }
}

// Connections are at least 8-byte aligned, so bit 0 of the pointer carries the
// instance bit through the kernel (epoll data.ptr, io_uring user_data).
inline void* tag_pointer(const void* p, unsigned instance) {
  return reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(p) | (instance & 1u));
}
inline unsigned tag_instance(const void* tagged) {
  return static_cast<unsigned>(reinterpret_cast<std::uintptr_t>(tagged) & 1u);
}
template <class T>
inline T* untag_pointer(const void* tagged) {
  return reinterpret_cast<T*>(reinterpret_cast<std::uintptr_t>(tagged) & ~std::uintptr_t{1});
}

}  // namespace vigil::backends
