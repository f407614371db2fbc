// The master process: nginx's ngx_master_process_cycle, ngx_start_worker_processes,
// ngx_reap_children and ngx_signal_worker_processes.
#include "server/master.h"

#include <signal.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "core/core_module.h"
#include "core/process/pidfile.h"
#include "core/process/signals.h"
#include "core/shm.h"
#include "core/shmtx.h"
#include "event/event_conf.h"
#include "server/cycle.h"
#include "server/master_process.h"
#include "server/runtime.h"
#include "server/systemd.h"
#include "server/upgrade.h"
#include "server/worker.h"
#include "server/worker_files.h"
#include "vigil/core/clock.h"
#include "vigil/core/counters.h"
#include "vigil/core/log.h"
#include "vigil/version.h"

namespace vigil {

namespace master_detail {

namespace {

// The master's own timer (respawn delays, the fast-stop deadline). Workers
// inherit the handler but not the timer (setitimer is not kept across fork).
volatile std::sig_atomic_t g_alarm = 0;
void on_alarm(int) {
  g_alarm = 1;
}

}  // namespace

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

namespace {

void clear_slot(WorkerSlot& s, pid_t pid) {
#define VIGIL_CLEAR_FIGURE(member, ...) s.member.store(0, std::memory_order_relaxed);
  VIGIL_WORKER_STATS(VIGIL_CLEAR_FIGURE, VIGIL_CLEAR_FIGURE, VIGIL_STATS_SKIP)
#undef VIGIL_CLEAR_FIGURE
  s.pid.store(pid, std::memory_order_release);
}

// Bytes the counter blocks take after the SharedZone.
std::size_t counter_blocks_size() {
  std::size_t n = 0;
  for (const CounterBlock* b : counter_blocks()) n += b->size();
  return n;
}

}  // namespace

Master::~Master() {
  // Before the zone is unmapped: back to the process-local counters.
  for (CounterBlock* b : counter_blocks()) b->place(nullptr);
  set_worker_slots(nullptr);
  if (mutex_created_) accept_mutex_.destroy();
  if (pid_written_) {
    remove_pid_file(pid_path_, ::getpid());
    remove_pid_file(old_pid_path(pid_path_), ::getpid());  // an old master after an upgrade
  }
}

Status Master::init() {
  sigset_t set;
  sigemptyset(&set);
  for (int signo : kMasterSignals) sigaddset(&set, signo);
  if (::sigprocmask(SIG_BLOCK, &set, nullptr) == -1) return Status::sys("sigprocmask()");
  struct sigaction sa {};
  sa.sa_handler = on_alarm;
  sigemptyset(&sa.sa_mask);
  if (::sigaction(SIGALRM, &sa, nullptr) == -1) return Status::sys("sigaction(SIGALRM)");

  auto shm = SharedMemory::map(sizeof(SharedZone) + counter_blocks_size());
  if (!shm) return shm.status();
  shm_ = std::move(shm).value();
  zone_ = new (shm_.addr()) SharedZone();
  // The atomic lock in the shared zone, or with lock_file the fcntl() lock
  // (the kernel drops a dead holder's lock itself: nothing to force).
  const std::string& lock_file = cycle_->conf->core().lock_file;
  Status created = lock_file.empty()
                       ? accept_mutex_.create(&zone_->accept_mutex)
                       : accept_mutex_.create(nullptr, Shmtx::Mode::kFileLock, lock_file);
  if (!created) return created;
  mutex_created_ = true;
  // Before the first fork: every worker then counts into the shared zone,
  // each layer's totals in its block after the slots.
  set_worker_slots(zone_->workers);
  auto* block_at = static_cast<unsigned char*>(shm_.addr()) + sizeof(SharedZone);
  for (CounterBlock* b : counter_blocks()) {
    b->place(block_at);
    block_at += b->size();
  }

  prepare_worker_files(*cycle_, log_);
  pid_path_ = cycle_->conf->core().pid_path;
  if (Status s = write_pid_file(pid_path_, ::getpid()); !s) return s;
  pid_written_ = true;
  streak_.assign(static_cast<std::size_t>(cycle_->workers), 0);
  return Status::ok();
}

int Master::run() {
  clock::time_update();
  if (Status s = init(); !s) {
    VIGIL_LOG(log_, kEmerg, s.err(), "%s", s.message().c_str());
    return 1;
  }
  VIGIL_LOG(log_, kNotice, 0, "vigil/%s started, pid %d, master process, %d worker processes",
            VIGIL_VERSION_STRING, static_cast<int>(::getpid()), cycle_->workers);
  for (int i = 0; i < cycle_->workers; ++i) spawn(i);
  // MAINPID too: after a binary upgrade the new master is the main process.
  tell_systemd("READY=1\nMAINPID=" + std::to_string(::getpid()));

  signals::Flags& flags = signals::flags();
  sigset_t none;
  sigemptyset(&none);
  for (;;) {
    arm_timer(now_ms());
    // The signals are blocked: a flag checked here cannot be set before
    // sigsuspend() starts waiting, so no signal is slept through.
    if (!anything_pending()) ::sigsuspend(&none);
    g_alarm = 0;
    clock::time_update();  // the log's timestamps; the master has no loop to do it

    if (flags.child) {
      flags.child = 0;
      reap();
    }
    if (flags.terminate) {
      flags.terminate = 0;
      stop(/*graceful=*/false);
    }
    if (flags.quit) {
      flags.quit = 0;
      stop(/*graceful=*/true);
    }
    if ((quitting_ || terminating_) && children_.empty()) break;

    const std::int64_t now = now_ms();
    if (terminating_ && !killed_ && now >= kill_at_) {
      killed_ = true;
      VIGIL_LOG(log_, kWarn, 0, "%zu worker processes still running after %lld ms, killing them",
                children_.size(), static_cast<long long>(kKillAfterMs));
      signal_children(SIGKILL);
    }
    if (flags.reconfigure) {
      flags.reconfigure = 0;
      // After WINCH, HUP brings the workers back as they were (the rollback
      // of an upgrade), as nginx does; otherwise it reloads.
      if (!quitting_ && !terminating_) {
        if (noaccepting_) {
          restart_workers();
        } else {
          tell_systemd(systemd_reloading_state());
          reload();
          tell_systemd("READY=1");  // done, whether the new configuration was taken or not
        }
      }
    }
    if (flags.change_binary) {
      flags.change_binary = 0;
      if (!quitting_ && !terminating_) change_binary();
    }
    if (flags.noaccept) {
      flags.noaccept = 0;
      if (!quitting_ && !terminating_) stop_accepting();
    }
    if (flags.reopen) {
      flags.reopen = 0;
      VIGIL_LOG(log_, kNotice, 0, "reopening logs");
      if (Status s = log_.reopen(); !s) VIGIL_LOG(log_, kAlert, s.err(), "%s", s.message().c_str());
      if (Status s = cycle_->conf->error_logs().reopen(); !s) {
        VIGIL_LOG(log_, kAlert, s.err(), "%s", s.message().c_str());
      }
      prepare_worker_files(*cycle_, log_);
      signal_children(SIGUSR1);
    }
    respawn_due(now);
  }
  VIGIL_LOG(log_, kNotice, 0, "exit");
  return failed_ ? 1 : 0;
}

// A master with no worker serves nothing; when the last one of the current
// configuration could not start (its reason is in the log just above) and
// none is due to be respawned, idling would hide the failure: stop instead.
void Master::give_up_if_none_left() {
  for (const Child& c : children_) {
    if (!c.retiring && c.generation == cycle_->generation) return;
  }
  for (const Respawn& r : respawns_) {
    if (r.generation == cycle_->generation) return;
  }
  VIGIL_LOG(log_, kEmerg, 0,
            "no worker process is running: they exited with fatal code %d (see above), exiting",
            kWorkerFatal);
  failed_ = true;
  stop(/*graceful=*/false);
}

bool Master::anything_pending() const {
  const signals::Flags& f = signals::flags();
  return f.child || f.terminate || f.quit || f.reconfigure || f.reopen || f.change_binary ||
         f.noaccept || g_alarm;
}

void Master::arm_timer(std::int64_t now) {
  std::int64_t due = -1;
  for (const Respawn& r : respawns_) {
    if (due == -1 || r.due < due) due = r.due;
  }
  if (terminating_ && !killed_ && (due == -1 || kill_at_ < due)) due = kill_at_;
  itimerval it{};
  if (due != -1) {
    const std::int64_t ms = std::max<std::int64_t>(1, due - now);
    it.it_value.tv_sec = static_cast<time_t>(ms / 1000);
    it.it_value.tv_usec = static_cast<suseconds_t>((ms % 1000) * 1000);
  }
  if (::setitimer(ITIMER_REAL, &it, nullptr) == -1) {
    VIGIL_LOG(log_, kAlert, errno, "setitimer() failed");
  }
}

bool Master::use_accept_mutex() const {
  if (!event_conf(*cycle_->conf).accept_mutex || cycle_->workers < 2) return false;
  // Only shared sockets are taken in turns; reuseport ones belong to one worker.
  for (const ListenerEntry& e : cycle_->listeners.entries()) {
    if (e.worker == -1) return true;
  }
  return false;
}

int Master::take_slot() {
  for (std::size_t i = 0; i < kMaxWorkers; ++i) {
    if (!slot_used_[i]) {
      slot_used_[i] = true;
      return static_cast<int>(i);
    }
  }
  return -1;  // more live workers than slots: this one is not shown in /metrics
}

void Master::free_slot(int slot) {
  if (slot < 0) return;
  slot_used_[slot] = false;
  zone_->workers[slot].pid.store(0, std::memory_order_release);
}

void Master::spawn(int index) {
  const int slot = take_slot();
  if (slot >= 0) clear_slot(zone_->workers[slot], 0);
  const pid_t pid = ::fork();
  if (pid == -1) {
    VIGIL_LOG(log_, kAlert, errno, "fork() failed while spawning worker process %d", index);
    free_slot(slot);
    respawns_.push_back({index, cycle_->generation, now_ms() + kRespawnFirstDelayMs});
    return;
  }
  if (pid == 0) {
    WorkerContext ctx;
    ctx.cycle = cycle_.get();
    ctx.index = index;
    ctx.slot = slot;
    ctx.accept_mutex = use_accept_mutex() ? &accept_mutex_ : nullptr;
    ctx.forked = true;
    // _exit: the master's objects (pid file, zone, listeners) are not the
    // worker's to clean up.
    ::_exit(run_worker(ctx, log_));
  }
  if (slot >= 0) zone_->workers[slot].pid.store(pid, std::memory_order_release);
  children_.push_back({pid, index, slot, cycle_->generation, false, now_ms()});
  VIGIL_LOG(log_, kNotice, 0, "start worker process %d", static_cast<int>(pid));
}

void Master::reap() {
  for (;;) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid == 0) return;
    if (pid == -1) {
      if (errno == EINTR) continue;
      if (errno != ECHILD) VIGIL_LOG(log_, kAlert, errno, "waitpid() failed");
      return;
    }
    if (pid == new_binary_) {
      on_new_binary_exit(status);
      continue;
    }
    auto it = std::find_if(children_.begin(), children_.end(),
                           [pid](const Child& c) { return c.pid == pid; });
    if (it == children_.end()) continue;
    const Child child = *it;
    children_.erase(it);
    on_exit(child, status);
  }
}

void Master::on_exit(const Child& child, int status) {
  const int pid = static_cast<int>(child.pid);
  if (WIFSIGNALED(status)) {
    VIGIL_LOG(log_, kAlert, 0, "worker process %d exited on signal %d%s", pid, WTERMSIG(status),
              WCOREDUMP(status) ? " (core dumped)" : "");
  } else if (WEXITSTATUS(status) == 0) {
    VIGIL_LOG(log_, kNotice, 0, "worker process %d exited with code 0", pid);
  } else {
    VIGIL_LOG(log_, kAlert, 0, "worker process %d exited with code %d", pid, WEXITSTATUS(status));
  }
  // A worker killed between trylock and unlock leaves its pid in the lock
  // word; nobody could accept again (nginx's ngx_shmtx_force_unlock).
  if (accept_mutex_.force_unlock(child.pid)) {
    VIGIL_LOG(log_, kAlert, 0, "the accept mutex was held by exited worker process %d: unlocked",
              pid);
  }
  // The same for every shared zone's lock (nginx's ngx_unlock_mutexes). The
  // zone's data may be half updated; the lock at least is not lost.
  for (const std::string& zone : cycle_->conf->zones().force_unlock(child.pid)) {
    VIGIL_LOG(log_, kAlert, 0,
              "shared memory zone \"%s\" was locked by exited worker process %d: unlocked",
              zone.c_str(), pid);
  }
  free_slot(child.slot);

  if (child.retiring || quitting_ || terminating_ || child.generation != cycle_->generation) return;
  if (WIFEXITED(status) && WEXITSTATUS(status) == kWorkerFatal) {
    VIGIL_LOG(log_, kAlert, 0,
              "worker process %d exited with fatal code %d and cannot be respawned", pid,
              kWorkerFatal);
    give_up_if_none_left();
    return;
  }
  // Respawn at once, unless it keeps dying young: then wait 100 ms, 200 ms, ...
  // up to 10 s, so a crash at startup does not turn into a fork loop.
  const std::int64_t now = now_ms();
  int& streak = streak_[static_cast<std::size_t>(child.index)];
  streak = now - child.started < kYoungDeathMs ? streak + 1 : 0;
  if (streak <= 1) {
    spawn(child.index);
    return;
  }
  const int shift = std::min(streak - 2, 16);
  const std::int64_t delay = std::min(kRespawnFirstDelayMs << shift, kRespawnMaxDelayMs);
  VIGIL_LOG(log_, kWarn, 0,
            "worker process %d died %d times in a row within %lld ms of starting, "
            "respawning in %lld ms",
            child.index, streak, static_cast<long long>(kYoungDeathMs),
            static_cast<long long>(delay));
  respawns_.push_back({child.index, child.generation, now + delay});
}

void Master::respawn_due(std::int64_t now) {
  for (std::size_t i = 0; i < respawns_.size();) {
    if (respawns_[i].due > now) {
      ++i;
      continue;
    }
    const Respawn r = respawns_[i];
    respawns_.erase(respawns_.begin() + static_cast<std::ptrdiff_t>(i));
    if (r.generation == cycle_->generation && !quitting_ && !terminating_) spawn(r.index);
  }
}

void Master::signal_children(int signo) {
  for (const Child& c : children_) {
    if (::kill(c.pid, signo) == -1 && errno != ESRCH) {
      VIGIL_LOG(log_, kAlert, errno, "kill(%d, %d) failed", static_cast<int>(c.pid), signo);
    }
  }
}

void Master::stop(bool graceful) {
  if (terminating_ || (graceful && quitting_)) return;
  // An old master leaving after an upgrade is not the service stopping.
  if (new_binary_ == 0) tell_systemd("STOPPING=1");
  respawns_.clear();
  if (graceful) {
    quitting_ = true;
    VIGIL_LOG(log_, kNotice, 0, "gracefully shutting down");
    signal_children(SIGQUIT);
  } else {
    terminating_ = true;
    kill_at_ = now_ms() + kKillAfterMs;
    VIGIL_LOG(log_, kNotice, 0, "exiting");
    signal_children(SIGTERM);
  }
  for (Child& c : children_) c.retiring = true;
  // The workers hold their own copies; ours would only keep the sockets
  // accepting into queues nobody will read. The files of unix-domain
  // sockets go too, unless another master still uses them: the new binary
  // of an upgrade, or the old master of an upgrade given up (this process
  // is still its child).
  const bool shared = new_binary_ != 0 || (upgrade_parent_ != 0 && ::getppid() == upgrade_parent_);
  if (!shared) cycle_->listeners.remove_unix_files();
  cycle_->listeners.close_all();
}

void Master::reload() {
  VIGIL_LOG(log_, kNotice, 0, "reconfiguring");
  auto loaded = Configuration::load(options_);
  if (!loaded) {
    // The running configuration and workers stay as they are.
    VIGIL_LOG(log_, kEmerg, 0, "%s", loaded.status().message().c_str());
    return;
  }
  std::unique_ptr<Configuration> conf = std::move(loaded).value();
  const CoreConf& now = conf->core();
  const CoreConf& before = cycle_->conf->core();
  if (!now.master_process) {
    VIGIL_LOG(log_, kWarn, 0, "\"master_process\" cannot be changed by a reload, ignored");
  }
  const bool new_log = now.error_log != before.error_log ||
                       now.error_log_level != before.error_log_level ||
                       now.more_error_logs != before.more_error_logs;
  if (new_log) {
    if (Status s = open_error_logs(log_, now); !s) {
      VIGIL_LOG(log_, kEmerg, s.err(), "%s", s.message().c_str());
      return;
    }
  }
  for (const std::string& w : conf->warnings()) VIGIL_LOG(log_, kWarn, 0, "%s", w.c_str());
  auto made = make_cycle(std::move(conf), cycle_.get(), log_);
  if (!made) {
    if (new_log) {
      // Back to the running configuration's log, which the workers still use.
      if (Status s = open_error_logs(log_, before); !s) {
        VIGIL_LOG(log_, kAlert, s.err(), "%s", s.message().c_str());
      }
    }
    VIGIL_LOG(log_, kEmerg, made.status().err(), "%s", made.status().message().c_str());
    return;
  }
  std::unique_ptr<Cycle> old = std::exchange(cycle_, std::move(made).value());
  // What the new cycle did not take over is closed before the fork, so the
  // new workers do not inherit it; the old workers keep their copies until
  // they stop. A unix-domain socket not configured any more loses its file.
  old->listeners.remove_unix_files();
  old->listeners.close_all();

  const std::string& pid_path = cycle_->conf->core().pid_path;
  if (pid_path != pid_path_) {
    if (Status s = write_pid_file(pid_path, ::getpid()); !s) {
      VIGIL_LOG(log_, kAlert, s.err(), "%s", s.message().c_str());
    } else {
      remove_pid_file(pid_path_, ::getpid());
      pid_path_ = pid_path;
    }
  }

  std::vector<pid_t> old_workers;
  for (Child& c : children_) {
    if (!c.retiring) old_workers.push_back(c.pid);
    c.retiring = true;
  }
  respawns_.clear();
  streak_.assign(static_cast<std::size_t>(cycle_->workers), 0);
  prepare_worker_files(*cycle_, log_);
  // New workers first, then the old ones are told to finish: the sockets
  // never go unwatched.
  for (int i = 0; i < cycle_->workers; ++i) spawn(i);
  for (pid_t pid : old_workers) {
    if (::kill(pid, SIGQUIT) == -1 && errno != ESRCH) {
      VIGIL_LOG(log_, kAlert, errno, "kill(%d, SIGQUIT) failed", static_cast<int>(pid));
    }
  }
  VIGIL_LOG(log_, kNotice, 0, "reconfigured: %d worker processes started, %zu told to stop",
            cycle_->workers, old_workers.size());
}

}  // namespace master_detail

int run_master(std::unique_ptr<Cycle> cycle, const ConfLoadOptions& options, Log& log,
               bool upgraded) {
  master_detail::Master master(std::move(cycle), options, log, upgraded ? ::getppid() : 0);
  return master.run();
}

}  // namespace vigil
