#pragma once
// What the process runtime needs from each protocol (http, stream): the
// listening sockets its configuration asks for, and per-worker hooks. The
// runtime opens the sockets in the master (or the single process), hands them
// to every worker's event loop, and calls the hooks at the right moments.

#include <memory>
#include <span>
#include <vector>

#include "core/conf/loader.h"
#include "vigil/core/result.h"
#include "vigil/event/listening.h"
#include "vigil/event/loop.h"

namespace vigil {

struct ProtocolHooks {
  const char* name;
  // Appends the Listening objects `conf` describes (address, options, handler,
  // servers), not yet opened. The objects must stay valid while `conf` lives.
  Status (*create_listeners)(const Configuration& conf,
                             std::vector<std::unique_ptr<Listening>>& out) = nullptr;
  // In each worker, after its event loop exists and before it runs.
  Status (*init_worker)(const Configuration& conf, EventLoop& loop, int worker_index) = nullptr;
  // In each worker when it exits (flush buffered logs, ...).
  void (*exit_worker)(EventLoop& loop) = nullptr;
  // On USR1 in each worker: reopen the protocol's log files.
  void (*reopen_logs)(EventLoop& loop) = nullptr;
};

// Every protocol compiled in (src/server/protocols.cc lists them), then those
// added with add_protocol(). Hooks may be null.
std::span<const ProtocolHooks> protocols();

// Adds a protocol at run time, before run_server(): programs built on libvigil
// (and the test harness, tests/support/worker_harness.cc) bring their own.
// Not thread-safe; invalidates spans returned by protocols().
void add_protocol(const ProtocolHooks& hooks);

}  // namespace vigil
