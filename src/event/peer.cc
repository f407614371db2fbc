// Outgoing connections (seed 000 "主动连接", ngx_event_connect_peer).
#include "vigil/event/peer.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "vigil/core/log.h"
#include "vigil/event/loop.h"

namespace vigil {

namespace {

// Errors that say "this peer is not there": the caller tries the next one.
bool peer_unreachable(int err) {
  return err == ECONNREFUSED || err == ECONNRESET || err == ENETDOWN || err == ENETUNREACH ||
         err == EHOSTDOWN || err == EHOSTUNREACH || err == ETIMEDOUT;
}

// proxy_bind: IP_TRANSPARENT when asked, then bind() to the local address
// (without a port, the port is left to connect(): IP_BIND_ADDRESS_NO_PORT).
bool bind_local(int s, const PeerConnection& pc, Log& log) {
  const int family = pc.local.ss_family;
  const int one = 1;
  if (pc.transparent) {
    const int rc = family == AF_INET6
                       ? ::setsockopt(s, IPPROTO_IPV6, IPV6_TRANSPARENT, &one, sizeof one)
                       : ::setsockopt(s, IPPROTO_IP, IP_TRANSPARENT, &one, sizeof one);
    if (rc == -1) {
      const int err = errno;
      VIGIL_LOG(log, kAlert, err, "setsockopt(%s) failed%s",
                family == AF_INET6 ? "IPV6_TRANSPARENT" : "IP_TRANSPARENT",
                err == EPERM ? " (\"transparent\" needs CAP_NET_ADMIN)" : "");
      return false;
    }
  }
  const in_port_t port = family == AF_INET6
                             ? reinterpret_cast<const sockaddr_in6&>(pc.local).sin6_port
                             : reinterpret_cast<const sockaddr_in&>(pc.local).sin_port;
#ifdef IP_BIND_ADDRESS_NO_PORT
  if (port == 0 &&
      ::setsockopt(s, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one) == -1) {
    VIGIL_LOG(log, kAlert, errno, "setsockopt(IP_BIND_ADDRESS_NO_PORT) failed, ignored");
  }
#else
  (void)port;
#endif
  if (::bind(s, reinterpret_cast<const sockaddr*>(&pc.local), pc.local_len) == -1) {
    char text[INET6_ADDRSTRLEN] = "?";
    const void* a = family == AF_INET6
                        ? static_cast<const void*>(
                              &reinterpret_cast<const sockaddr_in6&>(pc.local).sin6_addr)
                        : static_cast<const void*>(
                              &reinterpret_cast<const sockaddr_in&>(pc.local).sin_addr);
    const int err = errno;
    ::inet_ntop(family, a, text, sizeof text);
    VIGIL_LOG(log, kCrit, err, "bind(%s) failed", text);
    return false;
  }
  return true;
}

}  // namespace

bool parse_local_address(std::string_view text, sockaddr_storage& out, socklen_t& len) {
  std::string_view host = text;
  std::string_view port;
  if (!text.empty() && text.front() == '[') {
    const std::size_t close = text.find(']');
    if (close == std::string_view::npos) return false;
    host = text.substr(1, close - 1);
    const std::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return false;
      port = rest.substr(1);
      if (port.empty()) return false;
    }
  } else if (const std::size_t colon = text.find(':');
             colon != std::string_view::npos && text.find(':', colon + 1) == std::string_view::npos) {
    host = text.substr(0, colon);  // one colon: IPv4 with a port (IPv6 has several)
    port = text.substr(colon + 1);
    if (port.empty()) return false;
  }
  unsigned value = 0;
  for (const char ch : port) {
    if (ch < '0' || ch > '9') return false;
    value = value * 10 + static_cast<unsigned>(ch - '0');
    if (value > 65535) return false;
  }
  char buf[INET6_ADDRSTRLEN + 1];
  if (host.empty() || host.size() >= sizeof buf) return false;
  std::memcpy(buf, host.data(), host.size());
  buf[host.size()] = '\0';
  out = sockaddr_storage{};
  auto& in = reinterpret_cast<sockaddr_in&>(out);
  if (::inet_pton(AF_INET, buf, &in.sin_addr) == 1) {
    in.sin_family = AF_INET;
    in.sin_port = htons(static_cast<std::uint16_t>(value));
    len = sizeof(sockaddr_in);
    return true;
  }
  auto& in6 = reinterpret_cast<sockaddr_in6&>(out);
  if (::inet_pton(AF_INET6, buf, &in6.sin6_addr) == 1) {
    in6.sin6_family = AF_INET6;
    in6.sin6_port = htons(static_cast<std::uint16_t>(value));
    len = sizeof(sockaddr_in6);
    return true;
  }
  out = sockaddr_storage{};
  return false;
}

int event_connect_peer(EventLoop& loop, PeerConnection& pc) {
  Log& log = pc.log ? *pc.log : loop.log();
  pc.connection = nullptr;
  pc.cached = false;
  if (pc.get != nullptr) {
    int rc = pc.get(pc, pc.data);
    if (rc != kPeerOk) return rc;
  }

  int s = ::socket(pc.addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (s == -1) {
    VIGIL_LOG(log, kAlert, errno, "socket() failed");
    return kPeerError;
  }
  Connection* c = loop.pool().get(s, log);
  if (c == nullptr) {
    ::close(s);
    return kPeerError;
  }
  if (pc.local_len != 0 && !bind_local(s, pc, log)) {
    loop.pool().close_connection(*c);
    return kPeerError;
  }
  if (pc.rcvbuf > 0 &&
      ::setsockopt(s, SOL_SOCKET, SO_RCVBUF, &pc.rcvbuf, sizeof pc.rcvbuf) == -1) {
    VIGIL_LOG(log, kAlert, errno, "setsockopt(SO_RCVBUF) failed");
    loop.pool().close_connection(*c);
    return kPeerError;
  }
  c->recv = unix_recv;
  c->send = unix_send;
  c->recv_chain = readv_chain;
  c->send_chain = writev_chain;
  c->peer_addr = reinterpret_cast<sockaddr*>(c->arena->dup(&pc.addr, pc.addrlen));
  if (c->peer_addr == nullptr) {
    VIGIL_LOG(log, kAlert, 0, "out of memory connecting to %s", pc.name.c_str());
    loop.pool().close_connection(*c);
    return kPeerError;
  }
  c->peer_addrlen = pc.addrlen;
  c->addr_text = pc.name;

  bool edge = loop.capabilities() & kCapClear;
  if (edge) {
    // Both directions once, edge-triggered: the connect completes as a write event.
    if (Status st = loop.backend().add_conn(*c); !st) {
      VIGIL_LOG(log, kAlert, st.err(), "%s", st.message().c_str());
      loop.pool().close_connection(*c);
      return kPeerError;
    }
  }

  int rc = ::connect(s, reinterpret_cast<const sockaddr*>(&pc.addr), pc.addrlen);
  if (rc == -1) {
    int err = errno;
    if (err != EINPROGRESS) {
      // As nginx: any failed connect() declines this peer (the next one is
      // tried); only the level says whether it was expected.
      if (peer_unreachable(err)) {
        VIGIL_LOG(log, kError, err, "connect() to %s failed", pc.name.c_str());
      } else {
        VIGIL_LOG(log, kCrit, err, "connect() to %s failed", pc.name.c_str());
      }
      loop.pool().close_connection(*c);
      return kPeerDeclined;
    }
  }
  pc.connection = c;

  if (!edge) {
    Status st = loop.backend().add(*c->read, kEvLevel);
    if (st && rc == -1) st = loop.backend().add(*c->write, kEvLevel);
    if (!st) {
      VIGIL_LOG(log, kAlert, st.err(), "%s", st.message().c_str());
      loop.pool().close_connection(*c);
      pc.connection = nullptr;
      return kPeerError;
    }
  }
  if (rc == -1) return kPeerAgain;  // EINPROGRESS
  c->write->ready = 1;
  return kPeerOk;
}

int peer_connect_result(Connection& c) {
  // kqueue reported the error with EV_EOF (nginx's kq_errno); libkqueue read
  // SO_ERROR to do so, which left nothing there.
  if (c.write->kq_errno != 0) return c.write->kq_errno;
  if (c.read->kq_errno != 0) return c.read->kq_errno;
  int err = 0;
  socklen_t len = sizeof err;
  if (::getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len) == -1) return errno;
  return err;
}

}  // namespace vigil
