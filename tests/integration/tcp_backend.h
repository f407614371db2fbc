#pragma once
// A plain TCP server for the stream proxy's tests: listens on 127.0.0.1 at a
// port the kernel picks, and runs `serve(fd)` for every connection it accepts
// (each on a thread of its own, so one slow connection holds no other), then
// closes the connection.

#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "test_util.h"

namespace vigil::test {

class TcpBackend {
 public:
  explicit TcpBackend(std::function<void(int fd)> serve)
      : serve_(std::make_shared<std::function<void(int)>>(std::move(serve))) {
    lfd_ = listen_loopback(&port_);
    if (lfd_ == -1) return;
    accepter_ = std::thread([this, fd = lfd_, serve = serve_] {
      for (;;) {
        int c = ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
        if (c == -1) return;  // the listening socket was shut down
        ++accepted_;
        std::thread([c, serve] {
          (*serve)(c);
          ::close(c);
        }).detach();
      }
    });
  }
  ~TcpBackend() {
    if (lfd_ != -1) ::shutdown(lfd_, SHUT_RDWR);
    if (accepter_.joinable()) accepter_.join();
    if (lfd_ != -1) ::close(lfd_);
  }
  TcpBackend(const TcpBackend&) = delete;
  TcpBackend& operator=(const TcpBackend&) = delete;

  bool ready() const { return lfd_ != -1; }
  int port() const { return port_; }
  std::string addr() const { return "127.0.0.1:" + std::to_string(port_); }
  int accepted() const { return accepted_.load(); }

 private:
  std::shared_ptr<std::function<void(int)>> serve_;  // shared with the connection threads
  int lfd_ = -1;
  int port_ = 0;
  std::atomic<int> accepted_{0};
  std::thread accepter_;
};

}  // namespace vigil::test
