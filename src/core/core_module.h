#pragma once
// The main-context directives (nginx's ngx_core_module) and "include".

#include <cstdint>
#include <string>
#include <utility>
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
  // The error_log lines after the first (each gets the lines its level admits).
  std::vector<std::pair<std::string, LogLevel>> more_error_logs;
  long worker_rlimit_nofile = -1;    // -1: leave RLIMIT_NOFILE alone
  Msec timer_resolution = 0;         // 0: update the time after every wait
  Msec worker_shutdown_timeout = 0;  // 0: wait for connections forever
  // worker_cpu_affinity: unset when !cpu_affinity_auto and cpu_affinity is
  // empty. Masks have bit N for CPU N; with "auto" the optional mask (the one
  // element) limits the CPUs workers are spread over; otherwise worker i gets
  // mask i, and workers beyond the list get the last one (as nginx).
  bool cpu_affinity_auto = false;
  std::vector<std::uint64_t> cpu_affinity;

  // user USER [GROUP] (nginx's ngx_set_user). Looked up only when the master
  // runs as root; then the default is "nobody" and that user's group.
  // user_uid == kNoUid: workers keep the master's credentials (not root, or
  // master_process off).
  std::string user;       // as written, or "nobody" by default
  std::string group;      // as written, or the group resolved for `user`
  bool user_set = false;  // the directive was given
  unsigned user_uid = kNoUid;
  unsigned user_gid = kNoUid;
  static constexpr unsigned kNoUid = ~0u;

  std::string working_directory;      // "" : unchanged; else absolute after load
  long long worker_rlimit_core = -1;  // bytes; -1: leave RLIMIT_CORE alone
};

const Module& core_module();

}  // namespace vigil
