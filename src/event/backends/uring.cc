#include "event/backends/uring.h"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <new>
#include <string_view>

#include "event/backends/dispatch.h"
#include "vigil/core/clock.h"
#include "vigil/core/log.h"
#include "vigil/event/connection.h"
#include "vigil/event/loop.h"

namespace vigil::backends {

namespace {

// ev.index while registered: generation | level flag.
// 15 bits: bit 63 of user_data marks the ring connections' requests.
constexpr std::uint32_t kGenerationMask = 0x7fffu;
constexpr std::uint32_t kLevelBit = 1u << 16;
constexpr std::uint32_t kAcceptBit = UringBackend::kAcceptIndexBit;  // an accept, not a poll
// A listening socket's poll shared by workers without the accept mutex
// (kEvExclusive): EPOLLEXCLUSIVE, so a new connection wakes one of them.
constexpr std::uint32_t kExclusiveBit = 1u << 18;

// user_data: generation in bits 48..62, the Event pointer below (user-space
// addresses fit in 48 bits on x86-64 and arm64).
constexpr int kGenerationShift = 48;
constexpr std::uint64_t kPointerMask =
    ((std::uint64_t{1} << kGenerationShift) - 1) & ~std::uint64_t{1};
constexpr std::uint64_t kAcceptTag = 1;  // bit 0 of an accept's user_data (Events are aligned)
// The completion of a poll-remove request.
constexpr std::uint64_t kCancelUserData = UringBackend::kIgnoredUserData;
constexpr std::uint64_t kTeardownUserData =
    2;  // done()'s cancel-everything request (no Event is at 2)

std::uint64_t user_data_of(const Event& ev) {
  return (std::uint64_t{ev.index & kGenerationMask} << kGenerationShift) |
         reinterpret_cast<std::uintptr_t>(&ev);
}

Event* event_of(std::uint64_t user_data) {
  return reinterpret_cast<Event*>(static_cast<std::uintptr_t>(user_data & kPointerMask));
}

// True when the completion belongs to the registration ev currently holds.
bool is_current(const Event& ev, std::uint64_t user_data) {
  return ev.active && ev.index != Event::kNoIndex && user_data == user_data_of(ev);
}

unsigned poll_mask(const Event& ev) {
  if (ev.index & kExclusiveBit) return POLLIN | EPOLLEXCLUSIVE;
  return ev.write ? POLLOUT : POLLIN | POLLRDHUP;
}

}  // namespace

Status UringBackend::probe() {
  io_uring ring{};
  const int rc = ::io_uring_queue_init(2, &ring, 0);
  if (rc < 0) {
    return Status::error("io_uring is not available on this kernel: io_uring_queue_init() failed",
                         -rc);
  }
  ::io_uring_queue_exit(&ring);
  return Status::ok();
}

Status UringBackend::init(EventLoop& loop, const BackendConfig& cfg) {
  done();
  loop_ = &loop;

  // Every watched direction may complete once per wake-up, so the completion
  // queue is sized for all of them; the kernel keeps overflow (FEAT_NODROP)
  // but that costs a syscall to flush.
  const auto sq_entries = static_cast<unsigned>(std::clamp<std::size_t>(cfg.events, 64, 4096));
  // Completion work does not interrupt the worker with an IPI (COOP_TASKRUN,
  // 5.19): it runs when we enter anyway. Dropped when the kernel refuses it
  // (EINVAL). Not used:
  //  - SINGLE_ISSUER makes the creating thread the only one that may submit,
  //    and a library loop may be created on one thread and run on another
  //    (bench/micro/pingpong_bench.cc does);
  //  - DEFER_TASKRUN (which needs SINGLE_ISSUER) runs at most 20 deferred
  //    completions per wait of one on Linux 6.x, so a pass with a thousand
  //    ready sockets takes fifty enters (AThousandConnectionsAllReported).
  const unsigned base = IORING_SETUP_CQSIZE | IORING_SETUP_CLAMP;
  // First choice (Linux 6.1): completion work deferred to our own waits
  // (DEFER_TASKRUN, which needs SINGLE_ISSUER): it runs in a batch inside
  // io_uring_enter instead of on the way out of every other system call
  // (the static file's openat/pread/close), and nothing interrupts the
  // worker. The ring starts disabled (R_DISABLED) and is enabled by the
  // first thread that submits or waits (enable()), which becomes its only
  // issuer: a library loop may be created on one thread and run on another
  // (bench/micro/pingpong_bench.cc does). The kernel runs at most ~20
  // deferred completions per wait; process_events asks for more while the
  // last round was full (AThousandConnectionsAllReported).
  // Then COOP_TASKRUN (5.19): completion work does not interrupt the worker
  // with an IPI, it runs when we enter anyway. Each choice is dropped when
  // the kernel refuses it (EINVAL).
  const unsigned deferred =
      IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_R_DISABLED;
  const unsigned tries[] = {
      base | deferred, base | IORING_SETUP_COOP_TASKRUN, base,
      0,  // a kernel older than CQSIZE/CLAMP: default sizes
  };
  // VIGIL_URING_SETUP (a number, e.g. 0x100 for COOP_TASKRUN alone) replaces
  // the first choice: for measuring the flags and testing the fallbacks,
  // not for production.
  unsigned first = tries[0];
  if (const char* env = std::getenv("VIGIL_URING_SETUP"); env != nullptr && *env != '\0') {
    first = base | static_cast<unsigned>(std::strtoul(env, nullptr, 0));
    // SINGLE_ISSUER is made safe for a loop run on another thread by R_DISABLED.
    if (first & IORING_SETUP_SINGLE_ISSUER) first |= IORING_SETUP_R_DISABLED;
  }
  io_uring_params params{};
  int rc = -EINVAL;
  for (unsigned f : tries) {
    if (f == tries[0]) f = first;
    params = io_uring_params{};
    params.flags = f;
    params.cq_entries = static_cast<unsigned>(
        std::clamp<std::size_t>(2 * cfg.connections + 64, 2 * sq_entries, 65536));
    rc = ::io_uring_queue_init_params(sq_entries, &ring_, &params);
    if (rc != -EINVAL) break;
  }
  if (rc < 0) {
    loop_ = nullptr;
    return Status::error("io_uring is not available: io_uring_queue_init() failed", -rc);
  }
  setup_flags_ = params.flags;
  disabled_ = (params.flags & IORING_SETUP_R_DISABLED) != 0;
  defer_taskrun_ = (params.flags & IORING_SETUP_DEFER_TASKRUN) != 0;
  ring_open_ = true;
  skip_success_ = (params.features & IORING_FEAT_CQE_SKIP) != 0;

  batch_size_ = static_cast<unsigned>(std::clamp<std::size_t>(cfg.events, 1, 65536));
  cqes_.reset(new (std::nothrow) io_uring_cqe*[batch_size_]);
  batch_.reset(new (std::nothrow) Completion[batch_size_]);
  if (!cqes_ || !batch_) {
    done();
    return Status::error("cannot allocate the io_uring completion list", ENOMEM);
  }

  Status st = notify_.open();
  if (st) {
    Event& nev = notify_.event();
    generation_ = 1;
    nev.index = generation_;  // multishot
    st = arm(nev, notify_.fd());
    if (st) nev.active = 1;
  }
  // Multishot poll needs Linux 5.13, which also brought IORING_FEAT_RSRC_TAGS:
  // without it the notify poll would fail, which would only show as a dead
  // notify. Nothing is submitted here: the loop's thread submits at its
  // first pass, so the requests' completion work runs on that thread (a
  // loop may be created on one thread and run on another).
  if (st && (params.features & IORING_FEAT_RSRC_TAGS) == 0) {
    st = Status::error("io_uring is not usable: this kernel has no multishot poll (Linux 5.13)");
  }
  // Listening sockets use multishot accept (Linux 5.19, uring_accept.cc):
  // the kernel takes each connection and posts it, no readiness report and
  // no accept4(2) per connection. VIGIL_URING_ACCEPT=poll keeps the polled
  // accept4 path instead (for tests and measurement); a kernel without
  // multishot accept answers EINVAL and the listening sockets go back to
  // polls by themselves (on_accept).
  const char* accept_env = std::getenv("VIGIL_URING_ACCEPT");
  multishot_accept_ = accept_env == nullptr || std::string_view(accept_env) != "poll";
  if (st) st = init_ring_io(cfg);
  if (!st) {
    done();
    return st;
  }
  return Status::ok();
}

bool UringBackend::enable() {
  if (!disabled_) return true;
  // The calling thread becomes the ring's only issuer (SINGLE_ISSUER).
  // (liburing 2.3 declares io_uring_enable_rings but does not export it.)
  const long rc =
      ::syscall(__NR_io_uring_register, ring_.ring_fd, IORING_REGISTER_ENABLE_RINGS, nullptr, 0);
  if (rc < 0) {
    if (loop_ != nullptr) {
      VIGIL_LOG(loop_->log(), kAlert, errno, "io_uring: cannot enable the ring");
    }
    return false;
  }
  disabled_ = false;
  return true;
}

void UringBackend::cancel_everything() {
  // A ring never enabled holds no request. One enabled by another thread
  // refuses ours (EEXIST, SINGLE_ISSUER): closing it cancels everything.
  if (disabled_) return;
  io_uring_sqe* sqe = ::io_uring_get_sqe(&ring_);
  if (sqe == nullptr && ::io_uring_submit(&ring_) >= 0) sqe = ::io_uring_get_sqe(&ring_);
  if (sqe == nullptr) return;
  ::io_uring_prep_cancel64(sqe, 0,
                           IORING_ASYNC_CANCEL_ANY);  // Linux 5.19; older: -EINVAL, harmless
  ::io_uring_sqe_set_data64(sqe, kTeardownUserData);
  if (::io_uring_submit(&ring_) < 0) return;
  // Reap until the cancel has completed and nothing else is pending; every
  // wait also runs the cancelled polls' task work. Bounded: 100 x 10 ms.
  bool cancelled = false;
  for (int i = 0; i < 100; ++i) {
    __kernel_timespec ts{};
    ts.tv_nsec = cancelled ? 0 : 10 * 1000 * 1000;
    io_uring_cqe* cqe = nullptr;
    const int rc = ::io_uring_wait_cqe_timeout(&ring_, &cqe, &ts);
    if (rc == -EINTR) continue;
    if (rc < 0) {
      if (cancelled) return;
      continue;
    }
    if (cqe->user_data == kTeardownUserData) cancelled = true;
    ::io_uring_cqe_seen(&ring_, cqe);
  }
}

void UringBackend::done() {
  if (ring_open_) {
    // Closing the ring cancels every armed poll too, but later, from the
    // ring's exit work: until then the polled sockets stay referenced and a
    // peer would not see our FIN. Cancel and reap here, so done() leaves
    // nothing behind. (The exit work still queues task work to this thread,
    // which ends its next blocking wait once with EINTR: harmless.)
    drain_lingering();
    cancel_everything();
    close_accepted();
    done_ring_io();
    ::io_uring_queue_exit(&ring_);
    ring_open_ = false;
    ring_fd_registered_ = false;
    disabled_ = defer_taskrun_ = false;
    setup_flags_ = 0;
  }
  notify_.close();
  cqes_.reset();
  batch_.reset();
  batch_size_ = 0;
  loop_ = nullptr;
}

io_uring_sqe* UringBackend::next_sqe(Status* st) {
  io_uring_sqe* sqe = ::io_uring_get_sqe(&ring_);
  if (sqe != nullptr) return sqe;
  // The submission queue is full: hand what is queued to the kernel now.
  const int rc = submit();
  if (rc < 0) {
    *st = Status::sys("io_uring_submit()", -rc);
    return nullptr;
  }
  sqe = ::io_uring_get_sqe(&ring_);
  if (sqe == nullptr) *st = Status::error("io_uring submission queue is full");
  return sqe;
}

int UringBackend::submit(bool run_completions) {
  if (!enable()) return -EBADFD;
  const unsigned queued = ::io_uring_sq_ready(&ring_);
  const int rc =
      run_completions ? ::io_uring_submit_and_get_events(&ring_) : ::io_uring_submit(&ring_);
  if (loop_ != nullptr) {
    // liburing enters only to submit something or to get events.
    if (run_completions || queued > 0) ++loop_->stats().enters;
    if (rc > 0) loop_->stats().sqes_submitted += queued;
  }
  return rc;
}

Status UringBackend::arm(Event& ev, int fd) {
  Status st;
  io_uring_sqe* sqe = next_sqe(&st);
  if (sqe == nullptr) return st;
  if (ev.index & kAcceptBit) {
    // Every connection the kernel takes for us is a completion; no address
    // (one buffer would be shared by all of them): accept() asks getpeername.
    ::io_uring_prep_multishot_accept(sqe, fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    ::io_uring_sqe_set_data64(sqe, user_data_of(ev) | kAcceptTag);
    return Status::ok();
  }
  if (ev.index & kLevelBit) {
    ::io_uring_prep_poll_add(sqe, fd, poll_mask(ev));
  } else {
    ::io_uring_prep_poll_multishot(sqe, fd, poll_mask(ev));
  }
  ::io_uring_sqe_set_data64(sqe, user_data_of(ev));
  return Status::ok();
}

Status UringBackend::cancel(std::uint64_t user_data) {
  Status st;
  io_uring_sqe* sqe = next_sqe(&st);
  if (sqe == nullptr) return st;
  if ((user_data >> 63) || (user_data & kAcceptTag)) {
    // A ring connection's receive or send, or an accept.
    ::io_uring_prep_cancel64(sqe, user_data, 0);
  } else {
    ::io_uring_prep_poll_remove(sqe, user_data);
  }
  ::io_uring_sqe_set_data64(sqe, kCancelUserData);
  if (skip_success_) sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
  return Status::ok();
}

Status UringBackend::add(Event& ev, unsigned flags) {
  auto* rc = ev.owner<Connection>();
  if (rc->ring && !leave_ring_if_replaced(*rc)) {
    // A ring connection: reads are completions of its receive, writes the
    // completions of its sends; nothing is polled.
    ev.active = 1;
    if (ev.write) return Status::ok();
    Slot* s = slot_of(*rc);
    if (s != nullptr && !s->recv_live && s->pending == 0 && !s->eof && s->error == 0) {
      return arm_recv(*rc, *s);
    }
    return Status::ok();
  }
  if (ev.accept && multishot_accept_) {
    // A listening socket: the kernel accepts for us (uring_accept.cc).
    if (ev.active && ev.index != Event::kNoIndex && (ev.index & kAcceptBit)) return Status::ok();
    if (ev.active && ev.index != Event::kNoIndex) {
      if (Status st = del(ev, 0); !st) return st;
    }
    AcceptQueue* q = accept_queue(ev, true);
    if (q == nullptr) return Status::error("cannot allocate the io_uring accept queue", ENOMEM);
    generation_ = static_cast<std::uint16_t>((generation_ + 1) & kGenerationMask);
    ev.index = generation_ | kAcceptBit;
    if (Status st = arm(ev, rc->fd); !st) {
      ev.index = Event::kNoIndex;
      return st;
    }
    q->live = true;
    ev.active = 1;
    return Status::ok();
  }
  const bool level = (flags & kEvClear) == 0;
  if (ev.active && ev.index != Event::kNoIndex) {
    if (((ev.index & kLevelBit) != 0) == level) return Status::ok();  // armed already, same mode
    Status st = del(ev, 0);
    if (!st) return st;
  }
  if ((reinterpret_cast<std::uintptr_t>(&ev) >> kGenerationShift) != 0) {
    return Status::error("io_uring: event address does not fit the user_data tag");
  }
  generation_ = static_cast<std::uint16_t>((generation_ + 1) & kGenerationMask);
  ev.index = generation_ | (level ? kLevelBit : 0u);
  // Workers sharing a listening socket: a single-shot poll with
  // EPOLLEXCLUSIVE wakes one waiting worker per connection, and since a
  // completed poll is armed again at the back of the socket's wait queue,
  // the workers take turns (epoll's registration keeps its place, which is
  // why accept.cc re-adds it every 16 accepts there).
  if ((flags & kEvExclusive) && ev.accept && !ev.write && exclusive_ok_) ev.index |= kExclusiveBit;
  Status st = arm(ev, ev.owner<Connection>()->fd);
  if (!st) {
    ev.index = Event::kNoIndex;
    return st;
  }
  ev.active = 1;
  return Status::ok();
}

Status UringBackend::del(Event& ev, unsigned /*flags: kEvClose cancels too, see uring.h*/) {
  if (ev.owner<Connection>()->ring) {
    // The receive goes on (its buffers are bounded by kMaxPending); only the
    // delivery stops. release() cancels it at close.
    ev.active = 0;
    return Status::ok();
  }
  if (!ev.active || ev.index == Event::kNoIndex) {
    ev.active = 0;
    ev.index = Event::kNoIndex;
    return Status::ok();
  }
  std::uint64_t user_data = user_data_of(ev);
  if (ev.index & kAcceptBit) user_data |= kAcceptTag;
  ev.active = 0;
  ev.index = Event::kNoIndex;
  if (user_data & kAcceptTag) {
    // Stop the kernel accepting for us now, not at the next pass (the
    // worker may be closing the socket), and keep what it took already.
    // The cancel's task work runs in the same enter (GETEVENTS), so the
    // request leaves the socket's wait queue now: until it does, a new
    // connection wakes only it (take_stranded, uring_accept.cc).
    if (AcceptQueue* q = accept_queue(ev, false); q != nullptr) q->live = false;
    Status st = cancel(user_data);
    if (st && submit(true) < 0) st = Status::error("io_uring: cannot submit the accept cancel");
    take_posted_accepts(ev);
    return st;
  }
  return cancel(user_data);
}

Status UringBackend::add_conn(Connection& c) {
  if (c.ring && !leave_ring_if_replaced(c)) {
    Status st = add(*c.read, kEvClear);
    c.write->active = 1;
    return st;
  }
  Status st = add(*c.read, kEvClear);
  if (st) st = add(*c.write, kEvClear);
  return st;
}

Status UringBackend::del_conn(Connection& c, unsigned flags) {
  Status st = del(*c.read, flags);
  Status st2 = del(*c.write, flags);
  return st ? std::move(st2) : std::move(st);
}

Status UringBackend::notify() {
  return notify_.signal();
}

Status UringBackend::process_events(Msec timer, unsigned flags) {
  // One io_uring_enter both submits what add/del queued since the last pass
  // and waits.
  if (lingering_ > 0) {
    expire_lingering();
    timer = linger_wait(timer);
  }
  if (!enable()) return Status::error("io_uring: the ring cannot be enabled");
  ++pass_;
  if (!accepts_.empty()) requeue_accepts();
  // Connections taken but not handed out yet: they are reported this pass.
  const bool accepts_left = !accepts_.empty() && accepts_pending();
  if (accepts_left) timer = 0;
  if (!ring_fd_registered_) {
    // One fewer fd lookup per io_uring_enter (5.18; optional). The
    // registration belongs to the calling thread, so it is made by the
    // thread that runs the loop, at its first pass, not by the one that
    // created it.
    ring_fd_registered_ = true;
    (void)::io_uring_register_ring_fd(&ring_);
  }
  LoopStats& stats = loop_->stats();
  const unsigned queued = ::io_uring_sq_ready(&ring_);
  stats.sqes_submitted += queued;
  // Counted as liburing decides it: a wait enters the kernel when there is
  // something to submit or no completion to return yet (a completion can
  // already be posted, e.g. by del()'s submit_and_get_events); a pass with
  // timer 0 always enters.
  if (timer == 0 || queued > 0 || ::io_uring_cq_ready(&ring_) == 0) ++stats.enters;
  int rc;
  if (timer == kTimerInfinite) {
    rc = ::io_uring_submit_and_wait(&ring_, 1);
  } else if (timer == 0) {
    // Enters the kernel even with nothing to submit: completions still
    // waiting as task work are posted on the way out.
    rc = ::io_uring_submit_and_get_events(&ring_);
  } else {
    __kernel_timespec ts{};
    ts.tv_sec = static_cast<long long>(timer / 1000);
    ts.tv_nsec = static_cast<long long>((timer % 1000) * 1000000);
    io_uring_cqe* cqe = nullptr;
    rc = ::io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, &ts, nullptr);
  }
  const int err = rc < 0 ? -rc : 0;

  if (flags & kProcUpdateTime) clock::time_update();

  if (err == EINTR) return Status::ok();
  // ETIME: the wait timed out; EBUSY/EAGAIN: completions overflowed and must
  // be reaped first. Both are handled by reaping below.
  if (err != 0 && err != ETIME && err != EBUSY && err != EAGAIN) {
    return Status::sys("io_uring_enter()", err);
  }

  // Copy a bounded batch out and release the ring slots before any handler
  // runs: handlers queue new requests (add/del), which may submit.
  unsigned n = reap(0);
  // DEFER_TASKRUN: one wait runs at most ~20 deferred completions (the
  // kernel's batch). A full round means more may be waiting: ask for them
  // now rather than one pass per twenty sockets.
  for (unsigned got = n; defer_taskrun_ && got >= kDeferredBatch && n < batch_size_;) {
    ++stats.enters;
    if (::io_uring_get_events(&ring_) < 0) break;
    got = reap(n);
    n += got;
  }
  std::uint64_t reported = 0;
  for (unsigned i = 0; i < n; ++i) {
    if (batch_[i].user_data != kCancelUserData && batch_[i].user_data != LIBURING_UDATA_TIMEOUT) {
      ++reported;
    }
  }

  // An infinite wait may end with only cancel completions: not an error here,
  // unlike epoll_wait returning 0.
  if (reported == 0 && !accepts_left) {
    ++stats.empty_waits;
    return Status::ok();
  }
  stats.events += reported;

  for (unsigned i = 0; i < n; ++i) complete(batch_[i], flags);
  if (!accepts_.empty()) deliver_pending_accepts(flags);
  return Status::ok();
}

unsigned UringBackend::reap(unsigned at) {
  const unsigned n = ::io_uring_peek_batch_cqe(&ring_, cqes_.get(), batch_size_ - at);
  for (unsigned i = 0; i < n; ++i) {
    batch_[at + i] = Completion{cqes_[i]->user_data, cqes_[i]->res, cqes_[i]->flags};
  }
  ::io_uring_cq_advance(&ring_, n);
  loop_->stats().cqes_reaped += n;
  return n;
}

void UringBackend::complete(const Completion& cqe, unsigned flags) {
  if (cqe.user_data == kCancelUserData || cqe.user_data == LIBURING_UDATA_TIMEOUT) return;
  if (cqe.user_data >> 63) {
    complete_ring(cqe, flags);
    return;
  }
  Event* ev = event_of(cqe.user_data);
  if (cqe.user_data & kAcceptTag) {
    // Even a stale accept carries a connection the kernel took for us.
    on_accept(*ev, is_current(*ev, cqe.user_data & ~kAcceptTag), cqe, flags);
    return;
  }
  // A completion of an earlier registration (cancelled, replaced, deleted) or
  // of a slot reused since: stale, and never re-armed.
  if (!is_current(*ev, cqe.user_data)) return;
  const bool more = (cqe.flags & IORING_CQE_F_MORE) != 0;

  if (notify_.is(ev)) {
    if (!more) {
      Status st = arm(*ev, notify_.fd());
      if (!st)
        VIGIL_LOG(loop_->log(), kAlert, st.err(), "io_uring: cannot re-arm notify: %s",
                  st.message().c_str());
    }
    if (cqe.res >= 0) notify_.fire(*loop_);
    return;
  }

  auto* c = ev->owner<Connection>();
  // is_current() compared the registration's own generation (an Event reset
  // by ConnectionPool::get has none): only a closed connection is left.
  if (c->fd == -1) return;

  if (cqe.res == -ECANCELED) {
    // Our own cancels are never current (del resets the index), so the
    // kernel stopped the request: the registration must go on.
    Status st = arm(*ev, c->fd);
    if (!st)
      VIGIL_LOG(loop_->log(), kAlert, st.err(), "io_uring: cannot re-arm fd:%d: %s", c->fd,
                st.message().c_str());
    return;
  }
  if (cqe.res == -EINVAL && (ev->index & kExclusiveBit)) {
    // A kernel whose poll refuses EPOLLEXCLUSIVE: every worker is woken, as
    // before, and the first accept4() wins.
    exclusive_ok_ = false;
    ev->index &= ~kExclusiveBit;
    Status st = arm(*ev, c->fd);
    if (!st)
      VIGIL_LOG(loop_->log(), kAlert, st.err(), "io_uring: cannot re-arm fd:%d: %s", c->fd,
                st.message().c_str());
    return;
  }
  if (cqe.res < 0) {
    // The poll could not be armed (EBADF: the fd was closed behind our back):
    // the request is gone. The handler meets the error in its recv()/send().
    VIGIL_LOG(loop_->log(), kInfo, -cqe.res, "io_uring poll on fd:%d failed", c->fd);
    ev->active = 0;
    ev->index = Event::kNoIndex;
    deliver(*loop_, *ev, flags);
    return;
  }

  // A single-shot (level) poll always ends here; a multishot one only when
  // the kernel stopped it. Either way the registration must continue.
  if (!more) {
    Status st = arm(*ev, c->fd);
    if (!st)
      VIGIL_LOG(loop_->log(), kAlert, st.err(), "io_uring: cannot re-arm fd:%d: %s", c->fd,
                st.message().c_str());
  }
  if (!ev->write && (cqe.res & POLLRDHUP)) ev->pending_eof = 1;
  deliver(*loop_, *ev, flags);
}

}  // namespace vigil::backends
