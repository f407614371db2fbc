// The io_uring backend's sending side for ring connections (see uring.h):
// send() copies into the connection's chunk, one send request at a time
// carries it to the kernel, and close lets what was accepted drain.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>

#include "event/backends/dispatch.h"
#include "event/backends/uring.h"
#include "vigil/core/clock.h"
#include "vigil/core/log.h"
#include "vigil/event/loop.h"

namespace vigil::backends {

namespace {

using namespace uring_tag;
constexpr Msec kLinger = 30000;  // the longest a closed connection's sends may take

}  // namespace

UringBackend::Chunk* UringBackend::get_chunk(Connection& c) {
  Chunk* k = free_chunks_;
  if (k != nullptr) {
    free_chunks_ = k->next;
  } else {
    if (chunks_.size() > kIndexMask) return nullptr;
    std::unique_ptr<Chunk> fresh(new (std::nothrow) Chunk);
    if (!fresh) return nullptr;
    fresh->index = static_cast<std::uint32_t>(chunks_.size());
    k = fresh.get();
    chunks_.push_back(std::move(fresh));  // warm-up only: chunks are reused
  }
  k->slot = static_cast<std::uint32_t>(slot_of(c) - slots_.get());
  k->generation = c.generation;
  k->fd = c.fd;
  k->head = k->tail = 0;
  k->in_flight = k->orphan = k->shutdown_pending = k->cancelled = false;
  k->error = 0;
  k->next = k->prev = nullptr;
  return k;
}

void UringBackend::put_chunk(Chunk* k) {
  k->fd = -1;
  k->next = free_chunks_;
  free_chunks_ = k;
}

Status UringBackend::submit_send(Chunk& k) {
  Status st;
  io_uring_sqe* sqe = next_sqe(&st);
  if (sqe == nullptr) return st;
  if (k.head > 0) {
    // Keep the data at the front, so the room at the end is all free.
    std::memmove(k.data, k.data + k.head, k.tail - k.head);
    k.tail -= k.head;
    k.head = 0;
  }
  ::io_uring_prep_send(sqe, k.fd, k.data, k.tail, MSG_NOSIGNAL);
  ::io_uring_sqe_set_data64(sqe, make(kSend, k.generation, k.index));
  k.in_flight = true;
  return Status::ok();
}

long UringBackend::ring_send(Connection& c, const char* buf, std::size_t size) {
  Event& wev = *c.write;
  Slot& s = *slot_of(c);
  Chunk* k = s.out;
  if (k != nullptr && k->error != 0) {
    wev.error = 1;
    c.error = 1;
    errno = k->error;
    return kIoError;
  }
  if (k == nullptr) {
    if (s.pollout_live || file_busy(s)) {  // a file send is waiting for room
      wev.ready = 0;
      return kIoAgain;
    }
    k = get_chunk(c);
    if (k == nullptr) return unix_send(c, buf, size);  // no memory: the socket itself
    s.out = k;
  }
  const std::size_t room = kChunkSize - k->tail;
  if (room == 0) {
    wev.ready = 0;
    return kIoAgain;
  }
  const std::size_t n = std::min(size, room);
  std::memcpy(k->data + k->tail, buf, n);
  k->tail += static_cast<std::uint32_t>(n);
  if (!k->in_flight) {
    if (Status st = submit_send(*k); !st) {
      k->tail -= static_cast<std::uint32_t>(n);
      wev.error = 1;
      c.error = 1;
      VIGIL_LOG(loop_->log(), kAlert, st.err(), "io_uring: %s", st.message().c_str());
      return kIoError;
    }
  }
  if (n < size) wev.ready = 0;
  c.sent += static_cast<off_t>(n);
  return static_cast<long>(n);
}

Chain* UringBackend::ring_send_chain(Connection& c, Chain* in, off_t limit) {
  Event& wev = *c.write;
  Slot& s = *slot_of(c);
  const off_t max = limit <= 0 ? 0x7ffff000 : limit;
  off_t sent = 0;
  Chain* cl = in;
  while (cl != nullptr && sent < max) {
    Buf* b = cl->buf;
    if (b->empty()) {
      cl = cl->next;
      continue;
    }
    if (b->in_file) {
      // Files go out through the ring (uring_file.cc) or with sendfile(2)
      // once the chunk is empty (the bytes before them must leave first).
      if (s.out != nullptr || s.pollout_live) {
        wev.ready = 0;
        return cl;
      }
      if (file_mode_ != FileMode::kSendfile || s.file != nullptr) {
        const long n = ring_send_file(c, s, *b, max - sent);
        if (n == kIoError) return kChainError;
        if (n == kIoAgain) return cl;
        if (n > 0) {
          sent += n;
          continue;
        }
        // 0: no FileSend free, sendfile(2) below.
      }
      Chain* rest = writev_chain(c, cl, max - sent);
      if (rest != kChainError && rest != nullptr && !wev.ready) {
        // The socket is full: POLLOUT through the ring says when it is not.
        Status st;
        io_uring_sqe* sqe = next_sqe(&st);
        if (sqe == nullptr) {
          VIGIL_LOG(loop_->log(), kAlert, st.err(), "io_uring: %s", st.message().c_str());
          return kChainError;
        }
        ::io_uring_prep_poll_add(sqe, c.fd, POLLOUT);
        s.pollout_ud = make(kPollOut, c.generation, static_cast<std::uint32_t>(&s - slots_.get()));
        ::io_uring_sqe_set_data64(sqe, s.pollout_ud);
        s.pollout_live = true;
      }
      return rest;
    }
    const std::size_t size = b->size();
    const std::size_t want = std::min<std::size_t>(size, static_cast<std::size_t>(max - sent));
    const long n = ring_send(c, b->pos, want);
    if (n == kIoError) return kChainError;
    if (n == kIoAgain) return cl;
    b->pos += n;
    sent += n;
    if (static_cast<std::size_t>(n) < size) return cl;  // the chunk is full, or the limit
    cl = cl->next;
  }
  while (cl != nullptr && cl->buf->empty()) cl = cl->next;
  return cl;
}

void UringBackend::on_send(const Completion& cqe, unsigned flags) {
  const std::uint32_t index = static_cast<std::uint32_t>(cqe.user_data & kIndexMask);
  if (index >= chunks_.size()) return;
  Chunk& k = *chunks_[index];
  if (!k.in_flight) return;
  k.in_flight = false;
  if (cqe.res > 0) {
    k.head += static_cast<std::uint32_t>(cqe.res);  // a short send continues below
  } else if (cqe.res != -EAGAIN && cqe.res != -EINTR && cqe.res != 0) {
    k.error = -cqe.res;
  }
  const bool drained = k.head == k.tail;
  if (k.error == 0 && !drained && !(k.orphan && k.cancelled)) {
    if (Status st = submit_send(k); !st) k.error = st.err() != 0 ? st.err() : EIO;
  }
  if (k.orphan) {
    if (k.in_flight) return;
    finish_orphan(k);
    return;
  }
  Connection& c = loop_->pool().connections()[k.slot];
  Slot& s = slots_[k.slot];
  if (s.out != &k) return;  // cannot happen: an owned chunk belongs to its slot
  if (drained && k.error == 0) {
    // Nothing left: an idle connection holds no send memory.
    s.out = nullptr;
    const bool shut = k.shutdown_pending;
    const int fd = k.fd;
    put_chunk(&k);
    if (shut && ::shutdown(fd, SHUT_WR) == -1 && errno != ENOTCONN) {
      VIGIL_LOG(*c.log, kInfo, errno, "*%llu shutdown() failed",
                static_cast<unsigned long long>(c.number));
    }
  }
  if (k.error != 0) {
    c.write->error = 1;
    c.error = 1;
  }
  make_ready_write(c, flags);
}

void UringBackend::make_ready_write(Connection& c, unsigned flags) {
  Event& wev = *c.write;
  if (wev.ready) return;
  wev.ready = 1;
  if (wev.active) deliver(*loop_, wev, flags);
}

void UringBackend::finish_orphan(Chunk& k) {
  // Everything left (or the peer went away, or it took too long): the FIN.
  k.prev->next = k.next;
  k.next->prev = k.prev;
  --lingering_;
  if (k.fd != -1 && ::close(k.fd) == -1) {
    VIGIL_LOG(loop_->log(), kAlert, errno, "close() socket %d failed", k.fd);
  }
  put_chunk(&k);
}

void UringBackend::expire_lingering() {
  const Msec now = clock::current_msec();
  for (Chunk* k = linger_.next; k != &linger_ && k->deadline <= now; k = k->next) {
    if (k->cancelled) continue;
    k->cancelled = true;
    (void)cancel(make(kSend, k->generation, k->index));
  }
}

Msec UringBackend::linger_wait(Msec timer) const {
  for (const Chunk* k = linger_.next; k != &linger_; k = k->next) {
    if (k->cancelled) continue;
    const Msec now = clock::current_msec();
    const Msec left = k->deadline > now ? k->deadline - now : 0;
    return std::min(timer, left);
  }
  return timer;
}

void UringBackend::drain_lingering() {
  // The loop is going away (a graceful stop ends when the last connection is
  // closed): give the sends of closed connections up to a second to finish,
  // so the last responses are not cut off by the cancel that follows.
  for (int i = 0; i < 100 && lingering_ > 0; ++i) {
    if (submit() < 0) return;
    __kernel_timespec ts{};
    ts.tv_nsec = 10 * 1000 * 1000;
    io_uring_cqe* cqe = nullptr;
    const int rc = ::io_uring_wait_cqe_timeout(&ring_, &cqe, &ts);
    if (rc < 0 && rc != -ETIME && rc != -EINTR) return;
    while (::io_uring_peek_cqe(&ring_, &cqe) == 0 && cqe != nullptr) {
      const Completion done{cqe->user_data, cqe->res, cqe->flags};
      ::io_uring_cqe_seen(&ring_, cqe);
      if ((done.user_data >> 63) && uring_tag::kind(done.user_data) == kSend) {
        const std::uint32_t index = uring_tag::index(done.user_data);
        if (index < chunks_.size() && chunks_[index]->orphan) on_send(done, 0);
      } else if ((done.user_data >> 63) && (done.flags & IORING_CQE_F_BUFFER)) {
        --free_buffers_;  // done_ring_io() frees the buffers anyway
      }
    }
  }
}

bool UringBackend::release(Connection& c) {
  Slot* s = slot_of(c);
  if (s == nullptr) return false;
  drop_received(*s);
  if (s->recv_live) (void)cancel(s->recv_ud);
  if (s->pollout_live) (void)cancel(s->pollout_ud);
  if (release_file(*s)) {  // a file send in flight (never with a chunk)
    *s = Slot{};
    return true;
  }
  Chunk* k = s->out;
  *s = Slot{};
  if (k == nullptr) return false;
  if (!k->in_flight) {
    put_chunk(k);
    return false;
  }
  // Sends in flight: they finish, then the backend closes the fd.
  k->orphan = true;
  k->deadline = clock::current_msec() + kLinger;
  k->prev = linger_.prev;
  k->next = &linger_;
  linger_.prev->next = k;
  linger_.prev = k;
  ++lingering_;
  // Hand the send to the kernel now rather than at the next wait: the peer
  // gets its data as it would from a close() after send(2), even if this
  // loop never runs again.
  (void)submit();
  return true;
}

int UringBackend::shutdown_write(Connection& c) {
  Slot* s = c.ring ? slot_of(c) : nullptr;
  if (s != nullptr && s->out != nullptr && s->out->in_flight) {
    s->out->shutdown_pending = true;  // once the chunk is drained (on_send)
    return 0;
  }
  return ::shutdown(c.fd, SHUT_WR);
}

void UringBackend::complete_ring(const Completion& cqe, unsigned flags) {
  if (!ring_io_) return;
  switch (uring_tag::kind(cqe.user_data)) {
    case kRecv:
      on_recv(owner_of(cqe.user_data), cqe, flags);
      break;
    case kSend:
      on_send(cqe, flags);
      break;
    case kPollIn:
      on_poll(owner_of(cqe.user_data), false, cqe, flags);
      break;
    case kPollOut:
      on_poll(owner_of(cqe.user_data), true, cqe, flags);
      break;
    case kFileIn:
    case kFileOut:
      on_file(cqe, flags);
      break;
    default:
      break;
  }
}

}  // namespace vigil::backends
