#pragma once
// Counters shared by every worker (seed 004: each on its own 128-byte line so
// workers updating different counters do not false-share). stub_status reads
// the totals; /metrics reads the per-worker slots. Until a master maps the
// shared zone, a process-local instance is used, so a single process and the
// tests count the same way.

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "vigil/core/stats.h"

namespace vigil {

inline constexpr std::size_t kCacheLine = 128;
inline constexpr std::size_t kMaxWorkers = 64;

struct alignas(kCacheLine) SharedCounter {
  std::atomic<std::uint64_t> value{0};
  void add(std::int64_t n = 1) {
    value.fetch_add(static_cast<std::uint64_t>(n), std::memory_order_relaxed);
  }
  std::uint64_t get() const { return value.load(std::memory_order_relaxed); }
};

// One worker's event-loop figures (VIGIL_WORKER_STATS's LOOP and POOL
// entries), published by the worker (copied from its LoopStats and pool at
// most once per loop pass) for /metrics.
struct alignas(kCacheLine) WorkerSlot {
  std::atomic<pid_t> pid{0};  // 0: slot unused
#define VIGIL_SLOT_FIELD(member, ...) std::atomic<std::uint64_t> member{0};
  VIGIL_WORKER_STATS(VIGIL_SLOT_FIELD, VIGIL_SLOT_FIELD, VIGIL_STATS_SKIP)
#undef VIGIL_SLOT_FIELD
};

struct SharedCounters {
  // stub_status's figures as nginx counts them, and more (VIGIL_SHARED_TOTALS):
  // accepted (accept4() succeeded), handled (... and got a connection from
  // the pool), active (accepted connections open now), requests (started),
  // reading (a request header), writing (a request being answered), waiting
  // (idle keep-alive).
#define VIGIL_TOTAL_FIELD(member, ...) SharedCounter member;
  VIGIL_SHARED_TOTALS(VIGIL_TOTAL_FIELD)
#undef VIGIL_TOTAL_FIELD
  WorkerSlot workers[kMaxWorkers];
};

// The counters this process updates; never null.
SharedCounters* shared_counters();
// Points the process at counters in shared memory (the master does this before fork).
void set_shared_counters(SharedCounters* counters);

}  // namespace vigil
