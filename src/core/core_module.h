#pragma once
// The main-context directives (nginx's ngx_core_module) and "include".

#include <cstdint>
#include <string>
#include <vector>

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
  std::string lock_file;  // set: the accept mutex is an fcntl() lock on it (resolved)
  std::string pid_path;   // default <prefix>/logs/vigil.pid
  std::string error_log;  // "stderr" or a path; default <prefix>/logs/error.log
  LogLevel error_log_level = LogLevel::kError;
  long worker_rlimit_nofile = -1;    // -1: leave RLIMIT_NOFILE alone
  Msec timer_resolution = 0;         // 0: update the time after every wait
  Msec worker_shutdown_timeout = 0;  // 0: wait for connections forever
  // worker_cpu_affinity: unset when !cpu_affinity_auto and cpu_affinity is
  // empty. Masks have bit N for CPU N; with "auto" the optional mask (the one
  // element) limits the CPUs workers are spread over; otherwise worker i gets
  // mask i, and workers beyond the list get the last one (as nginx).
  bool cpu_affinity_auto = false;
  std::vector<std::uint64_t> cpu_affinity;
};

const Module& core_module();

}  // namespace vigil
