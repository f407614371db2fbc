// The default socket I/O primitives (nginx's ngx_unix_recv, ngx_unix_send,
// ngx_readv_chain and ngx_linux_sendfile_chain). They only touch the
// connection's fd and event flags, never the loop, so they work on any
// Connection, pooled or built by hand.

#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdint>

#include "core/fault.h"
#include "event/file_read.h"
#include "vigil/core/log.h"
#include "vigil/event/connection.h"

namespace vigil {
namespace {

#ifdef IOV_MAX
constexpr int kIovMax = IOV_MAX;
#else
constexpr int kIovMax = 1024;  // Linux's UIO_MAXIOV
#endif

// Linux transfers at most this much per sendfile()/write call anyway
// (MAX_RW_COUNT); asking for more only hides how much was really sent.
constexpr off_t kMaxChunk = 0x7ffff000;

// Errors a peer causes by going away: routine for a server, logged at info
// (nginx's ngx_connection_error does the same). Anything else means a bug or
// a broken system and is logged as an error.
bool is_peer_error(int err) {
  switch (err) {
    case ECONNRESET:
    case EPIPE:
    case ENOTCONN:
    case ETIMEDOUT:
    case ECONNREFUSED:
    case ENETDOWN:
    case ENETUNREACH:
    case EHOSTDOWN:
    case EHOSTUNREACH:
      return true;
    default:
      return false;
  }
}

void log_io_error(const Connection& c, int err, const char* call) {
  if (c.log == nullptr) return;
  const LogLevel level = is_peer_error(err) ? LogLevel::kInfo : LogLevel::kError;
  if (c.log->enabled(level)) {
    c.log->write(level, err, "*%llu %s failed", static_cast<unsigned long long>(c.number), call);
  }
}

bool would_block(int err) {
  return err == EAGAIN || err == EWOULDBLOCK;
}

// A read of `n` bytes out of `asked` succeeded: decide whether more may be
// waiting. A short read normally means the socket is drained; after
// EPOLLRDHUP (pending_eof) it means the peer's FIN is next, so the event stays
// ready and is marked eof: the caller's next read returns 0 at once.
void after_read(Event& rev, std::size_t n, std::size_t asked) {
  if (n < asked) {
    if (rev.pending_eof) {
      rev.eof = 1;
    } else {
      rev.ready = 0;
    }
  }
}

long read_failed(Connection& c, Event& rev, int err, const char* call) {
  rev.ready = 0;
  if (would_block(err)) return kIoAgain;
  rev.error = 1;
  c.error = 1;
  log_io_error(c, err, call);
  return kIoError;
}

// Moves the sent marks of the chain forward by `n` bytes, starting at `cl`.
// Returns the first link that still holds data (nullptr when none).
Chain* consume(Chain* cl, std::size_t n) {
  for (; cl != nullptr; cl = cl->next) {
    Buf* b = cl->buf;
    const std::size_t size = b->size();
    if (size == 0) continue;
    if (n == 0) return cl;
    const std::size_t take = n < size ? n : size;
    if (b->in_file) {
      b->file_pos += static_cast<off_t>(take);
    } else {
      b->pos += take;
    }
    n -= take;
    if (take < size) return cl;
  }
  return nullptr;
}

Chain* skip_empty(Chain* cl) {
  while (cl != nullptr && cl->buf->empty()) cl = cl->next;
  return cl;
}

// One sendmsg() of the memory buffers starting at `cl`, up to `budget` bytes.
// sendmsg rather than writev for MSG_NOSIGNAL: a peer that went away must
// cost an EPIPE, not the process.
long send_memory(Connection& c, Chain* cl, off_t budget, std::size_t* asked) {
  iovec iov[kIovMax];
  int niov = 0;
  std::size_t total = 0;
  const auto cap = static_cast<std::size_t>(budget);

  for (; cl != nullptr && total < cap; cl = cl->next) {
    Buf* b = cl->buf;
    if (b->in_file) break;
    std::size_t size = b->size();
    if (size == 0) continue;
    if (size > cap - total) size = cap - total;
    if (niov > 0 && static_cast<char*>(iov[niov - 1].iov_base) + iov[niov - 1].iov_len == b->pos) {
      iov[niov - 1].iov_len += size;  // adjacent memory: one iovec
    } else {
      if (niov == kIovMax) break;
      iov[niov].iov_base = b->pos;
      iov[niov].iov_len = size;
      ++niov;
    }
    total += size;
  }
  *asked = total;

  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = static_cast<decltype(msg.msg_iovlen)>(niov);
  for (;;) {
    const ssize_t n = VIGIL_FAULT(fault::kSend, EPIPE, ::sendmsg(c.fd, &msg, MSG_NOSIGNAL));
    if (n >= 0) return static_cast<long>(n);
    if (errno != EINTR) return -1;
  }
}

// One sendfile() from the file buffer at `cl`, merged with following buffers
// of the same file that continue where it ends, up to `budget` bytes.
long send_file(Connection& c, Chain* cl, off_t budget, std::size_t* asked) {
  const Buf* first = cl->buf;
  off_t end = first->file_pos;
  off_t total = 0;
  for (; cl != nullptr && total < budget; cl = cl->next) {
    const Buf* b = cl->buf;
    if (b->empty()) continue;
    if (!b->in_file || b->file_fd != first->file_fd || b->file_pos != end) break;
    off_t size = b->file_last - b->file_pos;
    if (size > budget - total) size = budget - total;
    total += size;
    end += size;
  }
  *asked = static_cast<std::size_t>(total);

  for (;;) {
    off_t offset = first->file_pos;  // sendfile advances its copy, not the buffer
    const ssize_t n =
        VIGIL_FAULT(fault::kSendfile, EIO,
                    ::sendfile(c.fd, first->file_fd, &offset, static_cast<std::size_t>(total)));
    if (n >= 0) return static_cast<long>(n);
    if (errno != EINTR) return -1;
  }
}

}  // namespace

long unix_recv(Connection& c, char* buf, std::size_t size) {
  Event& rev = *c.read;
  // eof was already seen (or a pending_eof short read said the FIN is next).
  if (rev.eof) return 0;
  // recv() of 0 bytes returns 0, which would be mistaken for the peer's FIN.
  if (size == 0) return 0;

  for (;;) {
    const ssize_t n = VIGIL_FAULT(fault::kRecv, ECONNRESET, ::recv(c.fd, buf, size, 0));
    if (n == 0) {
      rev.ready = 0;
      rev.eof = 1;
      return 0;
    }
    if (n > 0) {
      after_read(rev, static_cast<std::size_t>(n), size);
      return static_cast<long>(n);
    }
    const int err = errno;
    if (err == EINTR) continue;
    return read_failed(c, rev, err, "recv()");
  }
}

long unix_send(Connection& c, const char* buf, std::size_t size) {
  Event& wev = *c.write;
  for (;;) {
    const ssize_t n = VIGIL_FAULT(fault::kSend, EPIPE, ::send(c.fd, buf, size, MSG_NOSIGNAL));
    if (n >= 0) {
      if (static_cast<std::size_t>(n) < size) wev.ready = 0;  // the socket buffer is full
      c.sent += n;
      return static_cast<long>(n);
    }
    const int err = errno;
    if (err == EINTR) continue;
    if (would_block(err)) {
      wev.ready = 0;
      return kIoAgain;
    }
    wev.error = 1;
    c.error = 1;
    log_io_error(c, err, "send()");
    return kIoError;
  }
}

long readv_chain(Connection& c, Chain* chain, off_t limit) {
  Event& rev = *c.read;
  if (rev.eof) return 0;

  iovec iov[kIovMax];
  int niov = 0;
  std::size_t total = 0;
  const std::size_t cap = limit > 0 ? static_cast<std::size_t>(limit) : SIZE_MAX;

  for (Chain* cl = chain; cl != nullptr && total < cap; cl = cl->next) {
    Buf* b = cl->buf;
    std::size_t size = b->free_space();
    if (size == 0) continue;
    if (size > cap - total) size = cap - total;
    if (niov > 0 && static_cast<char*>(iov[niov - 1].iov_base) + iov[niov - 1].iov_len == b->last) {
      iov[niov - 1].iov_len += size;
    } else {
      if (niov == kIovMax) break;
      iov[niov].iov_base = b->last;
      iov[niov].iov_len = size;
      ++niov;
    }
    total += size;
  }
  // No free space: a 0-byte readv would look like the peer's FIN.
  if (total == 0) return 0;

  for (;;) {
    const ssize_t n = VIGIL_FAULT(fault::kRecv, ECONNRESET, ::readv(c.fd, iov, niov));
    if (n == 0) {
      rev.ready = 0;
      rev.eof = 1;
      return 0;
    }
    if (n > 0) {
      // Fill the buffers in the order the iovecs were built.
      std::size_t left = static_cast<std::size_t>(n);
      for (Chain* cl = chain; cl != nullptr && left > 0; cl = cl->next) {
        Buf* b = cl->buf;
        std::size_t take = b->free_space();
        if (take > left) take = left;
        b->last += take;
        left -= take;
      }
      after_read(rev, static_cast<std::size_t>(n), total);
      return static_cast<long>(n);
    }
    const int err = errno;
    if (err == EINTR) continue;
    return read_failed(c, rev, err, "readv()");
  }
}

Chain* writev_chain(Connection& c, Chain* in, off_t limit) {
  Event& wev = *c.write;
  const off_t max = (limit <= 0 || limit > kMaxChunk) ? kMaxChunk : limit;
  off_t sent = 0;
  Chain* cl = skip_empty(in);

  while (cl != nullptr && sent < max) {
    std::size_t asked = 0;
    const bool file = cl->buf->in_file;
    const long n =
        file ? send_file(c, cl, max - sent, &asked) : send_memory(c, cl, max - sent, &asked);
    if (n < 0) {
      const int err = errno;
      if (would_block(err)) {
        wev.ready = 0;
        return cl;
      }
      wev.error = 1;
      c.error = 1;
      log_io_error(c, err, file ? "sendfile()" : "writev()");
      return kChainError;
    }
    if (n == 0 && file) {
      // sendfile() copies nothing only at the end of the file: someone
      // truncated it under us, and waiting would never finish the response.
      wev.error = 1;
      c.error = 1;
      if (c.log != nullptr) {
        VIGIL_LOG(
            *c.log, kAlert, 0, "*%llu sendfile() reported that the file was truncated at %lld",
            static_cast<unsigned long long>(c.number), static_cast<long long>(cl->buf->file_pos));
      }
      return kChainError;
    }

    sent += n;
    c.sent += n;
    cl = consume(cl, static_cast<std::size_t>(n));
    if (static_cast<std::size_t>(n) < asked) {
      wev.ready = 0;  // the socket buffer is full
      return cl;
    }
  }
  return cl;  // nullptr, or the first link with data left (consume skips empty ones)
}

std::size_t read_file_some(Connection& c, int fd, off_t off, char* to, std::size_t len) {
  for (;;) {
    const ssize_t n = ::pread(fd, to, len, off);
    if (n > 0) return static_cast<std::size_t>(n);
    if (n == -1 && errno == EINTR) continue;
    if (c.log != nullptr) {
      if (n == 0) {
        VIGIL_LOG(*c.log, kAlert, 0, "*%llu file was truncated while being read",
                  static_cast<unsigned long long>(c.number));
      } else {
        VIGIL_LOG(*c.log, kCrit, errno, "*%llu pread() failed",
                  static_cast<unsigned long long>(c.number));
      }
    }
    return 0;
  }
}

bool read_file_exact(Connection& c, int fd, off_t off, char* to, std::size_t len) {
  while (len > 0) {
    const std::size_t n = read_file_some(c, fd, off, to, len);
    if (n == 0) return false;
    to += n;
    off += static_cast<off_t>(n);
    len -= n;
  }
  return true;
}

}  // namespace vigil
