// The TLS I/O functions a connection gets after its handshake (nginx's
// ngx_ssl_recv, ngx_ssl_write, ngx_ssl_recv_chain, ngx_ssl_send_chain).
// Same contracts as the socket ones in io.cc: >0 bytes, 0 EOF, kIoAgain,
// kIoError; the chain sender returns the first unsent link or kChainError.
#include <openssl/err.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>

#include "event/file_read.h"
#include "event/tls/buffers.h"
#include "event/tls/context.h"
#include "event/tls/tls.h"
#include "vigil/core/log.h"
#include "vigil/event/loop.h"

namespace vigil {
namespace {

constexpr off_t kMaxChunk = 0x7ffff000;

void log_failure(Connection& c, const char* call, int sys) {
  const std::string detail = tls_error_text();
  if (c.log == nullptr) return;
  // Peers that reset or send bad records are routine: [info].
  VIGIL_LOG(*c.log, kInfo, sys, "*%llu %s failed%s", static_cast<unsigned long long>(c.number),
            call, detail.c_str());
}

// Empties this thread's OpenSSL error queue when something is in it, before
// a call whose failure SSL_get_error() may be asked about: that function
// reads the queue first, so an error left there by other code (an
// embedder's call it never cleared) would make a clean close look failed.
// nginx calls ERR_clear_error() every time; that clears all 16 slots (about
// 7% of the user time of a small keep-alive request over TLS), where a peek
// at an empty queue costs a thread-local read.
inline void drop_stale_errors() {
  if (ERR_peek_error() != 0) ERR_clear_error();
}

// Why SSL_read_ex/SSL_write_ex on `ssl` failed. The usual failure, a socket
// that would block, is read from the connection's state and the BIO's retry
// flags, exactly as SSL_get_error() decides it when the error queue is
// empty. Other failures ask SSL_get_error(), which looks at the queue first:
// drop_stale_errors() before each call means what it finds is this call's.
int failure(SSL* ssl, int rc) {
  const int want = SSL_want(ssl);
  if (want == SSL_READING && BIO_should_read(SSL_get_rbio(ssl))) return SSL_ERROR_WANT_READ;
  if (want == SSL_WRITING && BIO_should_write(SSL_get_wbio(ssl))) return SSL_ERROR_WANT_WRITE;
  return SSL_get_error(ssl, rc);
}

// One SSL_write_ex of at most `size` bytes: >0 written, kIoAgain, kIoError.
long write_some(Connection& c, const char* buf, std::size_t size) {
  TlsConnection& t = *c.ssl;
  Event& wev = *c.write;
  // A retry after WANT_WRITE must offer at least what the blocked call did.
  if (size < t.write_pending) return kIoError;
  std::size_t written = 0;
  drop_stale_errors();
  const int rc = SSL_write_ex(t.ssl, buf, size, &written);
  if (rc == 1) {
    t.write_pending = 0;
    c.sent += static_cast<off_t>(written);
    return static_cast<long>(written);
  }
  const int err = failure(t.ssl, rc);
  if (err == SSL_ERROR_WANT_WRITE || err == SSL_ERROR_WANT_READ) {
    // WANT_READ on a write happens only around a key update the peer asked
    // for; the next readable or writable event retries it.
    t.write_pending = size;
    wev.ready = 0;
    return kIoAgain;
  }
  wev.error = 1;
  c.error = 1;
  log_failure(c, "SSL_write()", err == SSL_ERROR_SYSCALL ? errno : 0);
  return kIoError;
}

// The file buffer of a loop: one per worker, made at the first file sent
// over TLS without kTLS and kept until the worker exits, so no request
// allocates one. Connections take turns: `owner` is the one whose bytes it
// holds now.
struct LoopStage {
  char buf[kTlsStageSize];
  const TlsConnection* owner = nullptr;
};

const char kStageKey = 0;  // the address is the key of our per-loop state

LoopStage* loop_stage(Connection& c) {
  return c.loop != nullptr ? c.loop->context_or_make<LoopStage>(&kStageKey) : nullptr;
}

// Makes t.stage point at the next unsent file bytes of `b` (at most
// kTlsStageSize). Bytes already staged and not yet sent are kept; when another
// connection used the loop's buffer meanwhile, they are read again from the
// file (the same bytes: a retry after WANT_WRITE offers the same length).
bool stage_file(Connection& c, const Buf& b, std::size_t want) {
  TlsConnection& t = *c.ssl;
  LoopStage* ls = loop_stage(c);
  if (ls == nullptr) {
    if (c.log != nullptr) {
      VIGIL_LOG(*c.log, kAlert, 0, "*%llu no memory for a TLS file buffer",
                static_cast<unsigned long long>(c.number));
    }
    return false;
  }
  if (t.stage_fd == b.file_fd && t.stage_off + static_cast<off_t>(t.stage_pos) == b.file_pos &&
      t.stage_pos < t.stage_len) {
    if (ls->owner == &t) return true;
    const std::size_t left = t.stage_len - t.stage_pos;
    ls->owner = nullptr;
    if (!read_file_exact(c, b.file_fd, b.file_pos, ls->buf, left)) return false;
    ls->owner = &t;
    t.stage = ls->buf;
    t.stage_off = b.file_pos;
    t.stage_len = left;
    t.stage_pos = 0;
    return true;
  }
  if (want > kTlsStageSize) want = kTlsStageSize;
  ls->owner = nullptr;
  const std::size_t n = read_file_some(c, b.file_fd, b.file_pos, ls->buf, want);
  if (n == 0) return false;
  ls->owner = &t;
  t.stage = ls->buf;
  t.stage_fd = b.file_fd;
  t.stage_off = b.file_pos;
  t.stage_len = n;
  t.stage_pos = 0;
  return true;
}

#ifdef BIO_get_ktls_send
// kTLS: the kernel encrypts, so the file goes out with sendfile semantics.
long send_file_ktls(Connection& c, Buf& b, off_t budget) {
  TlsConnection& t = *c.ssl;
  std::size_t size = b.size();
  if (static_cast<off_t>(size) > budget) size = static_cast<std::size_t>(budget);
  ERR_clear_error();
  const ossl_ssize_t n = SSL_sendfile(t.ssl, b.file_fd, b.file_pos, size, 0);
  if (n > 0) {
    c.sent += n;
    return static_cast<long>(n);
  }
  const int err = SSL_get_error(t.ssl, static_cast<int>(n));
  if (err == SSL_ERROR_WANT_WRITE) {
    c.write->ready = 0;
    return kIoAgain;
  }
  c.error = 1;
  c.write->error = 1;
  log_failure(c, "SSL_sendfile()", err == SSL_ERROR_SYSCALL ? errno : 0);
  return kIoError;
}
#endif

long watch_reads_cb(BIO* bio, int oper, const char*, std::size_t len, int, long, int ret,
                    std::size_t* processed) {
  if (oper == (BIO_CB_READ | BIO_CB_RETURN)) {
    auto* t = reinterpret_cast<TlsConnection*>(BIO_get_callback_arg(bio));
    if (t != nullptr) {
      const std::size_t got = ret > 0 && processed != nullptr ? *processed : 0;
      t->drained = got < len ? 1 : 0;
    }
  }
  return ret;
}

// The peer ended the stream (close_notify, or the socket's EOF) after
// `total` bytes of this call. The end is reported by the next call, which
// returns 0 at once (eof is set): with bytes in hand it stays `ready`, so a
// caller that reads until it would block makes that call. The socket has
// nothing more to say, so no readiness event would ever tell it to (nginx's
// ngx_ssl_recv sets ready when it returns bytes before the end).
long at_eof(Event& rev, std::size_t total) {
  rev.eof = 1;
  rev.ready = total > 0 ? 1 : 0;
  return static_cast<long>(total);
}

}  // namespace

void tls_watch_reads(TlsConnection& t) {
  BIO* bio = SSL_get_rbio(t.ssl);
  if (bio == nullptr) return;
  BIO_set_callback_arg(bio, reinterpret_cast<char*>(&t));
  BIO_set_callback_ex(bio, watch_reads_cb);
}

bool tls_has_pending(const Connection& c) {
  return c.ssl != nullptr && c.ssl->ssl != nullptr && SSL_has_pending(c.ssl->ssl) == 1;
}

long tls_recv(Connection& c, char* buf, std::size_t size) {
  TlsConnection& t = *c.ssl;
  Event& rev = *c.read;
  if (t.read_error) {
    rev.ready = 0;
    return kIoError;
  }
  if (rev.eof) return 0;
  if (size == 0) return 0;

  // Only a read() made by this call says anything about the socket now: an
  // older short read may predate data whose readiness event brought us here.
  t.drained = 0;
  std::size_t total = 0;
  while (size > 0) {
    std::size_t got = 0;
    drop_stale_errors();
    const int rc = SSL_read_ex(t.ssl, buf, size, &got);
    if (rc == 1) {
      total += got;
      buf += got;
      size -= got;
      // The socket was empty at OpenSSL's last read and OpenSSL holds no
      // more bytes: another SSL_read would only meet EAGAIN (nginx's short
      // read rule for plain sockets). With EPOLLRDHUP seen the FIN is next:
      // read on to find it.
      if (size > 0 && t.drained && !rev.pending_eof && SSL_has_pending(t.ssl) == 0) {
        rev.ready = 0;
        return static_cast<long>(total);
      }
      continue;
    }
    const int err = failure(t.ssl, rc);
    switch (err) {
      case SSL_ERROR_WANT_READ:
        rev.ready = 0;
        return total > 0 ? static_cast<long>(total) : kIoAgain;
      case SSL_ERROR_WANT_WRITE:
        // Our answer to a key update is stuck behind a full socket buffer:
        // try again on the next pass rather than wait for an event that the
        // protocol does not expect.
        rev.ready = 0;
        if (c.loop != nullptr) c.loop->posted_next().post(rev);
        return total > 0 ? static_cast<long>(total) : kIoAgain;
      case SSL_ERROR_ZERO_RETURN:  // close_notify: a clean end of the stream
        return at_eof(rev, total);
      default: {
        const int sys = err == SSL_ERROR_SYSCALL ? errno : 0;
        if (err == SSL_ERROR_SYSCALL && sys == 0 && ERR_peek_error() == 0) {
          // EOF without close_notify: truncation is the protocol's concern
          // (HTTP has its own framing), so it reads as an ordinary EOF.
          return at_eof(rev, total);
        }
        log_failure(c, "SSL_read()", sys);
        if (total > 0) {
          t.read_error = 1;
          return static_cast<long>(total);
        }
        rev.ready = 0;
        rev.error = 1;
        c.error = 1;
        return kIoError;
      }
    }
  }
  // The caller's buffer is full; more may be waiting in the socket or inside
  // OpenSSL. Bytes OpenSSL already holds will never raise a readiness event,
  // so the handler is run again on the next pass (posted_next) even if it
  // stops reading now.
  rev.ready = 1;
  if (c.loop != nullptr && SSL_has_pending(t.ssl) == 1) c.loop->posted_next().post(rev);
  return static_cast<long>(total);
}

long tls_send(Connection& c, const char* buf, std::size_t size) {
  if (size == 0) return 0;
  // Partial-write mode returns after each record: keep going while it flows.
  // A record that could not go out stays pending inside OpenSSL with
  // write_pending set; the caller's next call (from buf + the count
  // returned, at least as long) completes it.
  std::size_t done = 0;
  while (done < size) {
    const long n = write_some(c, buf + done, size - done);
    if (n <= 0) return done > 0 ? static_cast<long>(done) : n;
    done += static_cast<std::size_t>(n);
  }
  return static_cast<long>(done);
}

long tls_recv_chain(Connection& c, Chain* chain, off_t limit) {
  long total = 0;
  off_t left = limit > 0 ? limit : kMaxChunk;
  for (Chain* cl = chain; cl != nullptr && left > 0; cl = cl->next) {
    Buf* b = cl->buf;
    std::size_t room = b->free_space();
    if (room == 0) continue;
    if (static_cast<off_t>(room) > left) room = static_cast<std::size_t>(left);
    const long n = tls_recv(c, b->last, room);
    if (n == kIoAgain || n == kIoError || n == 0) return total > 0 ? total : n;
    b->last += n;
    total += n;
    left -= n;
    if (static_cast<std::size_t>(n) < room) break;
  }
  return total;
}

namespace {

// Memory buffers in a row, each smaller than a record (a response head and a
// short body, a chunk header and its chunk), go out as one record as nginx's
// ssl_buffer_size does: one SSL_write and one send() instead of one each, and
// a client that reads one record gets the whole small response.
constexpr std::size_t kGatherSize = 16384;

bool gatherable(const Chain* cl) {
  if (cl->buf->in_file || cl->buf->size() >= kGatherSize) return false;
  for (const Chain* next = cl->next; next != nullptr; next = next->next) {
    if (next->buf->empty()) continue;
    return !next->buf->in_file;
  }
  return false;
}

// Copies up to `room` bytes of the memory buffers from `cl` on into `out`;
// the chain is left as it is until the write says how much went.
std::size_t gather(const Chain* cl, char* out, std::size_t room) {
  std::size_t n = 0;
  for (; cl != nullptr && n < room; cl = cl->next) {
    const Buf& b = *cl->buf;
    if (b.in_file) break;
    const std::size_t take = b.size() < room - n ? b.size() : room - n;
    std::memcpy(out + n, b.pos, take);
    n += take;
  }
  return n;
}

void consume(Chain* cl, std::size_t n) {
  for (; cl != nullptr && n > 0; cl = cl->next) {
    Buf& b = *cl->buf;
    const std::size_t take = b.size() < n ? b.size() : n;
    b.pos += take;
    n -= take;
  }
}

}  // namespace

Chain* tls_send_chain(Connection& c, Chain* in, off_t limit) {
  TlsConnection& t = *c.ssl;
  const off_t max = (limit <= 0 || limit > kMaxChunk) ? kMaxChunk : limit;
  off_t sent = 0;
  Chain* cl = in;
  while (cl != nullptr && cl->buf->empty()) cl = cl->next;

  while (cl != nullptr && sent < max) {
    Buf& b = *cl->buf;
    long n;
    if (gatherable(cl)) {
      // A retry after WANT_WRITE gathers the same bytes again (the chain has
      // not moved), at least as many as the blocked call offered.
      char scratch[kGatherSize];
      std::size_t room = kGatherSize;
      if (static_cast<off_t>(room) > max - sent) room = static_cast<std::size_t>(max - sent);
      if (room < t.write_pending && t.write_pending <= kGatherSize) room = t.write_pending;
      n = write_some(c, scratch, gather(cl, scratch, room));
      if (n > 0) consume(cl, static_cast<std::size_t>(n));
    } else if (!b.in_file) {
      std::size_t want = b.size();
      if (static_cast<off_t>(want) > max - sent) want = static_cast<std::size_t>(max - sent);
      if (want < t.write_pending) want = t.write_pending < b.size() ? t.write_pending : b.size();
      n = write_some(c, b.pos, want);
      if (n > 0) b.pos += n;
#ifdef BIO_get_ktls_send
    } else if (t.ktls_send) {
      n = send_file_ktls(c, b, max - sent);
      if (n > 0) b.file_pos += n;
#endif
    } else {
      // No kTLS: the file is read into the loop's buffer a piece at a time
      // (never loaded whole) and encrypted from there, a record per call.
      if (!stage_file(c, b, b.size())) {
        c.error = 1;
        return kChainError;
      }
      std::size_t want = t.stage_len - t.stage_pos;
      if (static_cast<off_t>(want) > max - sent) want = static_cast<std::size_t>(max - sent);
      if (want < t.write_pending) want = t.write_pending;  // never beyond the stage
      n = write_some(c, t.stage + t.stage_pos, want);
      if (n > 0) {
        t.stage_pos += static_cast<std::size_t>(n);
        b.file_pos += n;
      }
    }
    if (n == kIoError) return kChainError;
    if (n == kIoAgain) return cl;
    sent += n;
    while (cl != nullptr && cl->buf->empty()) cl = cl->next;
  }
  if (cl == nullptr) tls_release_stage(c);
  return cl;
}

void tls_release_stage(Connection& c) {
  TlsConnection* t = c.ssl;
  if (t == nullptr) return;
  if (t->stage != nullptr && c.loop != nullptr) {
    auto* ls = static_cast<LoopStage*>(c.loop->context(&kStageKey));
    if (ls != nullptr && ls->owner == t) ls->owner = nullptr;
  }
  t->stage = nullptr;
  t->stage_len = t->stage_pos = 0;
  t->stage_off = 0;
  t->stage_fd = -1;
}

void tls_exit_loop(EventLoop& loop) {
  tls_exit_warm(loop);
  loop.drop_context<LoopStage>(&kStageKey);
}

}  // namespace vigil
