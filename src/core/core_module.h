#pragma once
// The main-context directives (nginx's ngx_core_module) and "include".

#include <string>

#include "core/conf/module.h"
#include "vigil/core/clock.h"
#include "vigil/core/log.h"

namespace vigil {

// After a successful load every field holds a final value: nginx's defaults
// for what the configuration did not set, paths resolved against the prefix.
struct CoreConf {
  int worker_processes = 1;  // "auto" resolved to the online CPUs
  bool daemon = true;
  bool master_process = true;
  std::string pid_path;   // default <prefix>/logs/vigil.pid
  std::string error_log;  // "stderr" or a path; default <prefix>/logs/error.log
  LogLevel error_log_level = LogLevel::kError;
  long worker_rlimit_nofile = -1;    // -1: leave RLIMIT_NOFILE alone
  Msec timer_resolution = 0;         // 0: update the time after every wait
  Msec worker_shutdown_timeout = 0;  // 0: wait for connections forever
};

const Module& core_module();

}  // namespace vigil
