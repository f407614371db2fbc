#include "server/runtime.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "core/core_module.h"
#include "core/process/pidfile.h"
#include "core/process/signals.h"
#include "event/event_conf.h"
#include "vigil/event/loop.h"

namespace vigil {

namespace {

EventLoop* g_loop = nullptr;
void wake_loop() {
  if (EventLoop* loop = g_loop) (void)loop->backend().notify();
}

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

EventLoopConfig loop_config(const CoreConf& core, const EventConf& ev) {
  EventLoopConfig cfg;
  cfg.use = ev.use;
  cfg.connections = ev.connections;
  cfg.events = ev.epoll_events;
  cfg.multi_accept = ev.multi_accept;
  cfg.accept_mutex_delay = ev.accept_mutex_delay;
  cfg.timer_resolution = core.timer_resolution;
  return cfg;
}

Status set_rlimits(const CoreConf& core, const EventConf& ev, Log& log) {
  if (core.worker_rlimit_nofile > 0) {
    rlimit rl{static_cast<rlim_t>(core.worker_rlimit_nofile),
              static_cast<rlim_t>(core.worker_rlimit_nofile)};
    if (::setrlimit(RLIMIT_NOFILE, &rl) == -1) {
      return Status::sys("setrlimit(RLIMIT_NOFILE, " + std::to_string(core.worker_rlimit_nofile) + ")");
    }
  }
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
      ev.connections > rl.rlim_cur) {
    VIGIL_LOG(log, kWarn, 0, "%zu worker_connections exceed open file resource limit: %lu",
              ev.connections, static_cast<unsigned long>(rl.rlim_cur));
  }
  return Status::ok();
}

}  // namespace

int run_server(const Configuration& conf, Log& log) {
  const CoreConf& core = conf.core();
  const EventConf& ev = conf.events();

  if (Status s = signals::install(); !s) {
    VIGIL_LOG(log, kEmerg, s.err(), "%s", s.message().c_str());
    return 1;
  }
  if (core.master_process && core.worker_processes > 1) {
    VIGIL_LOG(log, kNotice, 0, "running one process: master and worker processes are not built yet");
  }
  if (core.daemon) {
    if (Status s = daemonize(); !s) {
      VIGIL_LOG(log, kEmerg, s.err(), "%s", s.message().c_str());
      return 1;
    }
  }
  if (Status s = set_rlimits(core, ev, log); !s) {
    VIGIL_LOG(log, kEmerg, s.err(), "%s", s.message().c_str());
    return 1;
  }

  auto loop_r = EventLoop::create(loop_config(core, ev), log);
  if (!loop_r) {
    VIGIL_LOG(log, kEmerg, loop_r.status().err(), "%s", loop_r.status().message().c_str());
    return 1;
  }
  std::unique_ptr<EventLoop> loop = std::move(loop_r).value();

  pid_t pid = ::getpid();
  if (Status s = write_pid_file(core.pid_path, pid); !s) {
    VIGIL_LOG(log, kEmerg, s.err(), "%s", s.message().c_str());
    return 1;
  }

  VIGIL_LOG(log, kNotice, 0, "vigil/%s started, pid %d, %s backend, %zu worker_connections",
            VIGIL_VERSION, static_cast<int>(pid), std::string(loop->backend().name()).c_str(),
            ev.connections);
  if (loop->listening().empty()) {
    VIGIL_LOG(log, kNotice, 0, "no listening sockets are configured");
  }

  g_loop = loop.get();
  signals::set_wake_hook(wake_loop);
  signals::Flags& flags = signals::flags();
  while (!flags.terminate && !flags.quit) {
    loop->process_events_and_timers();
    if (flags.reopen) {
      flags.reopen = 0;
      VIGIL_LOG(log, kNotice, 0, "reopening logs");
      if (Status s = log.reopen(); !s) VIGIL_LOG(log, kAlert, s.err(), "%s", s.message().c_str());
    }
    if (flags.reconfigure) {
      flags.reconfigure = 0;
      VIGIL_LOG(log, kNotice, 0, "reload needs master_process; ignoring SIGHUP");
    }
  }
  signals::set_wake_hook(nullptr);
  g_loop = nullptr;
  VIGIL_LOG(log, kNotice, 0, "%s", flags.quit ? "gracefully shutting down" : "exiting");
  remove_pid_file(core.pid_path, pid);
  return 0;
}

}  // namespace vigil
