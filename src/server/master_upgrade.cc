// The master's binary upgrade (USR2), WINCH and its HUP, and what it tells
// systemd: nginx's ngx_exec_new_binary and the ngx_noaccept handling of
// ngx_master_process_cycle.
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string>

#include "core/core_module.h"
#include "server/master_process.h"
#include "server/systemd.h"
#include "server/upgrade.h"

namespace vigil::master_detail {

void Master::tell_systemd(const std::string& state) {
  if (Status s = notify_systemd(state); !s) {
    VIGIL_LOG(log_, kAlert, s.err(), "%s", s.message().c_str());
  }
}

// USR2 (nginx's ngx_exec_new_binary): the pid file moves aside to .oldbin and
// the binary is executed again with our listening sockets; both masters and
// their workers then serve side by side until one of them is told to go.
void Master::change_binary() {
  if (new_binary_ > 0) {
    VIGIL_LOG(log_, kNotice, 0, "new binary process %d is already running, USR2 ignored",
              static_cast<int>(new_binary_));
    return;
  }
  const std::string old_path = old_pid_path(pid_path_);
  if (::rename(pid_path_.c_str(), old_path.c_str()) == -1) {
    VIGIL_LOG(log_, kAlert, errno, "rename() \"%s\" to \"%s\" failed, not upgrading",
              pid_path_.c_str(), old_path.c_str());
    return;
  }
  VIGIL_LOG(log_, kNotice, 0, "changing binary");
  const pid_t pid = exec_new_binary(cycle_->listeners, log_);
  if (pid == -1) {
    if (::rename(old_path.c_str(), pid_path_.c_str()) == -1) {
      VIGIL_LOG(log_, kAlert, errno, "rename() \"%s\" back to \"%s\" failed", old_path.c_str(),
                pid_path_.c_str());
    }
    return;
  }
  new_binary_ = pid;
}

// The new master exited (QUIT to it: the upgrade is rolled back, or it failed
// to start): the pid file is ours again, and workers stopped by WINCH start
// again, as in nginx's ngx_reap_children.
void Master::on_new_binary_exit(int status) {
  VIGIL_LOG(log_, kNotice, 0, "new binary process %d exited with %s %d",
            static_cast<int>(new_binary_), WIFSIGNALED(status) ? "signal" : "code",
            WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
  new_binary_ = 0;
  const std::string old_path = old_pid_path(pid_path_);
  if (::rename(old_path.c_str(), pid_path_.c_str()) == -1) {
    VIGIL_LOG(log_, kAlert, errno, "rename() \"%s\" back to \"%s\" failed", old_path.c_str(),
              pid_path_.c_str());
  }
  if (noaccepting_ && !quitting_ && !terminating_) restart_workers();
}

// WINCH: the workers finish what they serve and exit; the master stays, with
// its sockets, to be told QUIT (the upgrade is done) or HUP (roll back).
// nginx accepts it only when daemonized (a terminal sends WINCH on every
// resize); here also while a new binary runs, which is when it is meant.
void Master::stop_accepting() {
  if (!cycle_->conf->core().daemon && new_binary_ == 0) {
    VIGIL_LOG(log_, kNotice, 0, "WINCH ignored: not a daemon and no new binary is running");
    return;
  }
  if (noaccepting_) return;
  noaccepting_ = true;
  VIGIL_LOG(log_, kNotice, 0, "gracefully shutting down worker processes");
  respawns_.clear();
  for (Child& c : children_) c.retiring = true;
  signal_children(SIGQUIT);
}

// HUP after WINCH: the same configuration's workers again, no reload.
void Master::restart_workers() {
  noaccepting_ = false;
  VIGIL_LOG(log_, kNotice, 0, "starting worker processes again");
  streak_.assign(static_cast<std::size_t>(cycle_->workers), 0);
  for (int i = 0; i < cycle_->workers; ++i) spawn(i);
}

}  // namespace vigil::master_detail
