// A worker process: nginx's ngx_worker_process_init and
// ngx_worker_process_cycle, around one EventLoop.
#include "server/worker.h"

#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <memory>
#include <string>

#include "core/core_module.h"
#include "core/fault.h"
#include "core/process/privileges.h"
#include "core/process/signals.h"
#include "event/event_conf.h"
#include "server/cycle.h"
#include "server/modules.h"
#include "vigil/core/log.h"
#include "vigil/event/connection.h"
#include "vigil/event/listening.h"
#include "vigil/event/loop.h"
#include "vigil/event/stats.h"
#include "vigil/version.h"

namespace vigil {

namespace {

// At most this many queued connections are taken when a worker stops
// listening (the backlog bounds it anyway).
constexpr int kMaxQueuedAccepts = 4096;
constexpr int kMaxCpus = 64;  // worker_cpu_affinity masks are 64 bits
// How long a connection that has not started a request may still start one
// once graceful shutdown began (see close_idle).
constexpr Msec kFreshIdleGrace = 500;

// The signal handlers' fallback way to wake this worker's loop when its
// backend has no wake fd (signals::set_wake_hook keeps the pointer for the
// life of the loop: the only process-wide pointer to it, because a signal
// handler can reach nothing else).
void wake_loop(void* loop) {
  (void)static_cast<EventLoop*>(loop)->backend().notify();
}

EventLoopConfig loop_config(const CoreConf& core, const EventConf& ev) {
  EventLoopConfig cfg;
  cfg.use = ev.use;
  cfg.connections = ev.connections;
  cfg.events = ev.epoll_events;
  cfg.kqueue_changes = ev.kqueue_changes;
  cfg.kqueue_events = ev.kqueue_events;
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
      return Status::sys("setrlimit(RLIMIT_NOFILE, " + std::to_string(core.worker_rlimit_nofile) +
                         ")");
    }
  }
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
      ev.connections > rl.rlim_cur) {
    VIGIL_LOG(log, kWarn, 0, "%zu worker_connections exceed open file resource limit: %lu",
              ev.connections, static_cast<unsigned long>(rl.rlim_cur));
  }
  return apply_rlimit_core(core);
}

// worker_cpu_affinity: "auto" gives worker i the i-th allowed CPU (wrapping);
// explicit masks are taken in order, the last one repeating. 0: leave it.
std::uint64_t affinity_mask(const CoreConf& core, int index) {
  if (core.cpu_affinity_auto) {
    std::uint64_t allowed = core.cpu_affinity.empty() ? 0 : core.cpu_affinity[0];
    if (allowed == 0) {
      cpu_set_t set;
      CPU_ZERO(&set);
      if (::sched_getaffinity(0, sizeof set, &set) == -1) return 0;
      for (int cpu = 0; cpu < kMaxCpus; ++cpu) {
        if (CPU_ISSET(cpu, &set)) allowed |= std::uint64_t{1} << cpu;
      }
    }
    const int n = std::popcount(allowed);
    if (n == 0) return 0;
    int pick = index % n;
    for (int cpu = 0; cpu < kMaxCpus; ++cpu) {
      if ((allowed & (std::uint64_t{1} << cpu)) && pick-- == 0) return std::uint64_t{1} << cpu;
    }
    return 0;
  }
  if (core.cpu_affinity.empty()) return 0;
  const std::size_t i =
      std::min<std::size_t>(static_cast<std::size_t>(index), core.cpu_affinity.size() - 1);
  return core.cpu_affinity[i];
}

// A failure is logged and the worker runs unpinned, as nginx does.
void set_cpu_affinity(const CoreConf& core, int index, Log& log) {
  const std::uint64_t mask = affinity_mask(core, index);
  if (mask == 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu = 0; cpu < kMaxCpus; ++cpu) {
    if (mask & (std::uint64_t{1} << cpu)) CPU_SET(cpu, &set);
  }
  const auto shown = static_cast<unsigned long long>(mask);
  if (::sched_setaffinity(0, sizeof set, &set) == -1) {
    VIGIL_LOG(log, kAlert, errno, "sched_setaffinity(0x%llx) failed", shown);
    return;
  }
  VIGIL_LOG(log, kNotice, 0, "sched_setaffinity(0x%llx)", shown);
}

// The loop's figures into this worker's shared slot: relaxed stores, once per
// pass, so /metrics sees them within one pass and nobody waits.
void publish(WorkerSlot& slot, EventLoop& loop) {
  loop.publish(slot);
}

// Connections this worker is still serving (listening sockets excluded once
// they are closed).
std::size_t busy_connections(EventLoop& loop) {
  return loop.pool().size() - loop.pool().free_count();
}

// worker_shutdown_timeout expired (nginx's ngx_shutdown_timer_handler): every
// connection still open is told to close, and closed if its owner does not.
void on_shutdown_timeout(Event& ev) {
  EventLoop& loop = *ev.owner<EventLoop>();
  ConnectionPool& pool = loop.pool();
  VIGIL_LOG(loop.log(), kNotice, 0, "worker_shutdown_timeout: closing %zu connections",
            busy_connections(loop));
  Connection* conns = pool.connections();
  for (std::size_t i = 0; i < pool.size(); ++i) {
    Connection& c = conns[i];
    if (c.fd == -1 || c.read->accept) continue;
    c.close = 1;
    c.error = 1;
    if (c.read->handler != nullptr) c.read->handler(*c.read);
    if (c.fd != -1) pool.close_connection(c);
  }
}

// Graceful shutdown closes idle connections (nginx's ngx_close_idle_connections)
// in two steps. Those that served a request (idle keep-alive) go at once. One
// that has not started its first request may have been accepted a moment ago
// with the request on its way: closing it would reset a client that did
// nothing wrong, so it gets kFreshIdleGrace to start one (the protocol then
// takes it off the reusable list), and only then `fresh_too` closes it.
void close_idle(EventLoop& loop, bool fresh_too) {
  ConnectionPool& pool = loop.pool();
  if (pool.reusable_count() == 0) return;
  if (fresh_too) {
    pool.close_idle();
    return;
  }
  Connection* conns = pool.connections();
  for (std::size_t i = 0; i < pool.size(); ++i) {
    Connection& c = conns[i];
    if (c.fd == -1 || !c.reusable || c.requests == 0) continue;
    // As ConnectionPool::drain: the owner closes it when its handler sees `close`.
    pool.reusable(c, false);
    c.close = 1;
    if (c.read->handler != nullptr) c.read->handler(*c.read);
    if (c.fd != -1 && c.close) pool.close_connection(c);
  }
}

void on_fresh_grace_over(Event& ev) {
  close_idle(*ev.owner<EventLoop>(), /*fresh_too=*/true);
}

// Before a worker stops listening it accepts what is already queued. With
// EPOLLEXCLUSIVE the kernel may have woken this worker alone for those
// connections, and no other worker would hear of them before the next one
// arrives; a reuseport socket closed for good would reset them.
void accept_queued(EventLoop& loop) {
  for (Listening* ls : loop.listening()) {
    Connection* lc = ls->connection;
    for (int i = 0; i < kMaxQueuedAccepts && lc->fd != -1; ++i) {
      pollfd p{lc->fd, POLLIN, 0};
      if (::poll(&p, 1, 0) != 1 || !(p.revents & POLLIN)) break;
      const std::uint64_t before = loop.stats().accepted;
      lc->read->handler(*lc->read);
      if (loop.stats().accepted == before) break;  // another worker took it, or EMFILE
    }
  }
}

const char* accept_mode(const EventLoop& loop, const Cycle& cycle) {
  bool reuseport = false;
  for (const ListenerEntry& e : cycle.listeners.entries()) reuseport |= e.worker != -1;
  if (loop.accept_mutex() != nullptr) return reuseport ? "accept_mutex, reuseport" : "accept_mutex";
  if (loop.accept_flags() & kEvExclusive)
    return reuseport ? "EPOLLEXCLUSIVE, reuseport" : "EPOLLEXCLUSIVE";
  return reuseport ? "reuseport" : "shared";
}

}  // namespace

int run_worker(const WorkerContext& ctx, Log& log) {
  Cycle& cycle = *ctx.cycle;
  const Configuration& conf = *cycle.conf;
  const CoreConf& core = conf.core();
  const EventConf& ev = event_conf(conf);
  signals::Flags& flags = signals::flags();

  if (ctx.forked) {
    // Copied from the master at fork, which may be in the middle of a reload.
    flags.terminate = 0;
    flags.quit = 0;
    flags.reconfigure = 0;
    flags.reopen = 0;
    flags.child = 0;
    flags.change_binary = 0;  // USR2 and WINCH are the master's alone
    flags.noaccept = 0;
    cycle.listeners.close_others(ctx.index);
  }
  if (Status s = set_rlimits(core, ev, log); !s) {
    VIGIL_LOG(log, kEmerg, s.err(), "%s", s.message().c_str());
    return kWorkerFatal;
  }
  if (ctx.forked) set_cpu_affinity(core, ctx.index, log);

  auto created = EventLoop::create(loop_config(core, ev), log);
  if (!created) {
    VIGIL_LOG(log, kEmerg, created.status().err(), "%s", created.status().message().c_str());
    return kWorkerFatal;
  }
  std::unique_ptr<EventLoop> loop = std::move(created).value();
  if (ctx.accept_mutex != nullptr) {
    loop->set_accept_mutex(ctx.accept_mutex);
  } else if (cycle.workers > 1 && (loop->capabilities() & kCapExclusive)) {
    // Without the accept mutex, a shared socket wakes one worker per
    // connection instead of all of them (nginx does this by default too).
    loop->set_accept_flags(kEvExclusive);
  }
  for (Listening* ls : cycle.listeners.for_worker(ctx.index)) {
    if (Status s = loop->add_listening(*ls); !s) {
      VIGIL_LOG(log, kEmerg, s.err(), "%s", s.message().c_str());
      return kWorkerFatal;
    }
  }
  for (const ServerModule& p : server_modules()) {
    if (p.init_worker == nullptr) continue;
    if (Status s = p.init_worker(conf, *loop, ctx.index); !s) {
      VIGIL_LOG(log, kEmerg, s.err(), "%s: %s", p.name, s.message().c_str());
      return kWorkerFatal;
    }
  }
  // Everything that needs root is open now (sockets came from the master,
  // access logs were opened by init_worker): give it up. A single process
  // (master_process off) keeps its credentials, as nginx's does.
  if (ctx.forked) {
    if (Status s = drop_privileges(core); !s) {
      VIGIL_LOG(log, kEmerg, s.err(), "%s", s.message().c_str());
      return kWorkerFatal;
    }
  }

  WorkerSlot* slot = ctx.slot >= 0 && static_cast<std::size_t>(ctx.slot) < kMaxWorkers
                         ? &worker_slots()[ctx.slot]
                         : nullptr;
  if (slot != nullptr) {
    slot->pid.store(::getpid(), std::memory_order_relaxed);
    publish(*slot, *loop);
  }

  signals::set_wake_hook(wake_loop, loop.get());
  signals::set_wake_fd(loop->backend().wake_fd());  // preferred by the handlers
  if (ctx.forked) {
    // The master blocks its signals outside sigsuspend(); the mask was
    // inherited. From here a signal wakes the loop through the hook.
    sigset_t none;
    sigemptyset(&none);
    if (::sigprocmask(SIG_SETMASK, &none, nullptr) == -1) {
      VIGIL_LOG(log, kAlert, errno, "sigprocmask() failed");
    }
    VIGIL_LOG(log, kNotice, 0, "worker process %d running: %s backend, %zu worker_connections, %s",
              ctx.index, std::string(loop->backend().name()).c_str(), ev.connections,
              accept_mode(*loop, cycle));
  } else {
    VIGIL_LOG(log, kNotice, 0, "vigil/%s started, pid %d, %s backend, %zu worker_connections",
              VIGIL_VERSION_STRING, static_cast<int>(::getpid()),
              std::string(loop->backend().name()).c_str(), ev.connections);
    if (loop->listening().empty()) {
      VIGIL_LOG(log, kNotice, 0, "no listening sockets are configured");
    }
  }

  fault::arm(log);  // tests only (VIGIL_FAULT_INJECTION): start-up never fails
  bool exiting = false;
  Event shutdown_timer;
  shutdown_timer.data = loop.get();
  shutdown_timer.handler = on_shutdown_timeout;
  shutdown_timer.log = &log;
  shutdown_timer.cancelable = 1;  // it must not itself keep the worker alive
  Event fresh_grace;
  fresh_grace.data = loop.get();
  fresh_grace.handler = on_fresh_grace_over;
  fresh_grace.log = &log;
  fresh_grace.cancelable = 1;

  for (;;) {
    loop->process_events_and_timers();
    if (slot != nullptr) publish(*slot, *loop);

    if (flags.terminate) {
      VIGIL_LOG(log, kNotice, 0, "exiting");
      break;
    }
    if (flags.quit && !exiting) {
      exiting = true;
      loop->set_exiting();
      VIGIL_LOG(log, kNotice, 0, "gracefully shutting down");
      accept_queued(*loop);
      loop->close_listening();
      for (const ServerModule& p : server_modules()) {
        if (p.begin_shutdown != nullptr) p.begin_shutdown(*loop);
      }
      if (core.worker_shutdown_timeout > 0) {
        loop->add_timer(shutdown_timer, core.worker_shutdown_timeout);
      }
      loop->add_timer(fresh_grace, kFreshIdleGrace);
    }
    if (exiting) {
      // Idle connections do not hold the worker (fresh ones after a grace);
      // requests in flight do, through their non-cancelable timers and open
      // connections.
      close_idle(*loop, /*fresh_too=*/!fresh_grace.timer_set);
      if (loop->timers().no_timers_left() && busy_connections(*loop) == 0) {
        VIGIL_LOG(log, kNotice, 0, "exit");
        break;
      }
    }
    if (flags.reopen) {
      flags.reopen = 0;
      VIGIL_LOG(log, kNotice, 0, "reopening logs");
      if (Status s = log.reopen(); !s) VIGIL_LOG(log, kAlert, s.err(), "%s", s.message().c_str());
      if (Status s = cycle.conf->error_logs().reopen(); !s) {
        VIGIL_LOG(log, kAlert, s.err(), "%s", s.message().c_str());
      }
      for (const ServerModule& p : server_modules()) {
        if (p.reopen_logs != nullptr) p.reopen_logs(*loop);
      }
    }
    if (flags.reconfigure) {
      flags.reconfigure = 0;
      if (!ctx.forked) {
        VIGIL_LOG(log, kNotice, 0, "reload needs master_process; ignoring SIGHUP");
      }
    }
  }

  loop->del_timer(shutdown_timer);
  loop->del_timer(fresh_grace);
  for (const ServerModule& p : server_modules()) {
    if (p.exit_worker != nullptr) p.exit_worker(*loop);
  }
  if (slot != nullptr) publish(*slot, *loop);
  signals::set_wake_fd(-1);
  signals::set_wake_hook(nullptr);
  return 0;
}

}  // namespace vigil
