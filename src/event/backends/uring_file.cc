// The io_uring backend's file sends for ring connections (see uring.h): a
// file buffer in a connection's send chain goes to the socket through the
// ring instead of a synchronous sendfile(2), in one of two ways:
//
//  - read+send (VIGIL_URING_FILE=read): IORING_OP_READ_FIXED of the range into a buffer
//    registered with the ring, linked (IOSQE_IO_LINK) to an IORING_OP_SEND
//    of that buffer (MSG_WAITALL: the kernel waits for room itself). A
//    buffer the kernel refuses to register is read with IORING_OP_READ.
//  - splice (VIGIL_URING_FILE=splice): IORING_OP_SPLICE file -> pipe linked
//    to IORING_OP_SPLICE pipe -> socket; the pipe (F_SETPIPE_SZ) belongs to
//    the FileSend and is reused. SPLICE resolves its input descriptor in an
//    io-wq worker, later than the handler may close it, so it splices from a
//    dup of the file's descriptor.
//
// Neither is the default: synchronous sendfile(2) measured cheaper (see
// init_file_io), so VIGIL_URING_FILE=read or splice turns them on.
//
// One FileSend per connection at a time, at most kFileBufferSize bytes. The
// chain is not consumed until its last completion: send_chain returns the
// file buffer with the write event not ready, the completion makes the
// write event ready, and the handler's next send_chain consumes what the
// socket took (the Buf's file range, so the handler keeps the file open
// until then). A short READ or first SPLICE breaks the link; what was read
// is sent by itself, and nothing read (the file shrank) is the error
// sendfile's 0 is. A closed connection's FileSend is cancelled; if its
// requests were never submitted they become NOPs (the handler has closed the
// file by then), and the backend closes the socket after the last
// completion. Completions carry the FileSend's index and the connection's
// generation; a FileSend is reused only after its last completion.
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <new>
#include <string_view>

#include "event/backends/dispatch.h"
#include "event/backends/uring.h"
#include "vigil/core/log.h"
#include "vigil/event/loop.h"

namespace vigil::backends {

namespace {

using namespace uring_tag;

bool has_op(const io_uring_probe* p, int op) {
  return p != nullptr && ::io_uring_opcode_supported(p, op) != 0;
}

void close_fd(int& fd) {
  if (fd != -1) ::close(fd);
  fd = -1;
}

}  // namespace

void UringBackend::init_file_io() {
  // VIGIL_URING_FILE=read|splice|sendfile chooses. The default is sendfile(2)
  // (uring_send.cc): on the 1 MiB benchmark it costs the server 118 us per
  // request, read+send 351 (two copies of every byte: page cache -> buffer
  // -> socket, where sendfile hands the socket the page cache's pages) and
  // splice 211 (every SPLICE runs in an io-wq worker thread); see
  // docs/benchmarks-http.md. The ring modes stay for measuring and for a
  // kernel or a device where the balance differs.
  FileMode want = FileMode::kSendfile;
  if (const char* env = std::getenv("VIGIL_URING_FILE"); env != nullptr && *env != '\0') {
    const std::string_view v(env);
    if (v == "read") want = FileMode::kReadSend;
    if (v == "splice") want = FileMode::kSplice;
  }
  file_mode_ = FileMode::kSendfile;
  if (want == FileMode::kSendfile) return;
  io_uring_probe* p = ::io_uring_get_probe_ring(&ring_);
  const bool ok = want == FileMode::kSplice
                      ? has_op(p, IORING_OP_SPLICE) && has_op(p, IORING_OP_POLL_ADD)
                      : has_op(p, IORING_OP_READ) && has_op(p, IORING_OP_SEND);
  if (p != nullptr) ::io_uring_free_probe(p);
  if (!ok) {
    VIGIL_LOG(loop_->log(), kNotice, 0,
              "io_uring: the kernel cannot send files through the ring, sendfile() instead");
    return;
  }
  file_mode_ = want;
}

void UringBackend::done_file_io() {
  // After cancel_everything(): no request uses a FileSend any more.
  for (auto& f : files_) {
    if (f->orphan) close_fd(f->fd);
    close_fd(f->splice_fd);
    close_fd(f->pipe_r);
    close_fd(f->pipe_w);
  }
  files_.clear();
  free_files_ = nullptr;
  if (file_buffers_registered_ && ring_open_) (void)::io_uring_unregister_buffers(&ring_);
  file_buffers_registered_ = false;
  if (file_buffers_ != nullptr) {
    ::munmap(file_buffers_, std::size_t{kMaxFileSends} * kFileBufferSize);
  }
  file_buffers_ = nullptr;
}

bool UringBackend::open_pipe(FileSend& f) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) == -1) {
    VIGIL_LOG(loop_->log(), kAlert, errno, "pipe2() failed");
    return false;
  }
  f.pipe_r = p[0];
  f.pipe_w = p[1];
  // A pipe the size of a file send: one SPLICE pair moves it all. The
  // kernel may refuse (pipe-user-pages-soft): then the pipe's own size.
  (void)::fcntl(p[1], F_SETPIPE_SZ, static_cast<int>(kFileBufferSize));
  return true;
}

UringBackend::FileSend* UringBackend::get_file_send(Connection& c) {
  FileSend* f = free_files_;
  if (f != nullptr) {
    free_files_ = f->next;
  } else {
    // Warm-up only: FileSends (their buffers, their pipes) are reused.
    if (files_.size() >= kMaxFileSends) return nullptr;
    std::unique_ptr<FileSend> fresh(new (std::nothrow) FileSend);
    if (!fresh) return nullptr;
    fresh->index = static_cast<std::uint32_t>(files_.size());
    if (file_mode_ == FileMode::kReadSend) {
      if (file_buffers_ == nullptr) {
        void* mem =
            ::mmap(nullptr, std::size_t{kMaxFileSends} * kFileBufferSize, PROT_READ | PROT_WRITE,
                   MAP_ANONYMOUS | MAP_PRIVATE | MAP_NORESERVE, -1, 0);
        if (mem == MAP_FAILED) return nullptr;
        file_buffers_ = static_cast<char*>(mem);
        // A sparse table: each buffer is registered when first used. No
        // table (or a buffer the kernel refuses, RLIMIT_MEMLOCK): plain READ.
        file_buffers_registered_ =
            enable() && ::io_uring_register_buffers_sparse(&ring_, kMaxFileSends) == 0;
      }
      fresh->buf = file_buffers_ + std::size_t{fresh->index} * kFileBufferSize;
      if (file_buffers_registered_) {
        iovec iov{fresh->buf, kFileBufferSize};
        const __u64 tag = 0;
        if (::io_uring_register_buffers_update_tag(&ring_, fresh->index, &iov, &tag, 1) == 1) {
          fresh->buf_index = static_cast<int>(fresh->index);
        }
      }
    } else if (!open_pipe(*fresh)) {
      return nullptr;
    }
    f = fresh.get();
    files_.push_back(std::move(fresh));
  }
  f->slot = static_cast<std::uint32_t>(slot_of(c) - slots_.get());
  f->generation = c.generation;
  f->fd = c.fd;
  f->file_fd = -1;
  f->pos = 0;
  f->len = f->got = f->sent = f->in_pipe = 0;
  f->outstanding = 0;
  f->read_done = f->orphan = f->truncated = false;
  f->error = 0;
  f->sqes[0] = f->sqes[1] = nullptr;
  f->next = nullptr;
  return f;
}

void UringBackend::put_file_send(FileSend* f) {
  close_fd(f->splice_fd);
  f->fd = -1;
  if (file_mode_ == FileMode::kSplice && f->in_pipe > 0) {
    // Bytes left in the pipe (an error, a cancel) would go to the next
    // socket: a new pipe.
    close_fd(f->pipe_r);
    close_fd(f->pipe_w);
    f->in_pipe = 0;
    if (!open_pipe(*f)) return;  // this FileSend is not reused
  }
  f->next = free_files_;
  free_files_ = f;
}

bool UringBackend::queue_file_send(FileSend& f) {
  // The two linked requests must go to the kernel in one submission: a
  // link cut by a full queue would let the SEND run before its READ.
  if (::io_uring_sq_space_left(&ring_) < 2 && submit() < 0) return false;
  io_uring_sqe* in = ::io_uring_get_sqe(&ring_);
  io_uring_sqe* out = in != nullptr ? ::io_uring_get_sqe(&ring_) : nullptr;
  if (out == nullptr) return false;  // cannot happen after the check above
  if (file_mode_ == FileMode::kReadSend) {
    if (f.buf_index >= 0) {
      ::io_uring_prep_read_fixed(in, f.file_fd, f.buf, f.len, static_cast<__u64>(f.pos),
                                 f.buf_index);
    } else {
      ::io_uring_prep_read(in, f.file_fd, f.buf, f.len, static_cast<__u64>(f.pos));
    }
    ::io_uring_prep_send(out, f.fd, f.buf, f.len, MSG_NOSIGNAL | MSG_WAITALL);
  } else {
    ::io_uring_prep_splice(in, f.splice_fd, static_cast<std::int64_t>(f.pos), f.pipe_w, -1, f.len,
                           0);
    ::io_uring_prep_splice(out, f.pipe_r, -1, f.fd, -1, f.len, 0);
  }
  in->flags |= IOSQE_IO_LINK;
  ::io_uring_sqe_set_data64(in, make(kFileIn, f.generation, f.index));
  ::io_uring_sqe_set_data64(out, make(kFileOut, f.generation, f.index));
  f.sqes[0] = in;
  f.sqes[1] = out;
  f.sq_tail = ring_.sq.sqe_tail;
  f.outstanding = 2;
  return true;
}

bool UringBackend::queue_file_out(FileSend& f) {
  // The rest of what was read (a short send, or a link the short read
  // broke): only the socket and our buffer or pipe, never the file.
  f.sqes[0] = f.sqes[1] = nullptr;
  if (file_mode_ == FileMode::kReadSend) {
    Status st;
    io_uring_sqe* out = next_sqe(&st);
    if (out == nullptr) return false;
    ::io_uring_prep_send(out, f.fd, f.buf + f.sent, f.got - f.sent, MSG_NOSIGNAL | MSG_WAITALL);
    ::io_uring_sqe_set_data64(out, make(kFileOut, f.generation, f.index));
    f.outstanding = 1;
    return true;
  }
  // Splice: wait for room first (a nonblocking socket answers EAGAIN to a
  // SPLICE, which io_uring does not retry by itself).
  if (::io_uring_sq_space_left(&ring_) < 2 && submit() < 0) return false;
  io_uring_sqe* poll = ::io_uring_get_sqe(&ring_);
  io_uring_sqe* out = poll != nullptr ? ::io_uring_get_sqe(&ring_) : nullptr;
  if (out == nullptr) return false;
  ::io_uring_prep_poll_add(poll, f.fd, POLLOUT);
  poll->flags |= IOSQE_IO_LINK;
  ::io_uring_sqe_set_data64(poll, make(kFileIn, f.generation, f.index));
  ::io_uring_prep_splice(out, f.pipe_r, -1, f.fd, -1, f.in_pipe, 0);
  ::io_uring_sqe_set_data64(out, make(kFileOut, f.generation, f.index));
  f.outstanding = 2;
  return true;
}

long UringBackend::ring_send_file(Connection& c, Slot& s, Buf& b, off_t budget) {
  Event& wev = *c.write;
  if (FileSend* f = s.file; f != nullptr) {
    if (f->outstanding > 0) {
      wev.ready = 0;
      return kIoAgain;
    }
    // Finished: what the socket took leaves the chain now.
    s.file = nullptr;
    const bool same = f->file_fd == b.file_fd && f->pos == b.file_pos;
    const int err = f->error;
    const bool truncated = f->truncated;
    const std::uint32_t n = f->sent;
    put_file_send(f);
    if (err != 0 || truncated) {
      wev.error = 1;
      c.error = 1;
      errno = err != 0 ? err : EIO;
      if (c.log != nullptr) {
        if (truncated) {
          VIGIL_LOG(*c.log, kAlert, 0, "*%llu the file was truncated at %lld",
                    static_cast<unsigned long long>(c.number), static_cast<long long>(b.file_pos));
        } else {
          VIGIL_LOG(*c.log, kInfo, err, "*%llu io_uring file send failed",
                    static_cast<unsigned long long>(c.number));
        }
      }
      return kIoError;
    }
    if (same && n > 0) {
      b.file_pos += n;
      c.sent += n;
      return static_cast<long>(n);
    }
  }
  if (file_mode_ == FileMode::kSendfile) return 0;
  FileSend* f = get_file_send(c);
  if (f == nullptr) {
    ++loop_->stats().ring_file_fallbacks;
    return 0;
  }
  f->file_fd = b.file_fd;
  f->pos = b.file_pos;
  f->len = static_cast<std::uint32_t>(
      std::min<off_t>({static_cast<off_t>(b.size()), static_cast<off_t>(kFileBufferSize), budget}));
  if (file_mode_ == FileMode::kSplice) {
    f->splice_fd = ::fcntl(b.file_fd, F_DUPFD_CLOEXEC, 0);
    if (f->splice_fd == -1) {
      put_file_send(f);
      ++loop_->stats().ring_file_fallbacks;
      return 0;
    }
  }
  if (!queue_file_send(*f)) {
    put_file_send(f);
    wev.error = 1;
    c.error = 1;
    VIGIL_LOG(loop_->log(), kAlert, 0, "io_uring: cannot queue a file send");
    return kIoError;
  }
  s.file = f;
  ++loop_->stats().ring_file_sends;
  wev.ready = 0;
  return kIoAgain;
}

void UringBackend::on_file(const Completion& cqe, unsigned flags) {
  const std::uint32_t index = uring_tag::index(cqe.user_data);
  if (index >= files_.size()) return;
  FileSend& f = *files_[index];
  if (f.outstanding == 0 || f.generation != uring_tag::generation(cqe.user_data)) return;
  --f.outstanding;
  const bool splice = file_mode_ == FileMode::kSplice;
  if (uring_tag::kind(cqe.user_data) == kFileIn) {
    if (f.read_done) {
      // The POLLOUT before a retried pipe -> socket SPLICE.
      if (cqe.res < 0 && cqe.res != -ECANCELED) f.error = -cqe.res;
    } else {
      f.read_done = true;
      if (cqe.res >= 0) {
        f.got = static_cast<std::uint32_t>(cqe.res);
        if (splice) f.in_pipe = f.got;
        if (f.got == 0) f.truncated = true;  // sendfile's 0: the file shrank
      } else if (!f.orphan) {
        f.error = -cqe.res;
      }
    }
  } else if (cqe.res > 0) {
    f.sent += static_cast<std::uint32_t>(cqe.res);
    if (splice) f.in_pipe -= std::min(f.in_pipe, static_cast<std::uint32_t>(cqe.res));
  } else if (cqe.res < 0 && cqe.res != -ECANCELED && cqe.res != -EAGAIN && cqe.res != -EINTR &&
             !f.orphan) {
    f.error = -cqe.res;  // ECANCELED: the short read broke the link (or our cancel)
  }
  if (f.outstanding > 0) return;

  if (f.orphan) {
    // The connection is gone: the FIN, and the FileSend is free again.
    close_fd(f.fd);
    put_file_send(&f);
    return;
  }
  const std::uint32_t left = splice ? f.in_pipe : f.got - std::min(f.got, f.sent);
  if (f.error == 0 && !f.truncated && left > 0) {
    if (queue_file_out(f)) return;
    f.error = EIO;
  }
  Connection& c = loop_->pool().connections()[f.slot];
  if (f.error != 0) {
    c.write->error = 1;
    c.error = 1;
  }
  make_ready_write(c, flags);
}

bool UringBackend::release_file(Slot& s) {
  FileSend* f = s.file;
  s.file = nullptr;
  if (f == nullptr) return false;
  if (f->outstanding == 0) {
    put_file_send(f);
    return false;
  }
  f->orphan = true;
  if (f->sqes[0] != nullptr && static_cast<int>(f->sq_tail - ring_.sq.sqe_head) > 0) {
    // Never submitted, and the handler has closed (or may reuse) the file's
    // descriptor: the requests become NOPs, whose completions end the
    // FileSend as usual.
    for (int i = 0; i < 2; ++i) {
      io_uring_sqe* sqe = f->sqes[i];
      const std::uint64_t ud = sqe->user_data;
      ::io_uring_prep_nop(sqe);
      ::io_uring_sqe_set_data64(sqe, ud);
      if (i == 0) sqe->flags |= IOSQE_IO_LINK;
    }
  } else {
    (void)cancel(make(kFileIn, f->generation, f->index));
    (void)cancel(make(kFileOut, f->generation, f->index));
  }
  (void)submit();
  return true;
}

}  // namespace vigil::backends
