#pragma once
// The event layer's figures per worker, defined once: the loop's and the
// pool's, then the io_uring backend's. LoopStats (what the loop counts),
// WorkerSlot (a worker's copy in shared memory), the loop's publisher and the
// per-worker part of /metrics are all generated from these lists, so a new
// figure is one line here (plus the code that counts it).
//
// Each list takes three macros, one per kind (VIGIL_STATS_SKIP, from
// vigil/core/stats.h, for kinds the user has no use for), one entry per
// figure, in /metrics order:
//   LOOP(member, metric, type, help)   counted by its event loop (LoopStats::member)
//   POOL(member, metric, type, help)   read from the loop's ConnectionPool::member()
//   DERIVED(fn, metric, type, help)    computed by /metrics from the slot (fn)

#include <sys/types.h>

#include <atomic>
#include <cstdint>

#include "vigil/core/counters.h"
#include "vigil/core/stats.h"

// The loop's and the pool's.
#define VIGIL_LOOP_STATS(LOOP, POOL, DERIVED)                                                     \
  LOOP(iterations, "vigil_worker_loop_iterations_total", "counter", "Event loop passes.")         \
  LOOP(events, "vigil_worker_events_total", "counter", "Events the backend reported.")            \
  DERIVED(events_per_wait, "vigil_worker_events_per_wait", "gauge",                               \
          "Events reported per loop pass, on average.")                                           \
  LOOP(empty_waits, "vigil_worker_empty_waits_total", "counter", "Waits that returned no event.") \
  LOOP(timers_expired, "vigil_worker_timers_expired_total", "counter", "Timers that expired.")    \
  LOOP(posted_run, "vigil_worker_posted_events_total", "counter", "Posted events run.")           \
  LOOP(accepted, "vigil_worker_accepted_total", "counter", "Connections this worker accepted.")   \
  LOOP(accept_mutex_acquired, "vigil_worker_accept_mutex_acquired_total", "counter",              \
       "Times the accept mutex was taken.")                                                       \
  POOL(connections_used, "vigil_worker_connections_used", "gauge", "Connection slots in use.")    \
  POOL(connections_max, "vigil_worker_connections_max", "gauge", "worker_connections.")

// The io_uring backend's (src/event/backends/uring*.cc); zero on the others.
#define VIGIL_URING_STATS(LOOP, POOL, DERIVED)                                        \
  LOOP(sqes_submitted, "vigil_worker_uring_sqes_submitted_total", "counter",          \
       "io_uring requests submitted (zero on other backends).")                       \
  LOOP(cqes_reaped, "vigil_worker_uring_cqes_reaped_total", "counter",                \
       "io_uring completions reaped.")                                                \
  LOOP(enters, "vigil_worker_uring_enters_total", "counter", "io_uring_enter calls.") \
  DERIVED(enters_per_pass, "vigil_worker_uring_enters_per_pass", "gauge",             \
          "io_uring_enter calls per loop pass, on average.")                          \
  LOOP(ring_buffer_misses, "vigil_worker_uring_buffer_ring_misses_total", "counter",  \
       "Receives that found the provided buffer ring empty.")                         \
  LOOP(ring_file_sends, "vigil_worker_uring_file_sends_total", "counter",             \
       "File ranges sent through the ring (READ+SEND or SPLICE pairs).")              \
  LOOP(ring_file_fallbacks, "vigil_worker_uring_file_fallbacks_total", "counter",     \
       "File ranges a ring connection sent with sendfile() (no file send free).")

// Every per-worker figure, in /metrics order.
#define VIGIL_WORKER_STATS(LOOP, POOL, DERIVED) \
  VIGIL_LOOP_STATS(LOOP, POOL, DERIVED)         \
  VIGIL_URING_STATS(LOOP, POOL, DERIVED)

namespace vigil {

// What a loop counts (the LOOP entries), for /metrics and the tests.
struct LoopStats {
#define VIGIL_LOOP_FIELD(member, ...) std::uint64_t member = 0;
  VIGIL_WORKER_STATS(VIGIL_LOOP_FIELD, VIGIL_STATS_SKIP, VIGIL_STATS_SKIP)
#undef VIGIL_LOOP_FIELD
};

// One worker's figures (the LOOP and POOL entries), published by the worker
// (copied from its LoopStats and pool at most once per loop pass) for
// /metrics.
struct alignas(kCacheLine) WorkerSlot {
  std::atomic<pid_t> pid{0};  // 0: slot unused
#define VIGIL_SLOT_FIELD(member, ...) std::atomic<std::uint64_t> member{0};
  VIGIL_WORKER_STATS(VIGIL_SLOT_FIELD, VIGIL_SLOT_FIELD, VIGIL_STATS_SKIP)
#undef VIGIL_SLOT_FIELD
};

// The kMaxWorkers slots this process publishes into and /metrics reads; never
// null. Process-local until the master points every process at its shared
// zone's (before it forks); nullptr: the process-local ones again.
WorkerSlot* worker_slots();
void set_worker_slots(WorkerSlot* slots);

}  // namespace vigil
