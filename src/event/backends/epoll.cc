#include "event/backends/epoll.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <new>
#include <string>

#include "core/fault.h"
#include "event/backends/dispatch.h"
#include "vigil/core/clock.h"
#include "vigil/event/connection.h"
#include "vigil/event/loop.h"

namespace vigil::backends {

namespace {

constexpr std::uint32_t kReadBits = EPOLLIN | EPOLLRDHUP;
constexpr std::uint32_t kWriteBits = EPOLLOUT;

const char* op_name(int op) {
  switch (op) {
    case EPOLL_CTL_ADD:
      return "EPOLL_CTL_ADD";
    case EPOLL_CTL_MOD:
      return "EPOLL_CTL_MOD";
    default:
      return "EPOLL_CTL_DEL";
  }
}

// poll(2)-style timeout from the loop's timer: -1 blocks, larger values clamp.
int wait_timeout(Msec timer) {
  if (timer == kTimerInfinite) return -1;
  return static_cast<int>(std::min<Msec>(timer, INT_MAX));
}

}  // namespace

unsigned EpollBackend::capabilities() const {
  unsigned caps = kCapClear | kCapEpoll;
#ifdef EPOLLEXCLUSIVE
  caps |= kCapExclusive;
#endif
  return caps;
}

Status EpollBackend::init(EventLoop& loop, const BackendConfig& cfg) {
  done();  // init twice (a reload) starts from scratch
  loop_ = &loop;
  ep_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (ep_ == -1) return Status::sys("epoll_create1()");

  // The list epoll_wait fills: allocated once here, so process_events never
  // allocates (seed 000, ngx_epoll_init's event_list).
  nevents_ =
      static_cast<int>(std::clamp<std::size_t>(cfg.events, 1, INT_MAX / sizeof(epoll_event)));
  list_.reset(new (std::nothrow) epoll_event[static_cast<std::size_t>(nevents_)]);
  if (!list_) {
    done();
    return Status::error("cannot allocate the epoll event list", ENOMEM);
  }

  Status st = notify_.open();
  if (st) st = ctl(EPOLL_CTL_ADD, notify_.fd(), EPOLLIN, tag_connection(&notify_.connection(), 0));
  if (!st) {
    done();
    return st;
  }
  return Status::ok();
}

void EpollBackend::done() {
  notify_.close();
  if (ep_ != -1) {
    ::close(ep_);
    ep_ = -1;
  }
  list_.reset();
  nevents_ = 0;
  loop_ = nullptr;
}

Status EpollBackend::ctl(int op, int fd, std::uint32_t events, std::uint64_t tag, bool may_fail) {
  epoll_event ee{};
  ee.events = events;
  ee.data.u64 = tag;
  if ((may_fail ? VIGIL_FAULT(fault::kEpollCtl, ENOMEM, ::epoll_ctl(ep_, op, fd, &ee))
                : ::epoll_ctl(ep_, op, fd, &ee)) == -1) {
    const int err = errno;  // saved before the message allocates
    return Status::sys(std::string("epoll_ctl(") + op_name(op) + ", " + std::to_string(fd) + ")",
                       err);
  }
  return Status::ok();
}

Status EpollBackend::add(Event& ev, unsigned flags) {
  auto* c = ev.owner<Connection>();
  Event* other = ev.write ? c->read : c->write;
  std::uint32_t events = ev.write ? kWriteBits : kReadBits;
  const std::uint32_t prev = ev.write ? kReadBits : kWriteBits;

  // One epoll item per fd: when the other direction is registered, this is a
  // MOD that keeps its bits (seed 001, ngx_epoll_add_event).
  int op = EPOLL_CTL_ADD;
  if (other != nullptr && other->active) {
    op = EPOLL_CTL_MOD;
    events |= prev;
  } else if (ev.active) {
    op = EPOLL_CTL_MOD;  // already registered: change its flags in place
  }
  if (flags & kEvClear) events |= EPOLLET;
#ifdef EPOLLEXCLUSIVE
  // epoll_ctl(2): EPOLLEXCLUSIVE only with EPOLL_CTL_ADD and only together with
  // EPOLLIN/EPOLLOUT/EPOLLET/EPOLLWAKEUP, hence no EPOLLRDHUP. It is meant for
  // listening sockets, which are read-only.
  if ((flags & kEvExclusive) && op == EPOLL_CTL_ADD && !ev.write) {
    events = (events & ~EPOLLRDHUP) | EPOLLEXCLUSIVE;
  }
#endif

  if (!taggable(c)) return Status::error("epoll: connection address does not fit the event tag");
  Status st = ctl(op, c->fd, events, tag_connection(c, c->generation), /*may_fail=*/!ev.accept);
  if (!st) return st;
  ev.active = 1;
  return Status::ok();
}

Status EpollBackend::del(Event& ev, unsigned flags) {
  // Closing the fd removes it from every epoll set (epoll(7)), so a del just
  // before close() only forgets the registration: one syscall saved per close.
  if ((flags & kEvClose) || !ev.active) {
    ev.active = 0;
    return Status::ok();
  }
  ev.active = 0;

  auto* c = ev.owner<Connection>();
  Event* other = ev.write ? c->read : c->write;
  if (other != nullptr && other->active) {
    std::uint32_t events = ev.write ? kReadBits : kWriteBits;
    if (flags & kEvClear) events |= EPOLLET;
    return ctl(EPOLL_CTL_MOD, c->fd, events, tag_connection(c, c->generation));
  }
  return ctl(EPOLL_CTL_DEL, c->fd, 0, 0);
}

Status EpollBackend::add_conn(Connection& c) {
  if (!taggable(&c)) return Status::error("epoll: connection address does not fit the event tag");
  Status st = ctl(EPOLL_CTL_ADD, c.fd, EPOLLIN | EPOLLOUT | EPOLLET | EPOLLRDHUP,
                  tag_connection(&c, c.generation), /*may_fail=*/true);
  if (!st) return st;
  c.read->active = 1;
  c.write->active = 1;
  return Status::ok();
}

Status EpollBackend::del_conn(Connection& c, unsigned flags) {
  const bool registered = c.read->active || c.write->active;
  c.read->active = 0;
  c.write->active = 0;
  if ((flags & kEvClose) || !registered) return Status::ok();
  return ctl(EPOLL_CTL_DEL, c.fd, 0, 0);
}

Status EpollBackend::notify() {
  return notify_.signal();
}

Status EpollBackend::process_events(Msec timer, unsigned flags) {
  const int n = ::epoll_wait(ep_, list_.get(), nevents_, wait_timeout(timer));
  const int err = n == -1 ? errno : 0;

  // The time is refreshed even when the wait failed or was interrupted: the
  // caller computes timers from it (seed 001, ngx_epoll_process_events).
  if (flags & kProcUpdateTime) clock::time_update();

  if (err != 0) {
    if (err == EINTR) return Status::ok();
    return Status::sys("epoll_wait()", err);
  }

  LoopStats& stats = loop_->stats();
  if (n == 0) {
    ++stats.empty_waits;
    if (timer != kTimerInfinite) return Status::ok();
    return Status::error("epoll_wait() returned no events without timeout");
  }
  stats.events += static_cast<std::uint64_t>(n);

  for (int i = 0; i < n; ++i) {
    const std::uint64_t tag = list_[i].data.u64;
    auto* c = tag_target<Connection>(tag);
    std::uint32_t revents = list_[i].events;

    if (notify_.is(c)) {
      notify_.fire(*loop_);
      continue;
    }

    // An error or hang-up is delivered to both directions: the handlers then
    // meet it in their next recv()/send() and close (nginx does the same).
    if (revents & (EPOLLERR | EPOLLHUP)) revents |= EPOLLIN | EPOLLOUT;

    deliver_conn(*loop_, *c, tag_generation(tag), (revents & EPOLLIN) != 0,
                 (revents & EPOLLOUT) != 0, (revents & EPOLLRDHUP) != 0, flags, kTagGenerationMask);
  }
  return Status::ok();
}

}  // namespace vigil::backends
