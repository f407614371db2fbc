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

// One worker's event-loop figures, published by the worker (copied from its
// LoopStats at most once per loop pass) for /metrics.
struct alignas(kCacheLine) WorkerSlot {
  std::atomic<pid_t> pid{0};  // 0: slot unused
  std::atomic<std::uint64_t> iterations{0};
  std::atomic<std::uint64_t> events{0};
  std::atomic<std::uint64_t> empty_waits{0};
  std::atomic<std::uint64_t> timers_expired{0};
  std::atomic<std::uint64_t> posted_run{0};
  std::atomic<std::uint64_t> accepted{0};
  std::atomic<std::uint64_t> accept_mutex_acquired{0};
  std::atomic<std::uint64_t> connections_used{0};
  std::atomic<std::uint64_t> connections_max{0};
  // io_uring (zero on the other backends).
  std::atomic<std::uint64_t> sqes_submitted{0};
  std::atomic<std::uint64_t> cqes_reaped{0};
  std::atomic<std::uint64_t> enters{0};
  std::atomic<std::uint64_t> ring_buffer_misses{0};
};

struct SharedCounters {
  // stub_status, as nginx counts them.
  SharedCounter accepted;  // accept4() succeeded
  SharedCounter handled;   // ... and got a connection from the pool
  SharedCounter active;    // accepted connections open now
  SharedCounter requests;  // requests started
  SharedCounter reading;   // connections reading a request header
  SharedCounter writing;   // connections with a request being answered
  SharedCounter waiting;   // idle keep-alive connections
  WorkerSlot workers[kMaxWorkers];
};

// The counters this process updates; never null.
SharedCounters* shared_counters();
// Points the process at counters in shared memory (the master does this before fork).
void set_shared_counters(SharedCounters* counters);

}  // namespace vigil
