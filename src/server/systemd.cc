#include "server/systemd.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>

namespace vigil {

Status notify_systemd(const std::string& state) {
  const char* path = std::getenv("NOTIFY_SOCKET");
  if (path == nullptr || path[0] == '\0') return Status::ok();
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  const std::size_t len = std::strlen(path);
  if (len >= sizeof sa.sun_path || (path[0] != '/' && path[0] != '@')) {
    return Status::error("invalid NOTIFY_SOCKET \"" + std::string(path) + "\"");
  }
  std::memcpy(sa.sun_path, path, len);
  if (sa.sun_path[0] == '@') sa.sun_path[0] = '\0';  // abstract namespace
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd == -1) return Status::sys("socket(AF_UNIX, SOCK_DGRAM)");
  const auto addrlen = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + len);
  const ssize_t n = ::sendto(fd, state.data(), state.size(), MSG_NOSIGNAL,
                             reinterpret_cast<const sockaddr*>(&sa), addrlen);
  const int err = errno;
  (void)::close(fd);
  if (n != static_cast<ssize_t>(state.size())) {
    return Status::sys("sendto() to NOTIFY_SOCKET \"" + std::string(path) + "\"", err);
  }
  return Status::ok();
}

std::string systemd_reloading_state() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  const long long usec = static_cast<long long>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
  return "RELOADING=1\nMONOTONIC_USEC=" + std::to_string(usec);
}

}  // namespace vigil
