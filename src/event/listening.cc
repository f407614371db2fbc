// Listening sockets (nginx's ngx_parse_url for "listen" and
// ngx_open_listening_sockets).

#include "vigil/event/listening.h"

#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <ctime>

#include "core/unix_addr.h"
#include "vigil/core/log.h"

namespace vigil {
namespace {

constexpr int kBindRetryMs = 500;  // nginx waits 500 ms between bind() attempts
// TCP_DEFER_ACCEPT takes seconds to wait for the first data; nginx derives it
// from the post-accept timeout, whose default (client_header_timeout) is 60 s.
constexpr int kDeferAcceptSeconds = 60;

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char ch : s) {
    if (ch < '0' || ch > '9') return false;
  }
  return true;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

std::string quoted(std::string_view s) {
  return "\"" + std::string(s) + "\"";
}

// Port 0 is accepted: it asks the kernel for a free port (tests use it).
Status parse_port(std::string_view text, std::string_view whole, int* port) {
  if (text.empty()) return Status::error("no port in " + quoted(whole));
  if (!all_digits(text) || text.size() > 5) {
    return Status::error("invalid port " + quoted(text) + " in " + quoted(whole));
  }
  int v = 0;
  for (char ch : text) v = v * 10 + (ch - '0');
  if (v > 65535) return Status::error("invalid port " + quoted(text) + " in " + quoted(whole));
  *port = v;
  return Status::ok();
}

void sleep_ms(int ms) {
  timespec ts{ms / 1000, static_cast<long>(ms % 1000) * 1000000L};
  // A signal cuts the wait short; sleep the rest.
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

Status set_int_option(int fd, int level, int name, int value, const char* what,
                      const std::string& addr_text) {
  if (setsockopt(fd, level, name, &value, sizeof(value)) != 0) {
    return Status::sys(std::string("setsockopt(") + what + ") for " + addr_text);
  }
  return Status::ok();
}

}  // namespace

// "unix:/path": a unix-domain stream socket at that path.
Status Listening::set_unix_address(std::string_view text) {
  const std::string_view path = text.substr(5);
  if (path.empty()) return Status::error("no path in the unix domain socket " + quoted(text));
  if (path.size() >= sizeof(sockaddr_un::sun_path)) {
    return Status::error("too long path in the unix domain socket " + quoted(text));
  }
  if (!make_unix_sockaddr(path, addr, addrlen)) {
    return Status::error("invalid path in the unix domain socket " + quoted(text));
  }
  addr_text = std::string(text);
  return Status::ok();
}

std::string_view Listening::unix_path() const {
  if (addr.ss_family != AF_UNIX) return {};
  const char* path = reinterpret_cast<const sockaddr_un*>(&addr)->sun_path;
  return {path, ::strnlen(path, sizeof(sockaddr_un::sun_path))};
}

void Listening::remove_unix_file() const {
  const std::string_view path = unix_path();
  if (path.empty() || path.front() != '/') return;  // nothing on disk (abstract or relative)
  if (::unlink(std::string(path).c_str()) == -1 && errno != ENOENT && log != nullptr) {
    VIGIL_LOG(*log, kCrit, errno, "unlink() %s failed", addr_text.c_str());
  }
}

Status Listening::set_address(std::string_view text) {
  std::string_view host;
  std::string_view port_text;
  bool bracketed = false;

  if (text.empty()) return Status::error("empty listen address");
  if (text.starts_with("unix:")) return set_unix_address(text);

  if (all_digits(text)) {
    // "8080": every IPv4 address, as nginx's "listen 8080".
    host = "*";
    port_text = text;
  } else if (text.front() == '[') {
    const std::size_t close = text.find(']');
    if (close == std::string_view::npos) {
      return Status::error("missing \"]\" in listen address " + quoted(text));
    }
    host = text.substr(1, close - 1);
    bracketed = true;
    std::string_view rest = text.substr(close + 1);
    if (rest.empty() || rest.front() != ':') {
      return Status::error("expected \":port\" after \"]\" in " + quoted(text));
    }
    port_text = rest.substr(1);
  } else {
    const std::size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) {
      return Status::error("no port in " + quoted(text));
    }
    host = text.substr(0, colon);
    port_text = text.substr(colon + 1);
    if (host.find(':') != std::string_view::npos) {
      return Status::error("IPv6 address must be in brackets, as \"[::1]:8080\", in " +
                           quoted(text));
    }
  }

  int port = 0;
  Status ps = parse_port(port_text, text, &port);
  if (!ps) return ps;
  if (host.empty()) return Status::error("no host in " + quoted(text));

  sockaddr_storage ss{};
  socklen_t len = 0;
  if (bracketed) {
    auto* sin6 = reinterpret_cast<sockaddr_in6*>(&ss);
    std::string h(host);
    if (inet_pton(AF_INET6, h.c_str(), &sin6->sin6_addr) != 1) {
      return Status::error("invalid IPv6 address " + quoted(host) + " in " + quoted(text));
    }
    sin6->sin6_family = AF_INET6;
    sin6->sin6_port = htons(static_cast<uint16_t>(port));
    len = sizeof(sockaddr_in6);
  } else {
    auto* sin = reinterpret_cast<sockaddr_in*>(&ss);
    sin->sin_family = AF_INET;
    sin->sin_port = htons(static_cast<uint16_t>(port));
    len = sizeof(sockaddr_in);
    if (host == "*") {
      sin->sin_addr.s_addr = htonl(INADDR_ANY);
    } else if (iequals(host, "localhost")) {
      // The one name resolved here: anything else would need a resolver at
      // startup, whose answer may change or block.
      sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    } else {
      std::string h(host);
      if (inet_pton(AF_INET, h.c_str(), &sin->sin_addr) != 1) {
        bool numeric = true;
        for (char ch : host) {
          if ((ch < '0' || ch > '9') && ch != '.') numeric = false;
        }
        if (numeric) {
          return Status::error("invalid IPv4 address " + quoted(host) + " in " + quoted(text));
        }
        return Status::error("host " + quoted(host) + " in " + quoted(text) +
                             " is not an IP address (only IP addresses and \"localhost\" "
                             "are accepted)");
      }
    }
  }

  // The text form is rebuilt from the parsed address, so "localhost:80" and
  // "*:80" show what is really bound.
  char buf[INET6_ADDRSTRLEN];
  const void* raw = ss.ss_family == AF_INET6
                        ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&ss)->sin6_addr)
                        : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&ss)->sin_addr);
  if (inet_ntop(ss.ss_family, raw, buf, sizeof(buf)) == nullptr) {
    return Status::sys("inet_ntop()");
  }
  std::string canon = ss.ss_family == AF_INET6 ? "[" + std::string(buf) + "]" : std::string(buf);
  canon += ":" + std::to_string(port);

  addr = ss;
  addrlen = len;
  addr_text = std::move(canon);
  return Status::ok();
}

Status Listening::open(int tries) {
  if (fd != -1) return Status::ok();  // already open, or inherited from the old master
  if (addrlen == 0) return Status::error("listening socket has no address");
  if (tries < 1) tries = 1;

  const int family = addr.ss_family;
  int s = ::socket(family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (s < 0) return Status::sys("socket() for " + addr_text);

  auto fail = [s](Status st) {
    (void)::close(s);  // the error that matters is `st`
    return st;
  };

  const bool unix_socket = family == AF_UNIX;
  Status st = Status::ok();
  if (!unix_socket) {
    st = set_int_option(s, SOL_SOCKET, SO_REUSEADDR, 1, "SO_REUSEADDR", addr_text);
    if (!st) return fail(std::move(st));
  }
  if (reuseport) {
    st = set_int_option(s, SOL_SOCKET, SO_REUSEPORT, 1, "SO_REUSEPORT", addr_text);
    if (!st) return fail(std::move(st));
  }
  if (family == AF_INET6) {
    st = set_int_option(s, IPPROTO_IPV6, IPV6_V6ONLY, ipv6only ? 1 : 0, "IPV6_V6ONLY", addr_text);
    if (!st) return fail(std::move(st));
  }
  // A wildcard UDP socket learns each datagram's destination address, which
  // its replies are sent from (event/udp.cc), as nginx's IP_PKTINFO.
  if (type == SOCK_DGRAM && family == AF_INET &&
      reinterpret_cast<const sockaddr_in&>(addr).sin_addr.s_addr == htonl(INADDR_ANY)) {
    st = set_int_option(s, IPPROTO_IP, IP_PKTINFO, 1, "IP_PKTINFO", addr_text);
    if (!st) return fail(std::move(st));
  }
  if (type == SOCK_DGRAM && family == AF_INET6 &&
      IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6&>(addr).sin6_addr)) {
    st = set_int_option(s, IPPROTO_IPV6, IPV6_RECVPKTINFO, 1, "IPV6_RECVPKTINFO", addr_text);
    if (!st) return fail(std::move(st));
  }
  if (rcvbuf != -1) {
    st = set_int_option(s, SOL_SOCKET, SO_RCVBUF, rcvbuf, "SO_RCVBUF", addr_text);
    if (!st) return fail(std::move(st));
  }
  if (sndbuf != -1) {
    st = set_int_option(s, SOL_SOCKET, SO_SNDBUF, sndbuf, "SO_SNDBUF", addr_text);
    if (!st) return fail(std::move(st));
  }

  for (int attempt = 1;; ++attempt) {
    if (::bind(s, reinterpret_cast<const sockaddr*>(&addr), addrlen) == 0) break;
    const int err = errno;
    // Only EADDRINUSE is worth waiting for: the old master (on upgrade) or a
    // socket in its last moments may still hold the address.
    if (err != EADDRINUSE || attempt >= tries) {
      return fail(Status::sys("bind() to " + addr_text, err));
    }
    if (log != nullptr) {
      VIGIL_LOG(*log, kNotice, err, "bind() to %s failed, trying again in %d ms", addr_text.c_str(),
                kBindRetryMs);
    }
    sleep_ms(kBindRetryMs);
  }

  if (unix_socket) {
    // Workers run as another user (nobody): the socket file is made
    // writable for everyone, as nginx's; who may connect is the
    // directory's business.
    const std::string path(unix_path());
    if (::chmod(path.c_str(), 0666) == -1) {
      Status cs = Status::sys("chmod() \"" + path + "\"");
      remove_unix_file();
      return fail(std::move(cs));
    }
  }

  if (type == SOCK_STREAM && ::listen(s, backlog) != 0) {
    Status ls = Status::sys("listen() to " + addr_text);
    remove_unix_file();
    return fail(std::move(ls));
  }

  // Port 0 asked the kernel for a port: record the one it gave, so the
  // address logged ("listening on 127.0.0.1:41235") is the one clients use,
  // and a reload that names that port keeps this socket.
  in_port_t* bound_port = addr.ss_family == AF_INET6
                              ? &reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port
                              : &reinterpret_cast<sockaddr_in*>(&addr)->sin_port;
  if (!unix_socket && *bound_port == 0) {
    sockaddr_storage got{};
    socklen_t got_len = sizeof got;
    if (::getsockname(s, reinterpret_cast<sockaddr*>(&got), &got_len) != 0) {
      return fail(Status::sys("getsockname() for " + addr_text));
    }
    *bound_port = got.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&got)->sin6_port
                                            : reinterpret_cast<sockaddr_in*>(&got)->sin_port;
    addr_text = addr_text.substr(0, addr_text.rfind(':') + 1) + std::to_string(ntohs(*bound_port));
  }

  if (deferred_accept && !unix_socket) {
    st = set_int_option(s, IPPROTO_TCP, TCP_DEFER_ACCEPT, kDeferAcceptSeconds, "TCP_DEFER_ACCEPT",
                        addr_text);
    if (!st) return fail(std::move(st));
  }

  fd = s;
  return Status::ok();
}

void Listening::close() {
  if (fd == -1) return;
  // On Linux the descriptor is released even when close() fails, so there is
  // nothing to retry; a listening socket has no unsent data to lose.
  (void)::close(fd);
  fd = -1;
}

int Listening::port() const {
  sockaddr_storage ss{};
  const sockaddr_storage* from = &addr;
  if (fd != -1) {
    socklen_t len = sizeof(ss);
    // Bound to port 0, the kernel picked the port: ask it.
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) == 0) from = &ss;
  }
  if (from->ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6*>(from)->sin6_port);
  }
  if (from->ss_family == AF_INET)
    return ntohs(reinterpret_cast<const sockaddr_in*>(from)->sin_port);
  return 0;
}

}  // namespace vigil
