#pragma once
// Running the server a configuration describes: the listening sockets, then
// either a master with worker processes (master_process on, the default;
// server/master.h) or one process serving itself (master_process off;
// server/worker.h), with daemon mode, signals and the pid file.

#include <memory>

#include "core/conf/loader.h"
#include "core/core_module.h"
#include "vigil/core/log.h"

namespace vigil {

// Runs until told to stop; returns the process exit code. `log` is the error
// log, already opened by the caller from the configuration. `options` are the
// ones `conf` was loaded with: a reload (SIGHUP) loads them again. Protocols
// added with add_server_module() (server/modules.h) must be added before.
int run_server(std::unique_ptr<Configuration> conf, const ConfLoadOptions& options, Log& log);

// Opens every main-level error_log of `core` on `log`: the first replaces
// what `log` had, the others are added.
Status open_error_logs(Log& log, const CoreConf& core);

}  // namespace vigil
