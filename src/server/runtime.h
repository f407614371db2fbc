#pragma once
// Running the server a configuration describes: the process model (one
// process now; master and workers with master_process on), signals, the pid
// file, and one event loop per worker with the protocols' listening sockets.

#include "core/conf/loader.h"
#include "vigil/core/log.h"

namespace vigil {

// Runs until told to stop; returns the process exit code. `log` is the
// error log, already opened by the caller from the configuration.
int run_server(const Configuration& conf, Log& log);

}  // namespace vigil
