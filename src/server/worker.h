#pragma once
// A worker process (nginx's ngx_worker_process_cycle): resource limits and CPU
// affinity, one event loop on the cycle's listening sockets, the protocols'
// worker hooks, its slot of the shared counters, and the signals a master
// forwards: QUIT graceful stop, TERM/INT fast stop, USR1 reopen logs. With
// master_process off the single process runs the same code.

#include "vigil/core/process_mutex.h"

namespace vigil {

class Log;
struct Cycle;

// A worker that cannot start (no event loop, a protocol's init failed) exits
// with this code and the master does not respawn it (as nginx's exit(2)).
inline constexpr int kWorkerFatal = 2;

struct WorkerContext {
  Cycle* cycle = nullptr;                // the worker's own copy after fork
  int index = 0;                         // 0 .. workers-1: its reuseport sockets and CPU
  int slot = -1;                         // its worker_slots()[] slot; -1: none
  ProcessMutex* accept_mutex = nullptr;  // set when accept_mutex is in use
  bool forked = true;                    // false: master_process off
};

// Runs the worker until it is told to stop; returns its exit code.
int run_worker(const WorkerContext& ctx, Log& log);

}  // namespace vigil
