#pragma once
// Small helpers shared by tests: loopback sockets and bounded waiting.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "vigil/event/backend.h"

namespace vigil::test {

// A blocking TCP connection to ip:port (an IPv4 address); -1 on failure.
inline int connect_ip(const char* ip, int port, bool nonblocking = false) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | (nonblocking ? SOCK_NONBLOCK : 0), 0);
  if (fd == -1) return -1;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  if (::inet_pton(AF_INET, ip, &sa.sin_addr) != 1) {
    ::close(fd);
    return -1;
  }
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == -1 && errno != EINPROGRESS) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Milliseconds from now until `deadline` (zero or less once it has passed).
inline long long ms_left(std::chrono::steady_clock::time_point deadline) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                               std::chrono::steady_clock::now())
      .count();
}

// A blocking connection to the unix-domain socket at `path`; -1 on failure.
inline int connect_unix(const std::string& path) {
  sockaddr_un sun{};
  if (path.size() >= sizeof sun.sun_path) return -1;
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd == -1) return -1;
  sun.sun_family = AF_UNIX;
  std::memcpy(sun.sun_path, path.data(), path.size());
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sun), sizeof sun) == -1) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// A blocking TCP connection to 127.0.0.1:port; -1 on failure.
inline int connect_loopback(int port, bool nonblocking = false) {
  return connect_ip("127.0.0.1", port, nonblocking);
}

// Reads until `n` bytes or EOF or the timeout; returns what was read.
inline std::string read_n(int fd, std::size_t n, int timeout_ms = 5000) {
  std::string out;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (out.size() < n) {
    auto left = ms_left(deadline);
    if (left <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) break;
    char buf[65536];
    ssize_t r = ::read(fd, buf, std::min(sizeof buf, n - out.size()));
    if (r <= 0) break;
    out.append(buf, static_cast<std::size_t>(r));
  }
  return out;
}

// The whole of a file ("" when it cannot be read).
inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// True when `fd` has something to read (or EOF) within the time.
inline bool readable(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, timeout_ms) == 1;
}

// Polls `done` every `step_ms` until it is true or the time is up; returns
// done(). Tests wait with this (or run_until) for what they then assert,
// never with a fixed sleep.
inline bool wait_for(const std::function<bool()>& done, int timeout_ms = 5000, int step_ms = 5) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    if (done()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return done();
    if (step_ms > 0) ::usleep(static_cast<useconds_t>(step_ms) * 1000);
  }
}

// True when `cond` holds for the whole window (checked every `step_ms`):
// for asserting that something does NOT happen within a time, the one wait
// whose length is the point.
inline bool holds_for(const std::function<bool()>& cond, int window_ms, int step_ms = 10) {
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(window_ms);
  while (std::chrono::steady_clock::now() < end) {
    if (!cond()) return false;
    ::usleep(static_cast<useconds_t>(step_ms) * 1000);
  }
  return cond();
}

// A TCP socket bound to 127.0.0.1 at a port the kernel picks (set in *port),
// listening with `backlog` unless that is negative; -1 when a call fails.
// `reuseaddr` sets SO_REUSEADDR before the bind.
inline int bind_loopback(int* port, int backlog, bool reuseaddr = false) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof sa;
  const int one = 1;
  if (fd == -1 ||
      (reuseaddr && ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == -1) ||
      ::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == -1 ||
      (backlog >= 0 && ::listen(fd, backlog) == -1) ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) == -1) {
    if (fd != -1) ::close(fd);
    return -1;
  }
  *port = ntohs(sa.sin_port);
  return fd;
}

// A port where nothing listens, held for the object's life: bound but never
// listen()ed, so a connect to it is refused and no other socket can take it
// meanwhile (what a free port found by binding and releasing cannot promise).
//
// `shared`: bound with SO_REUSEADDR, which reserves the port for a program
// that cannot listen on port 0 and say which port it got (nginx): every
// other bind is still refused, but a socket bound with SO_REUSEADDR too (as
// nginx binds) may bind the port and listen on it, since this one never
// listens.
class ClosedPort {
 public:
  explicit ClosedPort(bool shared = false) { fd_ = bind_loopback(&port_, -1, shared); }
  ~ClosedPort() {
    if (fd_ != -1) ::close(fd_);
  }
  ClosedPort(const ClosedPort&) = delete;
  ClosedPort& operator=(const ClosedPort&) = delete;
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = -1;
};

// A listening socket on 127.0.0.1 at a port the kernel chose, held for the
// object's life (a listener the server must not be able to bind, say).
class TakenPort {
 public:
  TakenPort() { fd_ = bind_loopback(&port_, 1); }
  ~TakenPort() {
    if (fd_ != -1) ::close(fd_);
  }
  TakenPort(const TakenPort&) = delete;
  TakenPort& operator=(const TakenPort&) = delete;
  int port() const { return port_; }
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
  int port_ = -1;
};

// A listening TCP socket on 127.0.0.1 at a port the kernel picks (set in
// *port), or -1.
inline int listen_loopback(int* port) {
  return bind_loopback(port, 128);
}

// Kept for tests written before port 0 was the way: a port nothing listens
// on at the moment of the call (bound to port 0, then released). Another
// process may take it before the caller binds it; new tests listen on port 0
// and ask the server (ServerProcess::port), or hold a ClosedPort.
inline int free_port() {
  ClosedPort p;
  return p.port();
}

// Calls step() until done() is true or the time is up; returns done().
inline bool run_until(const std::function<void()>& step, const std::function<bool()>& done,
                      int timeout_ms = 5000) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!done() && std::chrono::steady_clock::now() < deadline) step();
  return done();
}

// Every backend compiled in, for suites parametrized over them.
inline std::vector<std::string> backend_params() {
  std::vector<std::string> v;
  for (auto n : backend_names()) v.emplace_back(n);
  return v;
}
inline std::string backend_param_name(const ::testing::TestParamInfo<std::string>& p) {
  return p.param;
}

}  // namespace vigil::test
