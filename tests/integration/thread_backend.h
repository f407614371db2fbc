#pragma once
// A TCP backend for the stream proxy tests: a socket listening on 127.0.0.1
// and one thread that serves it. The destructor shuts the socket down, which
// ends the thread's accept4(), joins the thread, then closes the socket.

#include <sys/socket.h>
#include <unistd.h>

#include <functional>
#include <string>
#include <thread>
#include <utility>

#include "test_util.h"

namespace vigil::test {

class ThreadBackend {
 public:
  // Runs serve(listening fd) on the thread; nothing when the socket could
  // not be opened (ready() is false).
  explicit ThreadBackend(std::function<void(int)> serve) {
    lfd_ = listen_loopback(&port_);
    if (lfd_ != -1) thread_ = std::thread(std::move(serve), lfd_);
  }
  ~ThreadBackend() {
    if (lfd_ != -1) ::shutdown(lfd_, SHUT_RDWR);
    if (thread_.joinable()) thread_.join();
    if (lfd_ != -1) ::close(lfd_);
  }
  ThreadBackend(const ThreadBackend&) = delete;
  ThreadBackend& operator=(const ThreadBackend&) = delete;

  bool ready() const { return lfd_ != -1; }
  int port() const { return port_; }
  std::string addr() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  int lfd_ = -1;
  int port_ = -1;
  std::thread thread_;
};

}  // namespace vigil::test
