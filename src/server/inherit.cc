#include "server/inherit.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "vigil/core/log.h"

namespace vigil {

namespace {

constexpr int kListenFdsStart = 3;  // SD_LISTEN_FDS_START
constexpr int kMaxInherited = 4096;

std::string address_text(const sockaddr_storage& ss) {
  char host[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(ss);
    ::inet_ntop(AF_INET, &a.sin_addr, host, sizeof host);
    return std::string(host) + ":" + std::to_string(ntohs(a.sin_port));
  }
  if (ss.ss_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(ss);
    ::inet_ntop(AF_INET6, &a.sin6_addr, host, sizeof host);
    return "[" + std::string(host) + "]:" + std::to_string(ntohs(a.sin6_port));
  }
  if (ss.ss_family == AF_UNIX) {
    const auto& a = reinterpret_cast<const sockaddr_un&>(ss);
    return "unix:" + std::string(a.sun_path, ::strnlen(a.sun_path, sizeof a.sun_path));
  }
  return "unix";
}

int int_option(int fd, int level, int name) {
  int v = 0;
  socklen_t len = sizeof v;
  if (::getsockopt(fd, level, name, &v, &len) == -1) return -1;
  return v;
}

// A listening stream socket (SOCK_STREAM) or a bound datagram socket (a
// stream module's "listen ... udp"): true, with its type.
bool listening_type(int fd, int& type) {
  type = int_option(fd, SOL_SOCKET, SO_TYPE);
  if (type == SOCK_DGRAM) return true;
  return type == SOCK_STREAM && int_option(fd, SOL_SOCKET, SO_ACCEPTCONN) == 1;
}

// A Listening describing the socket `fd` already is; null (fd closed) when it
// is not a listening stream socket (TCP or unix-domain) nor a UDP one.
std::unique_ptr<Listening> describe(int fd, Log& log) {
  auto ls = std::make_unique<Listening>();
  socklen_t len = sizeof ls->addr;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ls->addr), &len) == -1 ||
      (ls->addr.ss_family != AF_INET && ls->addr.ss_family != AF_INET6 &&
       ls->addr.ss_family != AF_UNIX) ||
      !listening_type(fd, ls->type) ||
      (ls->type == SOCK_DGRAM && ls->addr.ss_family == AF_UNIX)) {
    VIGIL_LOG(log, kAlert, errno, "inherited descriptor %d is not a listening socket, closed",
              fd);
    (void)::close(fd);
    return nullptr;
  }
  ls->addrlen = len;
  ls->addr_text = address_text(ls->addr);
  ls->fd = fd;
  ls->reuseport = int_option(fd, SOL_SOCKET, SO_REUSEPORT) == 1;
  if (ls->addr.ss_family == AF_INET6) ls->ipv6only = int_option(fd, IPPROTO_IPV6, IPV6_V6ONLY) == 1;
  ls->inherited = true;
  ls->log = &log;
  // Workers poll it; the new owner must not pass it on by accident.
  const int fl = ::fcntl(fd, F_GETFL);
  if (fl != -1) (void)::fcntl(fd, F_SETFL, fl | O_NONBLOCK);
  (void)::fcntl(fd, F_SETFD, FD_CLOEXEC);
  return ls;
}

bool parse_fd(const char* p, const char* end, int* out) {
  if (p == end) return false;
  long v = 0;
  for (; p != end; ++p) {
    if (*p < '0' || *p > '9') return false;
    v = v * 10 + (*p - '0');
    if (v > 1 << 20) return false;
  }
  *out = static_cast<int>(v);
  return true;
}

}  // namespace

ListenerSet inherited_listeners(Log& log, std::string* from) {
  std::vector<int> fds;
  from->clear();
  if (const char* env = std::getenv(kInheritEnv); env != nullptr) {
    *from = std::string(kInheritEnv) + " environment variable";
    // nginx's format: "fd;fd;...;" (a trailing ';' or not); a bad entry is
    // skipped with an alert, as nginx does.
    for (const char* p = env; *p != '\0';) {
      const char* end = std::strchr(p, ';');
      if (end == nullptr) end = p + std::strlen(p);
      int fd = -1;
      if (parse_fd(p, end, &fd)) {
        fds.push_back(fd);
      } else {
        VIGIL_LOG(log, kAlert, 0,
                  "invalid socket number \"%.*s\" in %s environment variable, "
                  "ignoring the rest",
                  static_cast<int>(end - p), p, kInheritEnv);
        break;
      }
      p = *end == ';' ? end + 1 : end;
    }
    ::unsetenv(kInheritEnv);
  } else if (const char* n = std::getenv("LISTEN_FDS"); n != nullptr) {
    const char* pid = std::getenv("LISTEN_PID");
    int count = 0;
    int owner = 0;
    if (pid != nullptr && parse_fd(pid, pid + std::strlen(pid), &owner) &&
        owner == static_cast<int>(::getpid()) && parse_fd(n, n + std::strlen(n), &count) &&
        count <= kMaxInherited) {
      *from = "systemd socket activation";
      for (int i = 0; i < count; ++i) fds.push_back(kListenFdsStart + i);
    }
    ::unsetenv("LISTEN_FDS");
    ::unsetenv("LISTEN_PID");
    ::unsetenv("LISTEN_FDNAMES");
  }
  std::vector<std::unique_ptr<Listening>> sockets;
  for (int fd : fds) {
    if (auto ls = describe(fd, log)) {
      VIGIL_LOG(log, kNotice, 0, "using inherited socket #%d for %s (from %s)", fd,
                ls->addr_text.c_str(), from->c_str());
      sockets.push_back(std::move(ls));
    }
  }
  return ListenerSet::adopt(std::move(sockets));
}

std::string listeners_env(const ListenerSet& set) {
  std::string env = std::string(kInheritEnv) + "=";
  for (const ListenerEntry& e : set.entries()) {
    if (e.ls->fd == -1) continue;
    const int flags = ::fcntl(e.ls->fd, F_GETFD);
    if (flags != -1) (void)::fcntl(e.ls->fd, F_SETFD, flags & ~FD_CLOEXEC);
    env += std::to_string(e.ls->fd) + ";";
  }
  return env;
}

}  // namespace vigil
