#include "upstream/relay.h"

#include <cerrno>

#include "event/tls/tls.h"

namespace vigil::upstream {

bool relay(Connection& src, Connection& dst, Buf& buf, bool& src_eof, bool& dst_shut,
           bool& progress, std::uint64_t* counter, off_t read_limit) {
  for (;;) {
    bool moved = false;
    if (buf.pos < buf.last && dst.write->ready) {
      long n = dst.send(dst, buf.pos, static_cast<std::size_t>(buf.last - buf.pos));
      if (n == kIoError) return false;
      if (n > 0) {
        buf.pos += n;
        if (buf.pos == buf.last) buf.pos = buf.last = buf.start;
        moved = true;
      }
    }
    if (!src_eof && buf.last < buf.end && src.read->ready && read_limit != 0) {
      auto room = static_cast<std::size_t>(buf.end - buf.last);
      if (read_limit > 0 && static_cast<std::size_t>(read_limit) < room) {
        room = static_cast<std::size_t>(read_limit);
      }
      long n = src.recv(src, buf.last, room);
      if (n == kIoError) return false;
      if (n == 0) {
        src_eof = true;
        moved = true;
      } else if (n > 0) {
        buf.last += n;
        if (counter != nullptr) *counter += static_cast<std::uint64_t>(n);
        if (read_limit > 0) read_limit -= n;
        moved = true;
      }
    }
    if (!moved) break;
    progress = true;
  }
  // Everything the side sent is delivered: pass its EOF on as a half-close.
  if (src_eof && buf.pos == buf.last && !dst_shut) {
    dst_shut = true;
    tls_send_close_notify(dst);  // a TLS side sees a clean end first
    if (shutdown_write(dst) == -1 && errno != ENOTCONN) return false;
  }
  return true;
}

}  // namespace vigil::upstream
