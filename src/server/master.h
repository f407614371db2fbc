#pragma once
// The master process (nginx's ngx_master_process_cycle): it holds the
// configuration, the listening sockets and one shared zone (the accept mutex
// and the counters), forks worker_processes workers and keeps them running,
// and turns signals into actions. It serves nothing itself and sleeps in
// sigsuspend() between signals.
//
//   HUP   reload: load the configuration again from the same options; on
//         success open the new listeners (keeping the sockets still wanted),
//         start new workers, then gracefully stop the old ones; on error log
//         it and keep everything as it was
//   QUIT  graceful stop: forwarded to the workers, exit when they are gone
//   TERM, INT  fast stop: TERM to the workers, SIGKILL after kKillAfterMs
//   USR1  reopen the error log, forwarded to the workers
//   CHLD  reap; a worker that died unasked is respawned (with a growing delay
//         when it keeps dying young) and the accept mutex it held is released

#include <memory>

#include "core/conf/loader.h"

namespace vigil {

class Log;
struct Cycle;

// Runs the master until it is stopped; returns the process exit code. Writes
// the pid file (and moves it if a reload changes `pid`), removes it at exit.
// `upgraded`: started by an old master's USR2, which is this process's parent.
int run_master(std::unique_ptr<Cycle> cycle, const ConfLoadOptions& options, Log& log,
               bool upgraded = false);

}  // namespace vigil
