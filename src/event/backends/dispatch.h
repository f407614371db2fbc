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

// True when a kernel report taken for generation `generation` of c's slot no
// longer belongs to c: the connection was closed (fd == -1), or closed and its
// slot handed out again, any number of times (ConnectionPool::get bumps the
// generation). nginx's one `instance` bit is fooled when a slot is taken and
// freed twice inside one batch: two flips cancel out. `mask` is the part of
// the generation the report could carry (all of it but for epoll).
inline bool is_stale(const Connection& c, std::uint32_t generation,
                     std::uint32_t mask = ~std::uint32_t{0}) {
  return c.fd == -1 || ((c.generation ^ generation) & mask) != 0;
}

// One kernel report for connection c: the read side first, then the write side.
// The read handler may close c and even reuse its slot, so the stale check is
// repeated before the write side, as nginx does.
inline void deliver_conn(EventLoop& loop, Connection& c, std::uint32_t generation, bool readable,
                         bool writable, bool rdhup, unsigned flags,
                         std::uint32_t mask = ~std::uint32_t{0}) {
  if (is_stale(c, generation, mask)) return;
  Event* rev = c.read;
  if (readable && rev->active) {
    if (rdhup) rev->pending_eof = 1;  // EPOLLRDHUP: a short read means EOF
    deliver(loop, *rev, flags);
  }
  Event* wev = c.write;
  if (writable && wev->active) {
    if (is_stale(c, generation, mask)) return;
    deliver(loop, *wev, flags);
  }
}

// epoll's 64-bit data: the Connection's address in bits 0..47 (user-space
// addresses fit in 47 bits on x86-64 and arm64) with its three alignment bits
// clear, and 19 bits of the generation in the rest: bits 48..63 and 0..2.
// A stale report is missed only if the slot was reused a multiple of 2^19
// times within one batch.
inline constexpr std::uint32_t kTagGenerationMask = (1u << 19) - 1;
inline constexpr std::uint64_t kTagPointerMask = ((std::uint64_t{1} << 48) - 1) & ~std::uint64_t{7};

// False when `p` cannot be tagged (above 2^48 or not 8-byte aligned).
inline bool taggable(const void* p) {
  return (reinterpret_cast<std::uintptr_t>(p) & ~kTagPointerMask) == 0;
}
inline std::uint64_t tag_connection(const void* p, std::uint32_t generation) {
  const std::uint64_t g = generation & kTagGenerationMask;
  return reinterpret_cast<std::uintptr_t>(p) | ((g & 0xffff) << 48) | (g >> 16);
}
inline std::uint32_t tag_generation(std::uint64_t tag) {
  return static_cast<std::uint32_t>(((tag >> 48) & 0xffff) | ((tag & 7) << 16));
}
template <class T>
inline T* tag_target(std::uint64_t tag) {
  return reinterpret_cast<T*>(static_cast<std::uintptr_t>(tag & kTagPointerMask));
}

}  // namespace vigil::backends
