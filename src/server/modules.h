#pragma once
// The one module registry (nginx's generated objs/ngx_modules.c): every module
// the server is built with, each one entry holding all it brings — the
// configuration Module (directives, contexts, create/init/merge) and the
// process hooks (listening sockets, worker init and exit, log reopening).
// Adding a protocol is one line in modules.cc (two if it counts totals: its
// counter block in server_counter_blocks()). Core and the protocols know
// nothing of this table; the server layer is where they meet.

#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "core/conf/loader.h"
#include "vigil/core/counters.h"
#include "vigil/core/result.h"
#include "vigil/event/listening.h"
#include "vigil/event/loop.h"

namespace vigil {

struct ServerModule {
  const char* name;
  // Directives and confs; null for a module that has none.
  const Module* conf = nullptr;
  // Appends the Listening objects `conf` describes (address, options, handler,
  // servers), not yet opened. The objects must stay valid while `conf` lives.
  Status (*create_listeners)(const Configuration& conf,
                             std::vector<std::unique_ptr<Listening>>& out) = nullptr;
  // In each worker, after its event loop exists and before it runs. Per-loop
  // state goes into loop.set_context().
  Status (*init_worker)(const Configuration& conf, EventLoop& loop, int worker_index) = nullptr;
  // In each worker when it exits (flush buffered logs, free per-loop state).
  void (*exit_worker)(EventLoop& loop) = nullptr;
  // On USR1 in each worker: reopen the module's log files.
  void (*reopen_logs)(EventLoop& loop) = nullptr;
  // In each worker when its graceful stop begins (quit, reload, upgrade),
  // after it stopped listening: connections that outlive a request (an
  // HTTP/2 connection with streams in flight) are told to end (GOAWAY).
  void (*begin_shutdown)(EventLoop& loop) = nullptr;
};

// Every module compiled in (modules.cc lists them), then those added with
// add_server_module(). Hooks may be null.
std::span<const ServerModule> server_modules();

// Adds a module at run time, before the configuration is loaded: programs
// built on the server layer (and the test harness, tests/support/
// worker_harness.cc) bring their own. Not thread-safe; invalidates spans
// returned by server_modules().
void add_server_module(const ServerModule& module);

// The configuration modules of server_modules(), in order, for
// ConfLoadOptions::modules. The same object for the life of the process.
const ModuleRegistry& server_conf_modules();

// The bytes of conf/vigil.conf and conf/mime.types, compiled in
// (cmake/embed.cmake).
extern const std::string_view kEmbeddedConf;
extern const std::string_view kEmbeddedMimeTypes;

// Every layer's block of totals (vigil/core/counters.h), in /metrics order:
// run_server() hands them to counter_blocks(), which the master places in
// its shared zone and /metrics shows.
std::span<CounterBlock* const> server_counter_blocks();

// Load options for the vigil program: the registry above, and the embedded
// configuration (with the files it includes) as the fallback when
// <prefix>/conf/vigil.conf does not exist.
ConfLoadOptions server_load_options();

}  // namespace vigil
