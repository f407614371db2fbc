// The connection's socket as an OpenSSL BIO (see socket_bio.h).
#include "event/tls/socket_bio.h"

#include <sys/socket.h>

#include <cerrno>

#include "core/fault.h"
#include "event/tls/tls.h"

namespace vigil {
namespace {

// The errors after which the same call can succeed later (OpenSSL's
// BIO_sock_non_fatal_error, less the Windows ones).
bool retry_later(int err) {
  switch (err) {
    case EAGAIN:
#if EWOULDBLOCK != EAGAIN
    case EWOULDBLOCK:
#endif
    case EINPROGRESS:
    case EALREADY:
    case ENOTCONN:
    case EPROTO:
      return true;
    default:
      return false;
  }
}

TlsConnection* conn(BIO* b) {
  return static_cast<TlsConnection*>(BIO_get_data(b));
}

int bio_read(BIO* b, char* buf, std::size_t len, std::size_t* got) {
  TlsConnection* t = conn(b);
  BIO_clear_retry_flags(b);
  *got = 0;
  if (t == nullptr) return -1;
  for (;;) {
    const ssize_t n = VIGIL_FAULT(fault::kRecv, ECONNRESET, ::recv(t->fd, buf, len, 0));
    if (n > 0) {
      *got = static_cast<std::size_t>(n);
      // Less than asked: the socket is empty now (tls.h, `drained`).
      t->drained = static_cast<std::size_t>(n) < len ? 1 : 0;
      return 1;
    }
    if (n == -1 && errno == EINTR) continue;
    t->drained = 1;
    if (n == 0) {
      t->read_eof = 1;  // BIO_eof: OpenSSL tells a truncation from a retry by it
      return 0;
    }
    if (retry_later(errno)) BIO_set_retry_read(b);
    return -1;
  }
}

int bio_write(BIO* b, const char* buf, std::size_t len, std::size_t* put) {
  TlsConnection* t = conn(b);
  BIO_clear_retry_flags(b);
  *put = 0;
  if (t == nullptr) return -1;
  for (;;) {
    const ssize_t n = VIGIL_FAULT(fault::kSend, EPIPE, ::send(t->fd, buf, len, MSG_NOSIGNAL));
    if (n >= 0) {
      *put = static_cast<std::size_t>(n);
      return 1;
    }
    if (errno == EINTR) continue;
    if (retry_later(errno)) BIO_set_retry_write(b);
    return -1;
  }
}

long bio_ctrl(BIO* b, int cmd, long, void* ptr) {
  switch (cmd) {
    case BIO_CTRL_FLUSH:  // nothing is buffered here
      return 1;
    case BIO_CTRL_EOF: {
      const TlsConnection* t = conn(b);
      return t != nullptr && t->read_eof ? 1 : 0;
    }
    case BIO_C_GET_FD: {
      const TlsConnection* t = conn(b);
      if (t == nullptr) return -1;
      if (ptr != nullptr) *static_cast<int*>(ptr) = t->fd;
      return t->fd;
    }
    case BIO_CTRL_GET_CLOSE:
      return BIO_NOCLOSE;  // the connection pool closes the socket
    case BIO_CTRL_SET_CLOSE:
      return 1;
    default:  // no kTLS, nothing pending, no push/pop/dup (the record layer asks per record)
      return 0;
  }
}

int bio_destroy(BIO* b) {
  if (b == nullptr) return 0;
  BIO_set_data(b, nullptr);
  BIO_set_init(b, 0);
  return 1;
}

}  // namespace

BIO_METHOD* tls_socket_bio_method() {
  // A fixed type number rather than BIO_get_new_index(): every context makes
  // its method (a reload makes new contexts) and OpenSSL's counter stops at
  // 255. Nothing looks BIOs up by this number.
  constexpr int kType = BIO_TYPE_START + 60;
  BIO_METHOD* m = BIO_meth_new(kType | BIO_TYPE_SOURCE_SINK | BIO_TYPE_DESCRIPTOR, "vigil socket");
  if (m == nullptr) return nullptr;
  if (BIO_meth_set_read_ex(m, bio_read) != 1 || BIO_meth_set_write_ex(m, bio_write) != 1 ||
      BIO_meth_set_ctrl(m, bio_ctrl) != 1 || BIO_meth_set_destroy(m, bio_destroy) != 1) {
    BIO_meth_free(m);
    return nullptr;
  }
  return m;
}

BIO* tls_socket_bio(BIO_METHOD* m, TlsConnection& t) {
  BIO* b = BIO_new(m);
  if (b == nullptr) return nullptr;
  BIO_set_data(b, &t);
  BIO_set_init(b, 1);
  return b;
}

}  // namespace vigil
