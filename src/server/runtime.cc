#include "server/runtime.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <utility>

#include "core/core_module.h"
#include "core/process/pidfile.h"
#include "core/process/signals.h"
#include "server/cycle.h"
#include "server/inherit.h"
#include "server/master.h"
#include "server/modules.h"
#include "server/systemd.h"
#include "server/worker.h"

namespace vigil {

namespace {

// Detaches from the terminal: fork, setsid, stdio to /dev/null.
Status daemonize() {
  pid_t pid = ::fork();
  if (pid == -1) return Status::sys("fork()");
  if (pid > 0) ::_exit(0);
  if (::setsid() == -1) return Status::sys("setsid()");
  ::umask(0);
  int fd = ::open("/dev/null", O_RDWR);
  if (fd == -1) return Status::sys("open(\"/dev/null\")");
  if (::dup2(fd, STDIN_FILENO) == -1 || ::dup2(fd, STDOUT_FILENO) == -1) {
    return Status::sys("dup2()");
  }
  if (fd > STDERR_FILENO) ::close(fd);
  return Status::ok();
}

int fail(Log& log, const Status& s) {
  VIGIL_LOG(log, kEmerg, s.err(), "%s", s.message().c_str());
  return 1;
}

// master_process off: this process is the one worker.
int run_single(Cycle& cycle, Log& log) {
  const std::string& pid_path = cycle.conf->core().pid_path;
  const pid_t pid = ::getpid();
  if (Status s = write_pid_file(pid_path, pid); !s) return fail(log, s);
  WorkerContext ctx;
  ctx.cycle = &cycle;
  ctx.index = 0;
  ctx.slot = 0;  // the process-local counters
  ctx.forked = false;
  // The sockets listen already: connections queue until the loop runs.
  if (Status s = notify_systemd("READY=1\nMAINPID=" + std::to_string(pid)); !s) {
    VIGIL_LOG(log, kAlert, s.err(), "%s", s.message().c_str());
  }
  const int rc = run_worker(ctx, log);
  cycle.listeners.remove_unix_files();
  remove_pid_file(pid_path, pid);
  return rc == 0 ? 0 : 1;
}

}  // namespace

Status open_error_logs(Log& log, const CoreConf& core) {
  if (Status s = log.open(core.error_log, core.error_log_level); !s) return s;
  for (const auto& [path, level] : core.more_error_logs) {
    if (Status s = log.add(path, level); !s) return s;
  }
  return Status::ok();
}

int run_server(std::unique_ptr<Configuration> conf, const ConfLoadOptions& options, Log& log) {
  if (Status s = signals::install(); !s) return fail(log, s);
  set_counter_blocks(server_counter_blocks());
  const bool daemon = conf->core().daemon;

  // Sockets first, as nginx does: a port in use is reported on the terminal
  // and in the exit code, before the process detaches.
  // Sockets handed over by an old master (USR2) or by systemd are used
  // instead of opening new ones; those not configured any more are closed
  // when `inherited` goes.
  std::string inherited_from;
  ListenerSet inherited = inherited_listeners(log, &inherited_from);
  const bool upgraded = inherited_from.rfind(kInheritEnv, 0) == 0;
  auto made = make_cycle(std::move(conf), nullptr, log, &inherited);
  inherited.close_all();
  if (!made) {
    VIGIL_LOG(log, kEmerg, made.status().err(), "%s", made.status().message().c_str());
    return 1;
  }
  std::unique_ptr<Cycle> cycle = std::move(made).value();

  // A new binary started by an old master stays its child, as nginx's does
  // (the old master reaps it and takes the pid file back if it exits).
  if (daemon && !upgraded) {
    if (Status s = daemonize(); !s) return fail(log, s);
  }
  if (cycle->master) return run_master(std::move(cycle), options, log, upgraded);
  return run_single(*cycle, log);
}

}  // namespace vigil
