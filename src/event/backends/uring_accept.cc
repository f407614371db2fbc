// The io_uring backend's listening sockets (see uring.h): one multishot
// IORING_OP_ACCEPT per listening socket takes every connection as it comes
// (no readiness report, no accept4(2) per connection), and the accept handler
// gets them through Backend::accept().
//
// The seeds' accept model is kept:
//  - the handler still runs on a read event of the listening connection and
//    takes connections until accept() says EAGAIN;
//  - the accept mutex and accept_disabled delete the registration (del
//    cancels the request) and add it again later;
//  - connections the kernel took before a cancel reached it are still ours
//    (another worker will never see them): they are handed to the handler
//    even when the registration is gone, and closed only when the listening
//    socket itself is;
//  - so are connections a dying request leaves behind: the kernel's accept
//    polls wait exclusively, a new connection wakes only the first request
//    on the socket, and a cancelled one is still first until its cancel has
//    run (take_stranded).
// The request carries no address (one buffer would be shared by every
// connection of the multishot request): accept() asks getpeername(2).
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <new>

#include "event/backends/dispatch.h"
#include "event/backends/uring.h"
#include "vigil/core/log.h"
#include "vigil/event/connection.h"
#include "vigil/event/listening.h"
#include "vigil/event/loop.h"

namespace vigil::backends {

UringBackend::AcceptQueue* UringBackend::accept_queue(const Event& ev, bool create) {
  for (AcceptQueue& q : accepts_) {
    if (q.ev == &ev) return &q;
  }
  if (!create) return nullptr;
  // Setup only (add of a listening socket): one entry per listening socket.
  try {
    AcceptQueue q;
    q.ev = const_cast<Event*>(&ev);
    q.fds.reserve(64);  // a burst larger than this grows it once
    accepts_.push_back(std::move(q));
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
  return &accepts_.back();
}

bool UringBackend::queue_accepted(AcceptQueue& q, int fd) {
  try {
    q.fds.push_back(fd);
    return true;
  } catch (const std::bad_alloc&) {
    VIGIL_LOG(loop_->log(), kAlert, ENOMEM, "io_uring: no memory to queue an accepted connection");
    ::close(fd);
    return false;
  }
}

void UringBackend::on_accept(Event& ev, bool current, const Completion& cqe, unsigned flags) {
  auto* lc = ev.owner<Connection>();
  AcceptQueue* q = accept_queue(ev, false);
  if (cqe.res >= 0) {
    // A connection: ours even if the registration was deleted since.
    if (q == nullptr || !ev.accept || lc->fd == -1) {
      ::close(cqe.res);
      return;
    }
    if (!queue_accepted(*q, cqe.res)) return;
    // Reported once the whole batch is queued (deliver_pending_accepts), so
    // that multi_accept takes every connection of this pass in one event.
  }
  if (cqe.flags & IORING_CQE_F_MORE) return;
  if (!current) {
    // A deleted or replaced request has ended: connections that arrived
    // while it was dying may be left in the listen queue with nobody told.
    if (q != nullptr) take_stranded(ev, *q);
    return;
  }

  // The request ended while it is still wanted.
  if (q != nullptr) q->live = false;
  if (cqe.res == -EINVAL) {
    // No multishot accept on this kernel (Linux < 5.19): poll the
    // listening sockets and accept4(2), as before.
    multishot_accept_ = false;
    VIGIL_LOG(loop_->log(), kNotice, EINVAL,
              "io_uring: no multishot accept, listening sockets are polled");
    ev.active = 0;
    ev.index = Event::kNoIndex;
    if (Status st = add(ev, 0); !st) {
      VIGIL_LOG(loop_->log(), kAlert, st.err(), "io_uring: %s", st.message().c_str());
    }
    return;
  }
  if (cqe.res >= 0 || cqe.res == -ECANCELED) {
    // The kernel stopped it (not our del, which makes it stale): go on.
    if (Status st = arm(ev, lc->fd); !st) {
      VIGIL_LOG(loop_->log(), kAlert, st.err(), "io_uring: cannot re-arm accept: %s",
                st.message().c_str());
      return;
    }
    if (q != nullptr) q->live = true;
    return;
  }
  // An error (EMFILE, ENFILE, ENOMEM...): the handler meets it from
  // accept4(2) in accept() and backs off as with epoll.
  deliver(*loop_, ev, flags);
}

void UringBackend::take_stranded(Event& ev, AcceptQueue& q) {
  // The kernel's accept polls wait exclusively on the listening socket: a
  // new connection wakes only the first accept in its wait queue. A
  // cancelled accept leaves that queue only when the cancel's task work
  // has run (with DEFER_TASKRUN only inside an enter that gets events: del
  // asks for one at once, but the kernel may run only part of the deferred
  // work, and there is a window even then). A connection arriving meanwhile,
  // or one whose wake-up the request had not run yet, wakes the dying
  // request alone, which ends without taking it, and the requests behind it
  // (this worker's new one after requeue_accepts, or another worker's) are
  // never woken for it: it would wait for the next connection's wake-up.
  // The request's last completion comes after it left the wait queue, so
  // whatever is in the listen queue now may be such a connection: take it
  // (it is served here, as connections a cancel came too late for are);
  // what arrives later wakes a live request.
  auto* lc = ev.owner<Connection>();
  if (!ev.accept || lc->fd == -1) return;
  for (int i = 0; i < kStrandedMax; ++i) {
    const int fd = ::accept4(lc->fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd == -1) {
      if (errno == ECONNABORTED || errno == EINTR) continue;
      // EAGAIN: nothing was left behind. EMFILE and the like: the handler
      // would meet the same error; a live request takes it later.
      return;
    }
    if (!queue_accepted(q, fd)) return;
  }
}

int UringBackend::accept(Connection& lc, sockaddr* addr, socklen_t* len) {
  Event& ev = *lc.read;
  AcceptQueue* q = multishot_accept_ || !accepts_.empty() ? accept_queue(ev, false) : nullptr;
  if (q != nullptr && q->head < q->fds.size()) {
    const int fd = q->fds[q->head++];
    ++q->handed;
    if (q->head == q->fds.size()) {
      q->fds.clear();  // keeps the capacity
      q->head = 0;
    }
    // Without multi_accept the handler takes one per event, as with epoll;
    // process_events delivers the event again while some are left.
    if (addr != nullptr && ::getpeername(fd, addr, len) == -1) {
      const int err = errno;
      ::close(fd);
      errno = err == ENOTCONN ? ECONNABORTED : err;  // reset before we looked
      return -1;
    }
    return fd;
  }
  if (q != nullptr && (q->live || (multishot_accept_ && !ev.active))) {
    // The kernel accepts for us, or this worker was told to stop accepting.
    errno = EAGAIN;
    return -1;
  }
  if (q != nullptr && multishot_accept_ && ev.active && ev.index != Event::kNoIndex) {
    // The request ended with an error: start it again, and let accept4(2)
    // say what is wrong now (EMFILE backs off, as with epoll).
    if (Status st = arm(ev, lc.fd); st) q->live = true;
  }
  return ::accept4(lc.fd, addr, len, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

std::size_t UringBackend::accepted_waiting(const Connection& lc) const {
  for (const AcceptQueue& q : accepts_) {
    if (q.ev == lc.read) return q.fds.size() - q.head;
  }
  return 0;
}

void UringBackend::take_posted_accepts(Event& ev) {
  // Completions not reaped yet: their connections go to the queue now, and
  // the completion becomes one nobody looks at. When the request's last
  // one is among them it has left the socket's wait queue: whatever it
  // left behind is taken now, not at the next pass.
  AcceptQueue* q = accept_queue(ev, false);
  if (q == nullptr) return;
  bool ended = false;
  unsigned head = 0;
  io_uring_cqe* cqe = nullptr;
  io_uring_for_each_cqe(&ring_, head, cqe) {
    const std::uint64_t ud = cqe->user_data;
    if ((ud >> 63) || !(ud & 1) || ud == LIBURING_UDATA_TIMEOUT) continue;
    if (reinterpret_cast<Event*>(static_cast<std::uintptr_t>(ud & ((std::uint64_t{1} << 48) - 1) &
                                                             ~std::uint64_t{1})) != &ev) {
      continue;
    }
    if (cqe->res >= 0) (void)queue_accepted(*q, cqe->res);
    if (!(cqe->flags & IORING_CQE_F_MORE)) ended = true;
    cqe->user_data = kIgnoredUserData;
  }
  if (ended) take_stranded(ev, *q);
}

void UringBackend::requeue_accepts() {
  // The kernel wakes the first exclusive waiter on a listening socket, and a
  // multishot accept never leaves its place: the worker that armed first
  // would take every connection. Every 16 connections the request is armed
  // again, at the back (nginx's ngx_reorder_accept_events does the same for
  // EPOLLEXCLUSIVE).
  for (std::size_t i = 0; i < accepts_.size(); ++i) {
    Event& ev = *accepts_[i].ev;
    if (accepts_[i].handed < 16 || !ev.active || !(ev.index & kAcceptIndexBit)) continue;
    // A reuseport socket is this worker's alone: nobody to make room for.
    const Listening* ls = ev.owner<Connection>()->listening;
    if (ls != nullptr && ls->reuseport) {
      accepts_[i].handed = 0;
      continue;
    }
    accepts_[i].handed = 0;
    Status st = del(ev, 0);
    if (st) st = add(ev, 0);
    if (!st) VIGIL_LOG(loop_->log(), kAlert, st.err(), "io_uring: %s", st.message().c_str());
  }
}

bool UringBackend::accepts_pending() const {
  for (const AcceptQueue& q : accepts_) {
    if (q.head < q.fds.size()) return true;
  }
  return false;
}

void UringBackend::deliver_pending_accepts(unsigned flags) {
  // Level-triggered, as a listening socket is with epoll: connections left
  // in a queue are reported again on every pass.
  for (std::size_t i = 0; i < accepts_.size(); ++i) {
    AcceptQueue& q = accepts_[i];
    if (q.head >= q.fds.size() || q.delivered == pass_) continue;
    if (!q.ev->accept || q.ev->owner<Connection>()->fd == -1) {
      // The listening socket was closed (a graceful stop) with connections
      // the kernel had taken for it: nobody will serve them.
      for (std::size_t k = q.head; k < q.fds.size(); ++k) ::close(q.fds[k]);
      q.fds.clear();
      q.head = 0;
      continue;
    }
    q.delivered = pass_;
    deliver(*loop_, *q.ev, flags);
  }
}

void UringBackend::close_accepted() {
  for (AcceptQueue& q : accepts_) {
    for (std::size_t i = q.head; i < q.fds.size(); ++i) ::close(q.fds[i]);
  }
  accepts_.clear();
}

}  // namespace vigil::backends
