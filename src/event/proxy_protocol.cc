#include "event/proxy_protocol.h"

#include <sys/socket.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <string>

#include "vigil/core/log.h"
#include "vigil/event/connection.h"
#include "vigil/event/loop.h"

namespace vigil {

namespace {

// The reader's state, in the arena until the header is read.
struct Reader {
  ProxyProtocolDone done = nullptr;
  char* partial = nullptr;  // kProxyProtocolMax bytes once a header came in pieces
  std::size_t have = 0;     // bytes of the header consumed so far
};

Reader* reader_of(Connection& c) { return static_cast<Reader*>(c.data); }

void idle_handler(Event&) {}

// The received bytes for the log: printable ASCII as is, the rest as \xNN.
std::string printable(std::string_view s) {
  std::string out;
  const std::size_t n = std::min<std::size_t>(s.size(), kProxyProtocolV1Max);
  for (std::size_t i = 0; i < n; ++i) {
    const auto ch = static_cast<unsigned char>(s[i]);
    if (ch >= 0x20 && ch < 0x7F && ch != '"' && ch != '\\') {
      out += static_cast<char>(ch);
    } else {
      static constexpr char kHex[] = "0123456789ABCDEF";
      out += "\\x";
      out += kHex[ch >> 4];
      out += kHex[ch & 0xF];
    }
  }
  return out;
}

void finish(Connection& c, bool ok) {
  Reader* r = reader_of(c);
  ProxyProtocolDone done = r->done;
  c.data = nullptr;
  if (c.read->timer_set) c.loop->del_timer(*c.read);
  done(c, ok);
}

std::string_view arena_text(Connection& c, std::string_view s) {
  char* p = c.arena->dup(s.data(), s.size());
  return p == nullptr ? std::string_view{} : std::string_view(p, s.size());
}

std::string_view arena_port(Connection& c, int port) {
  char buf[8];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, port);
  (void)ec;
  return arena_text(c, std::string_view(buf, static_cast<std::size_t>(end - buf)));
}

// Keeps the parsed header in the arena; false when the arena is exhausted.
bool keep(Connection& c, const ProxyProtocolHeader& h) {
  auto* info = c.arena->make<ProxyProtocolInfo>();
  if (info == nullptr) return false;
  info->header = h;
  info->header.tlvs = {};
  if (!h.tlvs.empty()) {
    info->header.tlvs = arena_text(c, h.tlvs);
    if (info->header.tlvs.empty()) return false;
  }
  if (h.family != AF_UNSPEC) {
    const auto* src = reinterpret_cast<const sockaddr*>(&h.src);
    const auto* dst = reinterpret_cast<const sockaddr*>(&h.dst);
    info->src_addr = arena_text(c, sockaddr_host(src));
    info->dst_addr = arena_text(c, sockaddr_host(dst));
    info->src_port = sockaddr_port(src);
    info->dst_port = sockaddr_port(dst);
    info->src_port_text = arena_port(c, info->src_port);
    info->dst_port_text = arena_port(c, info->dst_port);
    if (info->src_addr.empty() || info->dst_addr.empty() || info->src_port_text.empty() ||
        info->dst_port_text.empty()) {
      return false;
    }
  }
  c.proxy_protocol = info;
  return true;
}

enum class Step { kFinished, kMore, kWait };

// Reads what the socket has: peeks, consumes only header bytes. kFinished:
// `done` ran; kMore: header bytes were taken, the socket may have more;
// kWait: nothing more now, the read event is registered.
Step read_some(Connection& c) {
  Reader* r = reader_of(c);
  char buf[kProxyProtocolMax];
  if (r->have > 0) std::memcpy(buf, r->partial, r->have);
  ssize_t n;
  do {
    n = ::recv(c.fd, buf + r->have, sizeof buf - r->have, MSG_PEEK);
  } while (n == -1 && errno == EINTR);
  if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
    c.read->ready = 0;
    if (!c.loop->handle_read_event(*c.read)) {
      finish(c, false);
      return Step::kFinished;
    }
    return Step::kWait;
  }
  if (n <= 0) {
    c.error = n < 0 ? 1 : 0;
    VIGIL_LOG(*c.log, kInfo, n < 0 ? errno : 0,
              "*%llu %s while reading PROXY protocol, client: %.*s",
              static_cast<unsigned long long>(c.number),
              n < 0 ? "recv() failed" : "client closed connection",
              static_cast<int>(c.addr_text.size()), c.addr_text.data());
    finish(c, false);
    return Step::kFinished;
  }
  const std::size_t total = r->have + static_cast<std::size_t>(n);
  ProxyProtocolHeader h;
  const char* reason = "";
  const ProxyProtocolResult res = parse_proxy_protocol(std::string_view(buf, total), h, reason);
  if (res == ProxyProtocolResult::kError) {
    VIGIL_LOG(*c.log, kError, 0,
              "*%llu broken header: \"%s\" (%s) while reading PROXY protocol, client: %.*s",
              static_cast<unsigned long long>(c.number),
              printable(std::string_view(buf, total)).c_str(), reason,
              static_cast<int>(c.addr_text.size()), c.addr_text.data());
    finish(c, false);
    return Step::kFinished;
  }
  // Every byte up to the header's end (or all of them, while it is not
  // complete) is the header's: take them off the socket.
  const std::size_t take = res == ProxyProtocolResult::kDone ? h.length - r->have
                                                            : static_cast<std::size_t>(n);
  ssize_t got;
  do {
    got = ::recv(c.fd, buf + r->have, take, 0);
  } while (got == -1 && errno == EINTR);
  if (got != static_cast<ssize_t>(take)) {
    c.error = 1;
    VIGIL_LOG(*c.log, kError, got < 0 ? errno : 0,
              "*%llu recv() of the PROXY protocol header failed, client: %.*s",
              static_cast<unsigned long long>(c.number), static_cast<int>(c.addr_text.size()),
              c.addr_text.data());
    finish(c, false);
    return Step::kFinished;
  }
  if (res == ProxyProtocolResult::kDone) {
    if (!keep(c, h)) {
      VIGIL_LOG(*c.log, kAlert, 0, "*%llu out of memory for the PROXY protocol header",
                static_cast<unsigned long long>(c.number));
      finish(c, false);
      return Step::kFinished;
    }
    finish(c, true);
    return Step::kFinished;
  }
  if (r->partial == nullptr) {
    r->partial = static_cast<char*>(c.arena->alloc(kProxyProtocolMax, 1));
    if (r->partial == nullptr) {
      VIGIL_LOG(*c.log, kAlert, 0, "*%llu out of memory for the PROXY protocol header",
                static_cast<unsigned long long>(c.number));
      finish(c, false);
      return Step::kFinished;
    }
  }
  std::memcpy(r->partial + r->have, buf + r->have, take);
  r->have = total;
  return Step::kMore;
}

void read_handler(Event& rev) {
  Connection& c = *rev.owner<Connection>();
  if (rev.timedout) {
    c.timedout = 1;
    VIGIL_LOG(*c.log, kInfo, ETIMEDOUT, "*%llu client timed out while reading PROXY protocol",
              static_cast<unsigned long long>(c.number));
    finish(c, false);
    return;
  }
  if (c.close) {
    finish(c, false);
    return;
  }
  // Until the header is read or the socket has nothing more (then the
  // read event is registered and brings the rest).
  while (read_some(c) == Step::kMore) {
  }
}

}  // namespace

Status proxy_protocol_read(Connection& c, Msec timeout, ProxyProtocolDone done) {
  auto* r = c.arena->make<Reader>();
  if (r == nullptr) return Status::error("out of memory for the PROXY protocol reader");
  r->done = done;
  // Readiness I/O while the header is read: a ring receive would take the
  // bytes after it, too (the uring backend leaves the ring on the next
  // registration when the primitives are not its own).
  if (c.ring) {
    c.recv = unix_recv;
    c.send = unix_send;
    c.recv_chain = readv_chain;
    c.send_chain = writev_chain;
  }
  c.data = r;
  c.read->handler = read_handler;
  c.write->handler = idle_handler;
  c.loop->add_timer(*c.read, timeout);
  read_handler(*c.read);
  return Status::ok();
}

}  // namespace vigil
