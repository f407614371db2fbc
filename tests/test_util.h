#pragma once
// Small helpers shared by tests: loopback sockets and bounded waiting.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "vigil/event/backend.h"

namespace vigil::test {

// A blocking TCP connection to 127.0.0.1:port; -1 on failure.
inline int connect_loopback(int port, bool nonblocking = false) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | (nonblocking ? SOCK_NONBLOCK : 0), 0);
  if (fd == -1) return -1;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == -1 && errno != EINPROGRESS) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Reads until `n` bytes or EOF or the timeout; returns what was read.
inline std::string read_n(int fd, std::size_t n, int timeout_ms = 5000) {
  std::string out;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (out.size() < n) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now()).count();
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
