#include "event/backends/kqueue.h"

#include <fcntl.h>
#if VIGIL_KQUEUE_EMULATED
#include <poll.h>
#endif
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <new>
#include <string>
#include <type_traits>
#include <utility>

#include "event/backends/dispatch.h"
#include "vigil/core/clock.h"
#include "vigil/core/log.h"
#include "vigil/event/connection.h"
#include "vigil/event/loop.h"

namespace vigil::backends {

namespace {

static_assert(sizeof(void*) == 8, "the kqueue backend carries a 64-bit tag in udata");

// Idents of the registrations that are not descriptors (their filters have
// name spaces of their own).
constexpr uintptr_t kUserIdent = 0;
constexpr uintptr_t kTimerIdent = 0;
// udata of the wake pipe; a connection's tag is never 0 (it holds its address).
constexpr std::uint64_t kWakeTag = 0;

// udata is void* on FreeBSD, macOS and libkqueue, intptr_t on NetBSD.
using Udata = decltype(std::declval<struct kevent>().udata);

// Templates, so that the branch for the other type is discarded.
template <class U = Udata>
U to_udata(std::uint64_t tag) {
  if constexpr (std::is_pointer_v<U>) {
    return reinterpret_cast<U>(static_cast<std::uintptr_t>(tag));
  } else {
    return static_cast<U>(tag);
  }
}

template <class U = Udata>
std::uint64_t from_udata(U u) {
  if constexpr (std::is_pointer_v<U>) {
    return reinterpret_cast<std::uintptr_t>(u);
  } else {
    return static_cast<std::uint64_t>(u);
  }
}

void set_change(struct kevent* kev, uintptr_t ident, short filter, unsigned short flags,
                unsigned fflags, std::intptr_t data, std::uint64_t tag) {
  *kev = {};
  kev->ident = ident;
  kev->filter = filter;
  kev->flags = flags;
  kev->fflags = fflags;
  kev->data = data;
  kev->udata = to_udata(tag);
}

bool set_nonblock_cloexec(int fd) {
  const int fl = ::fcntl(fd, F_GETFL);
  if (fl == -1 || ::fcntl(fd, F_SETFL, fl | O_NONBLOCK) == -1) return false;
  return ::fcntl(fd, F_SETFD, FD_CLOEXEC) != -1;
}

#if VIGIL_KQUEUE_EMULATED
// Whether the peer's FIN has arrived (Linux's POLLRDHUP).
bool peer_closed(int fd) {
  pollfd p{fd, POLLRDHUP, 0};
  int n;
  do {
    n = ::poll(&p, 1, 0);
  } while (n == -1 && errno == EINTR);
  return n == 1 && (p.revents & (POLLRDHUP | POLLHUP)) != 0;
}
#endif

template <class T>
std::unique_ptr<T[]> make_array(int n) {
  return std::unique_ptr<T[]>(new (std::nothrow) T[static_cast<std::size_t>(n)]());
}

}  // namespace

unsigned KqueueBackend::capabilities() const {
  return kCapClear | (timer_event_ ? kCapTimer : 0u);
}

Status KqueueBackend::init(EventLoop& loop, const BackendConfig& cfg) {
  done();  // init twice (a reload) starts from scratch
  loop_ = &loop;

  // Seed 003, 1: the queue itself.
  kq_ = ::kqueue();
  if (kq_ == -1) return Status::sys("kqueue()");
  // A kernel kqueue is not inherited by fork(2) anyway; libkqueue's is a
  // plain descriptor, kept from exec'd programs.
  if (::fcntl(kq_, F_SETFD, FD_CLOEXEC) == -1) {
    const int err = errno;
    done();
    return Status::sys("fcntl(kqueue, FD_CLOEXEC)", err);
  }

  // Both lists are allocated once here, so process_events never allocates.
  constexpr std::size_t kMax = INT_MAX / sizeof(struct kevent);
  max_changes_ = static_cast<int>(std::clamp<std::size_t>(cfg.kqueue_changes, 1, kMax));
  nevents_ = static_cast<int>(std::clamp<std::size_t>(cfg.kqueue_events, 1, kMax));
  changes_ = make_array<struct kevent>(max_changes_);
  change_was_active_ = make_array<bool>(max_changes_);
  receipts_ = make_array<struct kevent>(max_changes_);
  events_ = make_array<struct kevent>(nevents_);
  if (!changes_ || !change_was_active_ || !receipts_ || !events_) {
    done();
    return Status::error("cannot allocate the kqueue change and event lists", ENOMEM);
  }

  if (::pipe(wake_) == -1) {
    const int err = errno;
    done();
    return Status::sys("pipe() for the kqueue wake-up", err);
  }
  if (!set_nonblock_cloexec(wake_[0]) || !set_nonblock_cloexec(wake_[1])) {
    const int err = errno;
    done();
    return Status::sys("fcntl() on the kqueue wake-up pipe", err);
  }

  // The registrations that live as long as the queue, submitted at once with
  // a receipt each, so a refusal is an error of init.
  struct kevent init[3];
  int n = 0;
  set_change(&init[n++], static_cast<uintptr_t>(wake_[0]), EVFILT_READ,
             EV_ADD | EV_CLEAR | EV_RECEIPT, 0, 0, kWakeTag);
#ifdef EVFILT_USER
  set_change(&init[n++], kUserIdent, EVFILT_USER, EV_ADD | EV_CLEAR | EV_RECEIPT, 0, 0, 0);
#endif
  const bool want_timer = cfg.timer_resolution > 0;
  if (want_timer) {
    // Seed 003, 1: the timer_resolution tick (data in milliseconds).
    set_change(&init[n++], kTimerIdent, EVFILT_TIMER, EV_ADD | EV_ENABLE | EV_RECEIPT, 0,
               static_cast<std::intptr_t>(std::min<Msec>(cfg.timer_resolution, INT_MAX)), 0);
  }
  struct kevent out[3];
  const timespec zero{};
  const int r = ::kevent(kq_, init, n, out, n, &zero);
  if (r == -1) {
    const int err = errno;
    done();
    return Status::sys("kevent() registering the wake-up and timer", err);
  }
  for (int i = 0; i < r; ++i) {
    if ((out[i].flags & EV_ERROR) && out[i].data != 0) {
      const int err = static_cast<int>(out[i].data);
      const short filter = out[i].filter;
      done();
      return Status::sys("kevent(" + std::string(filter == EVFILT_TIMER ? "EVFILT_TIMER"
                                                 : filter == EVFILT_READ ? "EVFILT_READ"
                                                                         : "EVFILT_USER") +
                             ")",
                         err);
    }
  }
  if (r != n) {
    done();
    return Status::error("kevent() returned " + std::to_string(r) + " receipts for " +
                         std::to_string(n) + " registrations");
  }
  timer_event_ = want_timer;
  return Status::ok();
}

void KqueueBackend::done() {
  for (int& fd : wake_) {
    if (fd != -1) ::close(fd);  // nothing useful to do on failure
    fd = -1;
  }
  if (kq_ != -1) {
    ::close(kq_);
    kq_ = -1;
  }
  changes_.reset();
  change_was_active_.reset();
  receipts_.reset();
  events_.reset();
  nchanges_ = max_changes_ = nevents_ = 0;
  timer_event_ = false;
  loop_ = nullptr;
}

Status KqueueBackend::flush_changes() {
  if (nchanges_ == 0) return Status::ok();
  // EV_RECEIPT on every change and a result list exactly as long: kevent()
  // answers each change and has no room left to hand out a ready event, which
  // with EV_CLEAR would be lost (kevent(2), EV_RECEIPT).
  for (int i = 0; i < nchanges_; ++i) changes_[i].flags |= EV_RECEIPT;
  const int count = nchanges_;
  nchanges_ = 0;
  const timespec zero{};
  const int n = ::kevent(kq_, changes_.get(), count, receipts_.get(), count, &zero);
  if (n == -1) return Status::sys("kevent() flushing " + std::to_string(count) + " changes");
  for (int i = 0; i < n; ++i) {
    if ((receipts_[i].flags & EV_ERROR) && receipts_[i].data != 0) {
      // Inside add() or del(): another handler must not run from here, so a
      // connection that lost its registration is posted.
      change_failed(receipts_[i], kProcPostEvents);
    }
  }
  return Status::ok();
}

Status KqueueBackend::queue_change(Event& ev, int fd, short filter, unsigned short kflags,
                                   bool was_active) {
  if (nchanges_ >= max_changes_) {
    // Seed 003, 2.1: the list is full; submit it now and start over.
    VIGIL_LOG(loop_->log(), kWarn, 0, "kqueue change list is filled up");
    if (Status st = flush_changes(); !st) return st;
  }
  auto* c = ev.owner<Connection>();
  const int i = nchanges_++;
  set_change(&changes_[i], static_cast<uintptr_t>(fd), filter, kflags, 0, 0,
             tag_connection(c, c->generation));
  change_was_active_[i] = was_active;
  ev.index = static_cast<std::uint32_t>(i);
  return Status::ok();
}

bool KqueueBackend::unqueue_change(Event& ev) {
  auto* c = ev.owner<Connection>();
  const std::uint32_t i = ev.index;
  if (i >= static_cast<std::uint32_t>(nchanges_)) return false;
  const struct kevent& kev = changes_[i];
  const short filter = ev.write ? EVFILT_WRITE : EVFILT_READ;
  if (kev.filter != filter || from_udata(kev.udata) != tag_connection(c, c->generation)) {
    return false;  // the slot holds another change since the list was last submitted
  }
  const bool kernel_never_saw_it = !change_was_active_[i];
  // Seed 003, 2.3: the last change fills the hole.
  const int last = --nchanges_;
  if (static_cast<int>(i) < last) {
    changes_[i] = changes_[last];
    change_was_active_[i] = change_was_active_[last];
    auto* moved = tag_target<Connection>(from_udata(changes_[i].udata));
    (changes_[i].filter == EVFILT_WRITE ? moved->write : moved->read)->index = i;
  }
  ev.index = Event::kNoIndex;
  return kernel_never_saw_it;
}

Status KqueueBackend::add(Event& ev, unsigned flags) {
  auto* c = ev.owner<Connection>();
  if (!taggable(c)) return Status::error("kqueue: connection address does not fit the event tag");
  const short filter = ev.write ? EVFILT_WRITE : EVFILT_READ;
  unsigned short kflags = EV_ADD | EV_ENABLE;
  if (flags & kEvClear) kflags |= EV_CLEAR;

  // Registered but not yet submitted: change the pending entry in place.
  const std::uint32_t i = ev.index;
  if (ev.active && i < static_cast<std::uint32_t>(nchanges_) && changes_[i].filter == filter &&
      from_udata(changes_[i].udata) == tag_connection(c, c->generation)) {
    changes_[i].flags = kflags;
    return Status::ok();
  }
  if (Status st = queue_change(ev, c->fd, filter, kflags, ev.active); !st) return st;
  ev.active = 1;
  return Status::ok();
}

Status KqueueBackend::del_one(Event& ev, unsigned flags) {
  if (!ev.active) return Status::ok();
  ev.active = 0;
  if (unqueue_change(ev)) return Status::ok();  // the kernel never saw it
  // Closing the descriptor removes its registrations (kqueue(2)); libkqueue
  // keeps them, so there the delete is sent.
  if ((flags & kEvClose) && !emulated()) return Status::ok();
  auto* c = ev.owner<Connection>();
  return queue_change(ev, c->fd, ev.write ? EVFILT_WRITE : EVFILT_READ, EV_DELETE, false);
}

Status KqueueBackend::del(Event& ev, unsigned flags) {
  const int before = nchanges_;
  if (Status st = del_one(ev, flags); !st) return st;
  // libkqueue: a delete waits for nothing, as the descriptor may be closed
  // before the next wait and its number reused.
  if (emulated() && nchanges_ > before) return flush_changes();
  return Status::ok();
}

Status KqueueBackend::add_conn(Connection& c) {
  if (Status st = add(*c.read, kEvClear); !st) return st;
  return add(*c.write, kEvClear);
}

Status KqueueBackend::del_conn(Connection& c, unsigned flags) {
  const int before = nchanges_;
  Status st = del_one(*c.read, flags);
  if (Status st2 = del_one(*c.write, flags); st && !st2) st = std::move(st2);
  if (emulated() && nchanges_ > before) {
    if (Status st3 = flush_changes(); st && !st3) st = std::move(st3);
  }
  return st;
}

Status KqueueBackend::notify() {
#ifdef EVFILT_USER
  struct kevent kev;
  set_change(&kev, kUserIdent, EVFILT_USER, 0, NOTE_TRIGGER, 0, 0);
  if (::kevent(kq_, &kev, 1, nullptr, 0, nullptr) == -1) {
    return Status::sys("kevent(EVFILT_USER, NOTE_TRIGGER)");
  }
  return Status::ok();
#else
  const char one = 1;
  for (;;) {
    if (::write(wake_[1], &one, 1) == 1) return Status::ok();
    if (errno == EINTR) continue;
    if (errno == EAGAIN) return Status::ok();  // full: a wake-up is pending already
    return Status::sys("write() to the kqueue wake-up pipe");
  }
#endif
}

void KqueueBackend::drain_wake_pipe() {
  char buf[64];
  for (;;) {
    const ssize_t n = ::read(wake_[0], buf, sizeof buf);
    if (n > 0) continue;
    if (n == -1 && errno == EINTR) continue;
    if (n == -1 && errno != EAGAIN) {
      VIGIL_LOG(loop_->log(), kAlert, errno, "read() from the kqueue wake-up pipe failed");
    }
    return;
  }
}

void KqueueBackend::change_failed(const struct kevent& kev, unsigned flags) {
  const int err = static_cast<int>(kev.data);
  const std::uint64_t tag = from_udata(kev.udata);
  if (tag == kWakeTag) {
    VIGIL_LOG(loop_->log(), kAlert, err, "kevent() error on the wake-up pipe");
    return;
  }
  auto* c = tag_target<Connection>(tag);
  // The connection was closed (or its slot reused) after the change was made:
  // nothing is waiting for it.
  if (is_stale(*c, tag_generation(tag), kTagGenerationMask)) return;
  if (kev.flags & EV_DELETE) {
    // The registration is gone either way (ENOENT: already removed).
    if (err != ENOENT && err != EBADF) {
      VIGIL_LOG(loop_->log(), kAlert, err, "kevent() EV_DELETE on %d filter %d failed",
                static_cast<int>(kev.ident), static_cast<int>(kev.filter));
    }
    return;
  }
  // An add the kernel refused: the connection will hear nothing more, so its
  // handler runs now with the error, as a failed epoll_ctl() closes it.
  Event& ev = kev.filter == EVFILT_WRITE ? *c->write : *c->read;
  VIGIL_LOG(loop_->log(), kAlert, err, "kevent() error on %d filter %d flags %04x",
            static_cast<int>(kev.ident), static_cast<int>(kev.filter),
            static_cast<unsigned>(kev.flags));
  ev.active = 0;
  ev.error = 1;
  ev.kq_errno = err;
  c->error = 1;
  deliver(*loop_, ev, flags);
}

Status KqueueBackend::process_events(Msec timer, unsigned flags) {
  timespec ts{};
  const timespec* tsp = nullptr;
  if (timer != kTimerInfinite) {
    ts.tv_sec = static_cast<time_t>(timer / 1000);
    ts.tv_nsec = static_cast<long>(timer % 1000) * 1000000L;
    tsp = &ts;
  }

  // Seed 003, 2.1: the changes made since the last pass go in with the wait.
  const int submitted = nchanges_;
  const int n = ::kevent(kq_, changes_.get(), submitted, events_.get(), nevents_, tsp);
  const int err = n == -1 ? errno : 0;
  // Submitted: on EINTR the changes were applied before the wait began; on
  // another failure the kernel may have applied some, and it says which only
  // through the event list, which it did not fill.
  nchanges_ = 0;

  if (flags & kProcUpdateTime) clock::time_update();

  if (err != 0) {
    if (err == EINTR) return Status::ok();
    return Status::sys("kevent() with " + std::to_string(submitted) + " changes", err);
  }

  LoopStats& stats = loop_->stats();
  if (n == 0) {
    ++stats.empty_waits;
    if (timer != kTimerInfinite) return Status::ok();
    return Status::error("kevent() returned no events without timeout");
  }
  stats.events += static_cast<std::uint64_t>(n);

  for (int i = 0; i < n; ++i) {
    const struct kevent& kev = events_[i];
    if (kev.flags & EV_ERROR) {
      change_failed(kev, flags);
      continue;
    }
    switch (kev.filter) {
      case EVFILT_TIMER:
        // Seed 003, 3.1: the timer_resolution tick refreshes the time.
        clock::time_update();
        continue;
#ifdef EVFILT_USER
      case EVFILT_USER: {
        Event& nev = loop_->notify_event();
        if (nev.handler != nullptr) nev.handler(nev);
        continue;
      }
#endif
      case EVFILT_READ:
      case EVFILT_WRITE:
        break;
      default:
        VIGIL_LOG(loop_->log(), kAlert, 0, "unexpected kevent() filter %d",
                  static_cast<int>(kev.filter));
        continue;
    }

    const std::uint64_t tag = from_udata(kev.udata);
    if (tag == kWakeTag) {
      drain_wake_pipe();
      Event& nev = loop_->notify_event();
      if (nev.handler != nullptr) nev.handler(nev);
      continue;
    }

    // Seed 003, 3.2: a report for a closed connection or an older owner of
    // the slot is dropped (the generation, not one instance bit).
    auto* c = tag_target<Connection>(tag);
    if (is_stale(*c, tag_generation(tag), kTagGenerationMask)) continue;
    Event& ev = kev.filter == EVFILT_WRITE ? *c->write : *c->read;
    if (!ev.active) continue;  // deleted by a handler earlier in this batch

    if (kev.flags & EV_EOF) {
      // The peer closed its side; fflags holds the socket's error, if any
      // (nginx's kq_errno).
      if (!emulated() || kev.filter == EVFILT_WRITE || kev.fflags != 0) ev.pending_eof = 1;
      if (kev.fflags != 0) ev.kq_errno = static_cast<int>(kev.fflags);
    }
#if VIGIL_KQUEUE_EMULATED
    // libkqueue asks epoll for EPOLLRDHUP only while the read filter is the
    // descriptor's one registration, so a FIN that came with the data is not
    // reported, and a short read would wait for an edge that never comes; and
    // it sets EV_EOF whenever a stream socket has 0 bytes to read. The socket
    // itself is asked instead (one poll() per read report, emulation only).
    if (kev.filter == EVFILT_READ && !ev.accept && peer_closed(c->fd)) ev.pending_eof = 1;
#endif
    deliver(*loop_, ev, flags);
  }
  return Status::ok();
}

}  // namespace vigil::backends
