// Completion-based I/O for the io_uring backend's ring connections (see
// uring.h): a multishot receive into a provided buffer ring, sends from a
// per-connection chunk kept alive until its completion, and the readiness
// the handlers expect made from those completions.
#include <poll.h>
#include <sys/mman.h>
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
constexpr std::uint16_t kBufferGroup = 0;

UringBackend& backend_of(Connection& c) {
  return static_cast<UringBackend&>(c.loop->backend());
}
long recv_fn(Connection& c, char* buf, std::size_t size) {
  return backend_of(c).ring_recv(c, buf, size);
}
long send_fn(Connection& c, const char* buf, std::size_t size) {
  return backend_of(c).ring_send(c, buf, size);
}
long recv_chain_fn(Connection& c, Chain* chain, off_t limit) {
  return backend_of(c).ring_recv_chain(c, chain, limit);
}
Chain* send_chain_fn(Connection& c, Chain* in, off_t limit) {
  return backend_of(c).ring_send_chain(c, in, limit);
}

// Marks ev ready; delivers it when a handler waits for it (active) and it
// was not ready already (an edge, as epoll's EPOLLET reports).
void make_ready(EventLoop& loop, Event& ev, unsigned flags) {
  const bool was_ready = ev.ready;
  ev.ready = 1;
  if (!ev.write) ev.available = -1;
  if (ev.active && (!was_ready || !ev.write)) deliver(loop, ev, flags);
}

}  // namespace

// ---- setup ---------------------------------------------------------------------

Status UringBackend::init_ring_io(const BackendConfig& cfg) {
  linger_.next = linger_.prev = &linger_;
  lingering_ = 0;
  nslots_ = cfg.connections;
  if (nslots_ > kIndexMask) return Status::ok();  // too many slots to tag: readiness only
  const unsigned count = kBufferCount;
  buf_ring_bytes_ = count * sizeof(io_uring_buf);
  void* ring_mem =
      ::mmap(nullptr, buf_ring_bytes_, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
  if (ring_mem == MAP_FAILED) return Status::sys("mmap(io_uring buffer ring)");
  buf_ring_ = static_cast<io_uring_buf_ring*>(ring_mem);
  buffers_bytes_ = std::size_t{count} * kBufferSize;
  void* mem =
      ::mmap(nullptr, buffers_bytes_, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
  if (mem == MAP_FAILED) {
    done_ring_io();
    return Status::sys("mmap(io_uring receive buffers)");
  }
  buffers_ = static_cast<char*>(mem);
  ::io_uring_buf_ring_init(buf_ring_);
  io_uring_buf_reg reg{};
  reg.ring_addr = reinterpret_cast<std::uintptr_t>(buf_ring_);
  reg.ring_entries = count;
  reg.bgid = kBufferGroup;
  const int rc = ::io_uring_register_buf_ring(&ring_, &reg, 0);
  if (rc < 0) {
    // Provided buffer rings need Linux 5.19: without them every connection
    // stays on readiness (POLL_ADD) and the socket primitives.
    done_ring_io();
    VIGIL_LOG(loop_->log(), kNotice, -rc,
              "io_uring: no provided buffer rings, completion-based I/O is off");
    return Status::ok();
  }
  nbuffers_ = count;
  const int mask = ::io_uring_buf_ring_mask(count);
  for (unsigned i = 0; i < count; ++i) {
    ::io_uring_buf_ring_add(buf_ring_, buffers_ + std::size_t{i} * kBufferSize, kBufferSize,
                            static_cast<unsigned short>(i), mask, static_cast<int>(i));
  }
  ::io_uring_buf_ring_advance(buf_ring_, static_cast<int>(count));
  free_buffers_ = count;
  meta_.reset(new (std::nothrow) BufMeta[count]);
  slots_.reset(new (std::nothrow) Slot[nslots_]);
  if (!meta_ || !slots_) {
    done_ring_io();
    return Status::error("cannot allocate the io_uring connection table", ENOMEM);
  }
  ring_io_ = true;
  init_file_io();
  return Status::ok();
}

void UringBackend::done_ring_io() {
  // Called after cancel_everything(): no request uses a chunk or a buffer.
  while (linger_.next != nullptr && linger_.next != &linger_) {
    Chunk* k = linger_.next;
    k->prev->next = k->next;
    k->next->prev = k->prev;
    if (k->fd != -1) ::close(k->fd);
  }
  lingering_ = 0;
  if (nbuffers_ > 0 && ring_open_) (void)::io_uring_unregister_buf_ring(&ring_, kBufferGroup);
  nbuffers_ = 0;
  if (buf_ring_ != nullptr) ::munmap(buf_ring_, buf_ring_bytes_);
  buf_ring_ = nullptr;
  if (buffers_ != nullptr) ::munmap(buffers_, buffers_bytes_);
  buffers_ = nullptr;
  done_file_io();
  meta_.reset();
  slots_.reset();
  chunks_.clear();
  free_chunks_ = nullptr;
  ring_io_ = false;
}

void UringBackend::init_io(Connection& c) {
  if (!ring_io_ || slot_of(c) == nullptr) {
    Backend::init_io(c);
    return;
  }
  c.ring = 1;
  c.recv = recv_fn;
  c.send = send_fn;
  c.recv_chain = recv_chain_fn;
  c.send_chain = send_chain_fn;
  Slot& s = *slot_of(c);
  s = Slot{};
}

bool UringBackend::leave_ring_if_replaced(Connection& c) {
  if (c.recv == recv_fn && c.send == send_fn && c.recv_chain == recv_chain_fn &&
      c.send_chain == send_chain_fn) {
    return false;
  }
  // The protocol installed its own I/O (TLS reads the socket itself): the
  // connection goes back to readiness, if the ring holds nothing of it yet.
  Slot* s = slot_of(c);
  if (s != nullptr && (s->recv_live || s->pending > 0 || s->out != nullptr || s->pollout_live ||
                       s->file != nullptr)) {
    return false;
  }
  c.ring = 0;
  return true;
}

UringBackend::Slot* UringBackend::slot_of(const Connection& c) {
  if (!slots_) return nullptr;
  const Connection* base = loop_->pool().connections();
  if (base == nullptr || &c < base || &c >= base + nslots_) return nullptr;
  return &slots_[static_cast<std::size_t>(&c - base)];
}

Connection* UringBackend::owner_of(std::uint64_t ud) {
  const std::uint32_t i = uring_tag::index(ud);
  if (i >= nslots_ || i >= loop_->pool().size()) return nullptr;
  Connection* c = &loop_->pool().connections()[i];
  // The slot's owner changed (or closed) since the request was made: stale.
  if (c->fd == -1 || !c->ring || c->generation != uring_tag::generation(ud)) return nullptr;
  return c;
}

// ---- receiving -----------------------------------------------------------------

Status UringBackend::arm_recv(Connection& c, Slot& s) {
  Status st;
  io_uring_sqe* sqe = next_sqe(&st);
  if (sqe == nullptr) return st;
  const auto index = static_cast<std::uint32_t>(&s - slots_.get());
  if (free_buffers_ == 0) {
    // No buffer to receive into: wait for readability, then recv(2) into
    // the handler's own buffer.
    ::io_uring_prep_poll_add(sqe, c.fd, POLLIN | POLLRDHUP);
    s.recv_ud = make(kPollIn, c.generation, index);
  } else {
    ::io_uring_prep_recv_multishot(sqe, c.fd, nullptr, 0, 0);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = kBufferGroup;
    s.recv_ud = make(kRecv, c.generation, index);
  }
  ::io_uring_sqe_set_data64(sqe, s.recv_ud);
  s.recv_live = true;
  s.recv_cancel = false;
  return Status::ok();
}

void UringBackend::recycle(std::uint32_t bid) {
  ::io_uring_buf_ring_add(buf_ring_, buffers_ + std::size_t{bid} * kBufferSize, kBufferSize,
                          static_cast<unsigned short>(bid), ::io_uring_buf_ring_mask(nbuffers_), 0);
  ::io_uring_buf_ring_advance(buf_ring_, 1);
  ++free_buffers_;
}

void UringBackend::drop_received(Slot& s) {
  while (s.head != -1) {
    const auto bid = static_cast<std::uint32_t>(s.head);
    s.head = meta_[bid].next;
    recycle(bid);
  }
  s.tail = -1;
  s.head_off = 0;
  s.pending = 0;
}

void UringBackend::on_recv(Connection* c, const Completion& cqe, unsigned flags) {
  const bool more = (cqe.flags & IORING_CQE_F_MORE) != 0;
  const bool has_buffer = (cqe.flags & IORING_CQE_F_BUFFER) != 0;
  const auto bid = static_cast<std::uint32_t>(cqe.flags >> IORING_CQE_BUFFER_SHIFT);
  if (has_buffer) --free_buffers_;
  Slot* s = c != nullptr ? slot_of(*c) : nullptr;
  if (s == nullptr || s->recv_ud != cqe.user_data) {
    // For a closed connection, or a request replaced since: the data has
    // no reader (the connection is gone).
    if (has_buffer) recycle(bid);
    return;
  }
  if (!more) s->recv_live = false;
  if (cqe.res > 0 && has_buffer) {
    meta_[bid].len = static_cast<std::uint32_t>(cqe.res);
    meta_[bid].next = -1;
    if (s->tail == -1) {
      s->head = static_cast<std::int32_t>(bid);
    } else {
      meta_[static_cast<std::uint32_t>(s->tail)].next = static_cast<std::int32_t>(bid);
    }
    s->tail = static_cast<std::int32_t>(bid);
    s->pending += static_cast<std::uint32_t>(cqe.res);
    if (more && s->pending > kMaxPending && !s->recv_cancel) {
      // The handler does not read: stop taking buffers the others need.
      // The data waits in the socket; recv() resumes with recv(2).
      if (cancel(s->recv_ud)) s->recv_cancel = true;
    }
  } else if (has_buffer) {
    recycle(bid);
  }
  if (cqe.res == 0) {
    s->eof = true;
  } else if (cqe.res == -ENOBUFS) {
    ++loop_->stats().ring_buffer_misses;  // the data stays in the socket
  } else if (cqe.res < 0 && cqe.res != -ECANCELED) {
    s->error = -cqe.res;
  }
  // New data, the end, an error, or a receive that stopped: the handler's
  // recv() has something to say (data, 0, an error, or recv(2)'s answer).
  make_ready(*loop_, *c->read, flags);
}

void UringBackend::on_poll(Connection* c, bool write, const Completion& cqe, unsigned flags) {
  Slot* s = c != nullptr ? slot_of(*c) : nullptr;
  if (s == nullptr) return;
  if (write) {
    if (s->pollout_ud != cqe.user_data) return;
    s->pollout_live = false;
    make_ready(*loop_, *c->write, flags);
    return;
  }
  if (s->recv_ud != cqe.user_data) return;
  s->recv_live = false;
  if (cqe.res > 0 && (cqe.res & POLLRDHUP)) c->read->pending_eof = 1;
  make_ready(*loop_, *c->read, flags);
}

long UringBackend::ring_recv(Connection& c, char* buf, std::size_t size) {
  Event& rev = *c.read;
  Slot& s = *slot_of(c);
  if (rev.eof) return 0;
  if (size == 0) return 0;

  if (s.pending > 0) {
    std::size_t copied = 0;
    while (copied < size && s.head != -1) {
      const auto bid = static_cast<std::uint32_t>(s.head);
      BufMeta& m = meta_[bid];
      const std::size_t take = std::min<std::size_t>(size - copied, m.len - s.head_off);
      std::memcpy(buf + copied, buffers_ + std::size_t{bid} * kBufferSize + s.head_off, take);
      copied += take;
      s.head_off += static_cast<std::uint32_t>(take);
      s.pending -= static_cast<std::uint32_t>(take);
      if (s.head_off == m.len) {
        s.head = m.next;
        if (s.head == -1) s.tail = -1;
        s.head_off = 0;
        recycle(bid);
      }
    }
    if (s.pending == 0) {
      if (s.eof) {
        rev.eof = 1;  // the next call returns 0
      } else if (s.error == 0) {
        // Drained: the next completion makes it ready again. A receive that
        // stopped (no buffers, too much pending) starts again now, so a
        // handler that stops reading here is still told of new data.
        rev.ready = 0;
        if (!s.recv_live) rearm(c, s);
      }
    }
    return static_cast<long>(copied);
  }

  if (s.eof) {
    rev.ready = 0;
    rev.eof = 1;
    return 0;
  }
  if (s.error != 0) {
    rev.ready = 0;
    rev.error = 1;
    c.error = 1;
    errno = s.error;
    if (c.log != nullptr) {
      VIGIL_LOG(*c.log, kInfo, s.error, "*%llu recv() failed",
                static_cast<unsigned long long>(c.number));
    }
    return kIoError;
  }
  if (s.recv_live) {
    rev.ready = 0;
    return kIoAgain;
  }
  // No receive in the kernel (it stopped: no buffers, too much pending, or
  // never started): read the socket directly, and arm the receive again
  // once it is drained.
  const long n = unix_recv(c, buf, size);
  // Drained (kIoAgain, or a short read): the receive goes on in the kernel.
  if (n == kIoAgain || (n > 0 && !rev.ready)) {
    if (!rearm(c, s)) return kIoError;
  }
  return n;
}

bool UringBackend::rearm(Connection& c, Slot& s) {
  if (Status st = arm_recv(c, s); !st) {
    c.read->error = 1;
    c.error = 1;
    VIGIL_LOG(loop_->log(), kAlert, st.err(), "io_uring: %s", st.message().c_str());
    return false;
  }
  return true;
}

long UringBackend::ring_recv_chain(Connection& c, Chain* chain, off_t limit) {
  long total = 0;
  const std::size_t cap = limit > 0 ? static_cast<std::size_t>(limit) : SIZE_MAX;
  for (Chain* cl = chain; cl != nullptr && static_cast<std::size_t>(total) < cap; cl = cl->next) {
    Buf* b = cl->buf;
    std::size_t room = std::min(b->free_space(), cap - static_cast<std::size_t>(total));
    if (room == 0) continue;
    const long n = ring_recv(c, b->last, room);
    if (n <= 0) return total > 0 ? total : n;
    b->last += n;
    total += n;
    if (static_cast<std::size_t>(n) < room) break;  // drained
  }
  return total;
}

}  // namespace vigil::backends
