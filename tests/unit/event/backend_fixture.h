#pragma once
// The fixture of the backend conformance suite (backend_test.cc) and the
// socket helpers it shares with the per-backend tests: a real EventLoop on the
// backend named by the test parameter, connections from its pool, handlers
// that record what they saw in a Probe, and bounded passes of
// Backend::process_events().

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "vigil/core/log.h"
#include "vigil/event/backend.h"
#include "vigil/event/connection.h"
#include "vigil/event/loop.h"

namespace vigil::test {

#define ASSERT_OK(expr)                                        \
  do {                                                         \
    const ::vigil::Status _st = (expr);                        \
    ASSERT_TRUE(_st.is_ok()) << #expr ": " << _st.to_string(); \
  } while (0)
#define EXPECT_OK(expr)                                        \
  do {                                                         \
    const ::vigil::Status _st = (expr);                        \
    EXPECT_TRUE(_st.is_ok()) << #expr ": " << _st.to_string(); \
  } while (0)

// An owned file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }
  void reset() {
    if (fd_ != -1) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

// Both ends nonblocking; `first` goes to the pool (which closes it), `second`
// is the test's peer.
inline std::pair<int, Fd> unix_pair() {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) == -1) {
    ADD_FAILURE() << "socketpair: " << std::strerror(errno);
    return {-1, Fd()};
  }
  return {sv[0], Fd(sv[1])};
}

inline sockaddr_in loopback(std::uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  return a;
}

// A listening TCP socket on 127.0.0.1 and an ephemeral port.
inline Fd tcp_listener(sockaddr_in* bound) {
  Fd s(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  sockaddr_in a = loopback(0);
  socklen_t len = sizeof a;
  if (s.get() == -1 || ::bind(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == -1 ||
      ::listen(s.get(), 16) == -1 ||
      ::getsockname(s.get(), reinterpret_cast<sockaddr*>(&a), &len) == -1) {
    ADD_FAILURE() << "tcp listener: " << std::strerror(errno);
    return Fd();
  }
  *bound = a;
  return s;
}

// A connected TCP pair over loopback, both nonblocking.
inline std::pair<int, Fd> tcp_pair() {
  sockaddr_in a{};
  Fd ls = tcp_listener(&a);
  Fd client(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (client.get() == -1 ||
      ::connect(client.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == -1) {
    ADD_FAILURE() << "connect: " << std::strerror(errno);
    return {-1, Fd()};
  }
  int server = -1;
  for (int i = 0; i < 1000 && server == -1; ++i) {  // the handshake is done; accept is immediate
    server = ::accept4(ls.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (server == -1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_NE(server, -1) << "accept4: " << std::strerror(errno);
  ::fcntl(client.get(), F_SETFL, ::fcntl(client.get(), F_GETFL) | O_NONBLOCK);
  return {server, std::move(client)};
}

inline void write_some(int fd, const std::string& s) {
  ASSERT_EQ(::write(fd, s.data(), s.size()), static_cast<ssize_t>(s.size()))
      << std::strerror(errno);
}

// What the handlers saw, reached through Connection::data.
struct Probe {
  int reads = 0;
  int writes = 0;
  bool consume = false;  // the read handler reads until EAGAIN / EOF
  bool ready_seen = false;
  bool eof = false;
  int recv_errno = 0;
  std::string data;
};

inline void on_read(Event& ev) {
  auto* c = ev.owner<Connection>();
  auto* p = static_cast<Probe*>(c->data);
  ++p->reads;
  p->ready_seen = ev.ready;
  if (!p->consume) return;
  char buf[4096];
  for (;;) {
    ssize_t n = ::recv(c->fd, buf, sizeof buf, 0);
    if (n > 0) {
      p->data.append(buf, static_cast<std::size_t>(n));
      continue;
    }
    if (n == 0) {
      p->eof = true;
    } else if (errno == EAGAIN) {
      ev.ready = 0;
    } else {
      p->recv_errno = errno;
    }
    break;
  }
}

inline void on_write(Event& ev) {
  auto* p = static_cast<Probe*>(ev.owner<Connection>()->data);
  ++p->writes;
}

class BackendTest : public ::testing::TestWithParam<std::string> {
 public:  // the handlers of some scenarios reach the loop through the fixture
  void SetUp() override {
    // 1000 socketpairs and a few more: make sure the fd limit is not the test.
    rlimit rl{};
    if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 4096 && rl.rlim_max > rl.rlim_cur) {
      rl.rlim_cur = std::min<rlim_t>(rl.rlim_max, 4096);
      ::setrlimit(RLIMIT_NOFILE, &rl);
    }
    log_.set_level(LogLevel::kError);
    Status st = create_loop(64);
    // io_uring may be refused by the kernel (seccomp in a container,
    // io_uring_disabled, ENOSYS): the only case a backend is skipped.
    if (!st && GetParam() == "io_uring") {
      GTEST_SKIP() << "io_uring refused here: " << st.to_string();
    }
    ASSERT_TRUE(st.is_ok()) << st.to_string();
  }

  void TearDown() override { destroy_loop(); }

  // Closes what the test left open (a slot reused in a test appears twice in
  // conns_; its second entry is closed already), then the loop.
  void destroy_loop() {
    if (loop_) {
      for (Connection* c : conns_) {
        if (c->fd != -1) loop_->pool().close_connection(*c);
      }
    }
    conns_.clear();
    loop_.reset();
  }

  Status create_loop(std::size_t connections) {
    destroy_loop();
    EventLoopConfig cfg;
    cfg.use = GetParam();
    cfg.connections = connections;
    auto r = EventLoop::create(cfg, log_);
    if (!r) return r.status();
    loop_ = std::move(r.value());
    return Status::ok();
  }

  Backend& backend() { return loop_->backend(); }
  bool edge() const { return (loop_->capabilities() & kCapClear) != 0; }
  // How the loop itself registers connection events on this backend.
  unsigned conn_flags() const { return edge() ? kEvClear : kEvLevel; }

  Connection* attach(int fd, Probe* p, EventHandler rh = on_read, EventHandler wh = on_write) {
    Connection* c = loop_->pool().get(fd, log_);
    EXPECT_NE(c, nullptr);
    if (c == nullptr) {
      ::close(fd);
      return nullptr;
    }
    c->data = p;
    c->read->handler = rh;
    c->write->handler = wh;
    conns_.push_back(c);
    return c;
  }

  Status pass(Msec timer, unsigned flags = kProcUpdateTime) {
    return backend().process_events(timer, flags);
  }

  // Runs bounded passes until pred() holds.
  template <class Pred>
  bool run_until(Pred pred, int max_passes = 50, Msec timer = 100,
                 unsigned flags = kProcUpdateTime) {
    for (int i = 0; i < max_passes && !pred(); ++i) {
      Status st = pass(timer, flags);
      EXPECT_TRUE(st.is_ok()) << st.to_string();
      if (!st) return false;
    }
    return pred();
  }

  // The peer closes after sending `before_close` (maybe nothing): the read
  // handler gets the data, then recv() == 0.
  void check_peer_close(const std::string& before_close) {
    auto [fd, peer] = tcp_pair();
    ASSERT_NE(fd, -1);
    Probe p;
    p.consume = true;
    Connection* c = attach(fd, &p);
    ASSERT_NE(c, nullptr);
    ASSERT_OK(backend().add(*c->read, conn_flags()));
    if (!before_close.empty()) write_some(peer.get(), before_close);
    peer.reset();
    ASSERT_TRUE(run_until([&] { return p.eof; })) << "EOF not seen";
    EXPECT_EQ(p.data, before_close);
    EXPECT_EQ(p.recv_errno, 0);
    if (loop_->capabilities() & kCapEpoll) {
      EXPECT_TRUE(c->read->pending_eof) << "EPOLLRDHUP/POLLRDHUP did not set pending_eof";
    }
  }

  Log log_;
  std::unique_ptr<EventLoop> loop_;
  std::vector<Connection*> conns_;
};

// The parameters of a suite that runs on every backend built in, and their
// names in the test names: gtest allows [A-Za-z0-9] only, so "io_uring" shows
// as "iouring".
inline std::vector<std::string> all_backends() {
  std::vector<std::string> names;
  for (std::string_view n : backend_names()) names.emplace_back(n);
  return names;
}

inline std::string backend_label(const ::testing::TestParamInfo<std::string>& param) {
  std::string label = param.param;
  label.erase(std::remove(label.begin(), label.end(), '_'), label.end());
  return label;
}

}  // namespace vigil::test
