// One worker's event loop: seed 001, 算法 1 (ngx_process_events_and_timers).
#include "vigil/event/loop.h"

#include <sys/timerfd.h>
#include <unistd.h>

#include <cerrno>

#include "vigil/core/log.h"
#include "event/udp.h"
#include "vigil/event/listening.h"

namespace vigil {

Result<std::unique_ptr<EventLoop>> EventLoop::create(const EventLoopConfig& cfg, Log& log) {
  std::unique_ptr<EventLoop> loop(new EventLoop());
  loop->cfg_ = cfg;
  loop->log_ = &log;
  clock::time_update();

  auto backend = make_backend(cfg.use);
  if (!backend) return backend.status();
  loop->backend_ = std::move(backend.value());
  loop->notify_event_.data = loop.get();
  loop->notify_event_.log = &log;

  BackendConfig bcfg;
  bcfg.connections = cfg.connections;
  bcfg.events = cfg.events;
  bcfg.kqueue_changes = cfg.kqueue_changes;
  bcfg.kqueue_events = cfg.kqueue_events;
  bcfg.timer_resolution = cfg.timer_resolution;
  if (Status s = loop->backend_->init(*loop, bcfg); !s) return s;
  loop->caps_ = loop->backend_->capabilities();

  if (Status s = loop->pool_.init(*loop, cfg.connections); !s) return s;

  // timer_resolution (seed 002, 9.7.2): the wait is unbounded and the time
  // is refreshed by this loop's own tick, which also ends the wait. kqueue
  // ticks by itself with an EVFILT_TIMER (seed 003, 1; kCapTimer).
  if (cfg.timer_resolution > 0 && !(loop->caps_ & kCapTimer)) {
    if (Status s = loop->start_tick(cfg.timer_resolution); !s) return s;
  }
  return loop;
}

Status EventLoop::start_tick(Msec resolution) {
  const int fd = ::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (fd == -1) return Status::sys("timerfd_create()");
  itimerspec its{};
  its.it_interval.tv_sec = static_cast<time_t>(resolution / 1000);
  its.it_interval.tv_nsec = static_cast<long>(resolution % 1000) * 1000000L;
  its.it_value = its.it_interval;
  if (::timerfd_settime(fd, 0, &its, nullptr) == -1) {
    const int err = errno;
    (void)::close(fd);
    return Status::sys("timerfd_settime()", err);
  }
  tick_conn_.fd = fd;
  tick_conn_.read = &tick_rev_;
  tick_conn_.write = &tick_wev_;
  tick_conn_.loop = this;
  tick_conn_.log = log_;
  tick_rev_.data = &tick_conn_;
  tick_rev_.log = log_;
  tick_rev_.handler = on_tick;
  tick_wev_.data = &tick_conn_;
  tick_wev_.write = 1;
  tick_wev_.log = log_;
  // Level-triggered where the backend has no edge mode: the handler reads
  // the expirations, so the next report is the next tick.
  if (Status s = backend_->add(tick_rev_, (caps_ & kCapClear) ? kEvClear : kEvLevel); !s) {
    (void)::close(fd);
    tick_conn_.fd = -1;
    return s;
  }
  return Status::ok();
}

void EventLoop::stop_tick() {
  if (tick_conn_.fd == -1) return;
  if (tick_rev_.active) (void)backend_->del(tick_rev_, 0);
  if (::close(tick_conn_.fd) == -1) VIGIL_LOG(*log_, kAlert, errno, "close() timerfd failed");
  tick_conn_.fd = -1;
}

void EventLoop::on_tick(Event& rev) {
  Connection& c = *rev.owner<Connection>();
  std::uint64_t expirations = 0;
  // EAGAIN: nothing more to read (a report already consumed); any other
  // failure leaves the tick armed, and the time is refreshed all the same.
  (void)!::read(c.fd, &expirations, sizeof expirations);
  clock::time_update();
  rev.ready = 0;
}

void EventLoop::publish(WorkerSlot& slot) {
  constexpr auto kRelaxed = std::memory_order_relaxed;
#define VIGIL_PUBLISH_LOOP(member, ...) slot.member.store(stats_.member, kRelaxed);
#define VIGIL_PUBLISH_POOL(member, ...) slot.member.store(pool_.member(), kRelaxed);
  VIGIL_WORKER_STATS(VIGIL_PUBLISH_LOOP, VIGIL_PUBLISH_POOL, VIGIL_STATS_SKIP)
#undef VIGIL_PUBLISH_LOOP
#undef VIGIL_PUBLISH_POOL
}

EventLoop::~EventLoop() {
  if (backend_) {
    stop_tick();
    backend_->done();
  }
}

Status EventLoop::handle_read_event(Event& rev, unsigned flags) {
  if (caps_ & kCapClear) {
    // Edge-triggered: register once; the kernel reports every new arrival.
    if (!rev.active && !rev.ready) return backend_->add(rev, kEvClear);
    return Status::ok();
  }
  // Level-triggered: registered only while we wait for it, or the loop would
  // be woken again and again by data the handler has not read yet.
  if (!rev.active && !rev.ready) return backend_->add(rev, kEvLevel);
  if (rev.active && (rev.ready || (flags & kEvClose))) return backend_->del(rev, kEvLevel | flags);
  return Status::ok();
}

Status EventLoop::handle_write_event(Event& wev, std::size_t /*lowat*/) {
  // Linux cannot change SO_SNDLOWAT, so the low-water mark is not passed on.
  if (caps_ & kCapClear) {
    if (!wev.active && !wev.ready) return backend_->add(wev, kEvClear);
    return Status::ok();
  }
  if (!wev.active && !wev.ready) return backend_->add(wev, kEvLevel);
  if (wev.active && wev.ready) return backend_->del(wev, kEvLevel);
  return Status::ok();
}

namespace {

// How a listening socket is registered: level-triggered, so a backlog (or
// datagrams) one pass left is reported again; shared TCP sockets with the
// accept flags (EPOLLEXCLUSIVE). A datagram socket wakes every worker that
// shares it, as nginx's does: each may hold sessions of its clients.
unsigned listening_flags(const Listening& ls, unsigned accept_flags) {
  return ls.reuseport || ls.type == SOCK_DGRAM ? kEvLevel : accept_flags;
}

}  // namespace

Status EventLoop::add_listening(Listening& ls) {
  Connection* c = pool_.get(ls.fd, ls.log ? *ls.log : *log_);
  if (c == nullptr) return Status::error("no free connection for listening socket " + ls.addr_text);
  c->listening = &ls;
  c->local_addr = reinterpret_cast<const sockaddr*>(&ls.addr);
  c->local_addrlen = ls.addrlen;
  ls.connection = c;
  Event& rev = *c->read;
  // A datagram socket has no accept: its read events are polled as any
  // other (no multishot accept), and event_recvmsg reads the datagrams.
  rev.accept = ls.type == SOCK_STREAM ? 1 : 0;
  rev.handler = ls.type == SOCK_STREAM ? event_accept : event_recvmsg;
  rev.deferred_accept = ls.deferred_accept ? 1 : 0;
  listening_.push_back(&ls);
  // With the accept mutex, only the holder registers shared listening sockets.
  if (accept_mutex_ != nullptr && !ls.reuseport) return Status::ok();
  Status s = backend_->add(rev, listening_flags(ls, accept_flags_));
  if (s && !ls.reuseport) accept_events_enabled_ = true;
  return s;
}

Status EventLoop::enable_accept_events() {
  for (Listening* ls : listening_) {
    Event& rev = *ls->connection->read;
    if (rev.active) continue;
    // Listening sockets stay level-triggered, as in nginx, so a backlog that
    // one pass did not empty is reported again.
    if (Status s = backend_->add(rev, listening_flags(*ls, accept_flags_)); !s) return s;
  }
  accept_events_enabled_ = true;
  return Status::ok();
}

Status EventLoop::disable_accept_events(bool all) {
  for (Listening* ls : listening_) {
    Event& rev = *ls->connection->read;
    if (!rev.active || (ls->reuseport && !all)) continue;
    if (Status s = backend_->del(rev, kEvLevel); !s) return s;
  }
  accept_events_enabled_ = false;
  return Status::ok();
}

void EventLoop::close_listening() {
  for (Listening* ls : listening_) {
    Connection* c = ls->connection;
    if (c == nullptr) continue;
    // Not kEvClose: the master and the other workers keep this socket open, so
    // our close() would not take it out of our epoll set (epoll(7)), and a
    // connection could still wake this exiting worker (with EPOLLEXCLUSIVE,
    // instead of one that would accept it).
    if (c->read->active) {
      if (Status s = backend_->del(*c->read, 0); !s) {
        VIGIL_LOG(*log_, kAlert, s.err(), "%s", s.message().c_str());
      }
    }
    // A UDP listener's sessions use its fd: they end before it closes.
    if (ls->type == SOCK_DGRAM) udp_close_sessions(*c);
    // Connections the kernel already accepted for us (io_uring's multishot
    // accept) are ours alone: serve them rather than drop them.
    for (int i = 0; i < 4096 && backend_->accepted_waiting(*c) > 0; ++i) {
      c->read->handler(*c->read);
    }
    pool_.close_connection(*c);
    ls->connection = nullptr;
    ls->fd = -1;  // closed with its connection
  }
  listening_.clear();
  accept_events_enabled_ = false;
  if (accept_mutex_held_) accept_mutex_->unlock();  // a no-op unless we hold it
  accept_mutex_held_ = false;
  accept_mutex_ = nullptr;
}

Status EventLoop::trylock_accept_mutex() {
  if (accept_mutex_->trylock()) {
    if (accept_mutex_held_ && accept_events_enabled_) return Status::ok();
    if (Status s = enable_accept_events(); !s) {
      accept_mutex_->unlock();
      return s;
    }
    accept_mutex_held_ = true;
    ++stats_.accept_mutex_acquired;
    return Status::ok();
  }
  if (accept_mutex_held_) {
    if (Status s = disable_accept_events(false); !s) return s;
    accept_mutex_held_ = false;
  }
  return Status::ok();
}

void EventLoop::process_events_and_timers() {
  Msec timer;
  unsigned flags;
  if (cfg_.timer_resolution > 0) {
    // The alarm interrupts the wait; the time is refreshed only then.
    timer = kTimerInfinite;
    flags = 0;
  } else {
    timer = timers_.find(clock::current_msec());
    flags = kProcUpdateTime;
  }

  // Events deferred to the next pass run in this one, and nothing may block.
  if (!posted_next_.empty()) {
    posted_next_.move_all_ready(posted_);
    timer = 0;
  }

  if (accept_mutex_ != nullptr) {
    if (accept_disabled > 0) {
      // Load balancing (seed 002, 9.8.3): a busy worker sits out a few rounds
      // and "no longer handles new connections". nginx leaves the listening
      // events of a previous hold registered here, so it keeps accepting
      // without the lock; we take them out, as the seed describes.
      --accept_disabled;
      if (accept_mutex_held_) {
        if (Status s = disable_accept_events(false); !s) {
          VIGIL_LOG(*log_, kAlert, s.err(), "accept mutex: %s", s.message().c_str());
        }
        accept_mutex_held_ = false;
      }
    } else {
      if (Status s = trylock_accept_mutex(); !s) {
        VIGIL_LOG(*log_, kAlert, s.err(), "accept mutex: %s", s.message().c_str());
        return;
      }
      if (accept_mutex_held_) {
        flags |= kProcPostEvents;  // accept first, release the lock, then the rest
      } else if (timer == kTimerInfinite || timer > cfg_.accept_mutex_delay) {
        timer = cfg_.accept_mutex_delay;
      }
    }
  }

  // With EPOLLEXCLUSIVE the kernel queues a new connection's event in every
  // busy worker it passes on the way to a sleeping one, so several may see it;
  // accepting before running the other handlers narrows the window in which
  // another worker takes it and our accept4() fails (EAGAIN), and accepts
  // sooner. (nginx posts only while it holds the accept mutex; measured in
  // docs/benchmarks-accept.md.)
  if (accept_mutex_ == nullptr && (accept_flags_ & kEvExclusive) && !listening_.empty()) {
    flags |= kProcPostEvents;
  }

  ++stats_.iterations;
  if (Status s = backend_->process_events(timer, flags); !s) {
    VIGIL_LOG(*log_, kAlert, s.err(), "%s: %s", backend_->name().data(), s.message().c_str());
  }

  stats_.posted_run += posted_accept_.process();
  if (accept_mutex_held_) accept_mutex_->unlock();
  stats_.timers_expired += timers_.expire(clock::current_msec());
  stats_.posted_run += posted_.process();
}

void EventLoop::run() {
  while (!stopping_) process_events_and_timers();
}

bool EventLoop::set_context(const void* key, void* value) {
  ContextSlot* free_slot = nullptr;
  for (auto& c : contexts_) {
    if (c.key == key) {
      if (value == nullptr) c.key = nullptr;
      c.value = value;
      return true;
    }
    if (c.key == nullptr && free_slot == nullptr) free_slot = &c;
  }
  if (value == nullptr) return true;
  if (free_slot == nullptr) return false;
  free_slot->key = key;
  free_slot->value = value;
  return true;
}

}  // namespace vigil
