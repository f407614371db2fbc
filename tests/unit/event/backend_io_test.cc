// The backend conformance suite, part two: the connection I/O functions the
// backend installs (Backend::init_io), driven as a protocol drives them. On
// epoll, poll and select these are the socket primitives; on io_uring they
// are completion-based (uring_io.cc). Same expectations everywhere: a handler
// that reads until kIoAgain sees every byte in order, sends accepted are
// delivered even across a close, and a closed slot's next owner never hears
// of the previous one.

#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "unit/event/backend_fixture.h"
#include "vigil/event/backend.h"
#include "vigil/event/listening.h"

namespace vigil::test {
namespace {

using BackendIoTest = BackendTest;

// Reads with c->recv until kIoAgain, as nginx-style handlers do.
void on_recv_until_again(Event& ev) {
  auto* c = ev.owner<Connection>();
  auto* p = static_cast<Probe*>(c->data);
  ++p->reads;
  if (!p->consume) return;
  char buf[1000];  // smaller than a provided buffer: partial copies too
  for (;;) {
    const long n = c->recv(*c, buf, sizeof buf);
    if (n > 0) {
      p->data.append(buf, static_cast<std::size_t>(n));
      continue;
    }
    if (n == 0) {
      p->eof = true;
    } else if (n == kIoError) {
      p->recv_errno = errno == 0 ? -1 : errno;
    }
    break;
  }
}

Connection* attach_io(BackendTest& t, int fd, Probe* p) {
  Connection* c = t.attach(fd, p, on_recv_until_again, on_write);
  if (c == nullptr) return nullptr;
  t.loop_->backend().init_io(*c);
  c->write->ready = 1;  // a fresh socket is writable (event_accept does the same)
  return c;
}

// attach_io, with the read event registered and `p` keeping what it reads.
Connection* attach_reading(BackendTest& t, int fd, Probe* p) {
  p->consume = true;
  Connection* c = attach_io(t, fd, p);
  if (c == nullptr) return nullptr;
  if (const Status s = t.loop_->handle_read_event(*c->read); !s.is_ok()) {
    ADD_FAILURE() << "handle_read_event: " << s.to_string();
    return nullptr;
  }
  return c;
}

std::string pattern(std::size_t n, unsigned seed) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + (i * 7 + seed) % 26);
  return s;
}

TEST_P(BackendIoTest, RecvUntilAgainThenReadyAgainOnNewData) {
  auto [fd, peer] = tcp_pair();
  ASSERT_NE(fd, -1);
  Probe p;
  Connection* c = attach_reading(*this, fd, &p);
  ASSERT_NE(c, nullptr);

  const std::string first = pattern(5000, 1);
  write_some(peer.get(), first);
  ASSERT_TRUE(run_until([&] { return p.data.size() == first.size(); }));
  EXPECT_EQ(p.data, first);
  EXPECT_FALSE(c->read->ready) << "kIoAgain must clear ready";
  ASSERT_OK(loop_->handle_read_event(*c->read));

  write_some(peer.get(), "second");
  ASSERT_TRUE(run_until([&] { return p.data.size() == first.size() + 6; }))
      << "new data after kIoAgain was not reported";
  EXPECT_EQ(p.data.substr(first.size()), "second");
  peer.reset();
  ASSERT_TRUE(run_until([&] { return p.eof; }));
  EXPECT_EQ(p.recv_errno, 0);
}

// A protocol that installs its own I/O functions after accept (TLS reads
// the socket itself) gets plain readiness: nothing of its data is taken by
// the backend.
TEST_P(BackendIoTest, ReplacedIoFunctionsGetReadiness) {
  auto [fd, peer] = tcp_pair();
  ASSERT_NE(fd, -1);
  Probe p;
  p.consume = true;
  Connection* c = attach(fd, &p, on_read, on_write);  // on_read: recv(2) on the fd
  ASSERT_NE(c, nullptr);
  loop_->backend().init_io(*c);
  c->recv = unix_recv;
  c->send = unix_send;
  c->recv_chain = readv_chain;
  c->send_chain = writev_chain;
  ASSERT_OK(loop_->handle_read_event(*c->read));
  EXPECT_FALSE(c->ring);
  write_some(peer.get(), "direct");
  ASSERT_TRUE(run_until([&] { return p.data == "direct"; }));
  write_some(peer.get(), " again");
  ASSERT_TRUE(run_until([&] { return p.data == "direct again"; }));
}

// Sends go out in order and completely while the peer reads slowly: every
// short send (a full socket buffer) is finished later.
TEST_P(BackendIoTest, ShortSendIsCompletedLater) {
  auto [fd, peer] = tcp_pair();
  ASSERT_NE(fd, -1);
  int small = 4096;
  ASSERT_EQ(::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof small), 0);
  Probe p;
  Connection* c = attach_io(*this, fd, &p);
  ASSERT_NE(c, nullptr);

  const std::string out = pattern(512 * 1024, 3);
  std::size_t accepted = 0;
  std::string got;
  int again = 0;
  char buf[8192];
  for (int round = 0; round < 5000 && got.size() < out.size(); ++round) {
    while (accepted < out.size() && c->write->ready) {
      const long n = c->send(*c, out.data() + accepted, out.size() - accepted);
      ASSERT_NE(n, kIoError) << std::strerror(errno);
      if (n == kIoAgain) break;
      accepted += static_cast<std::size_t>(n);
    }
    if (!c->write->ready) {
      ++again;  // backpressure: the write event says when to go on
      ASSERT_OK(loop_->handle_write_event(*c->write));
    }
    ASSERT_OK(pass(accepted < out.size() ? 5 : 0));
    // The slow reader: one small read per pass.
    const ssize_t r = ::recv(peer.get(), buf, sizeof buf, 0);
    if (r > 0) got.append(buf, static_cast<std::size_t>(r));
  }
  EXPECT_EQ(accepted, out.size());
  EXPECT_GT(again + p.writes, 0) << "the socket never filled: the test proves nothing";
  ASSERT_EQ(got.size(), out.size());
  EXPECT_TRUE(got == out) << "the bytes arrived out of order or changed";
  EXPECT_EQ(c->sent, static_cast<off_t>(out.size()));
}

// Fills c's send side (the peer does not read) until send() refuses;
// returns how many bytes it accepted.
std::size_t fill_send(BackendTest& t, Connection* c, const std::string& out) {
  std::size_t accepted = 0;
  for (int i = 0; i < 1000 && accepted < out.size(); ++i) {
    const long n = c->send(*c, out.data() + accepted, out.size() - accepted);
    EXPECT_NE(n, kIoError);
    if (n < 0) break;
    accepted += static_cast<std::size_t>(n);
    if (!c->write->ready) {
      EXPECT_TRUE(t.pass(1).is_ok());
      if (!c->write->ready) break;
    }
  }
  return accepted;
}

// Reads the peer until FIN or reset (bounded); true when it ended.
bool read_to_end(BackendTest& t, int fd, std::string* got) {
  char buf[65536];
  for (int i = 0; i < 3000; ++i) {
    EXPECT_TRUE(t.pass(1).is_ok());
    for (;;) {
      const ssize_t r = ::recv(fd, buf, sizeof buf, 0);
      if (r > 0) {
        got->append(buf, static_cast<std::size_t>(r));
        continue;
      }
      if (r == 0 || errno != EAGAIN) return true;  // FIN, or a reset
      break;
    }
  }
  return false;
}

// Close while a receive is armed and a send is in flight: the peer gets
// every byte send() accepted, then the FIN (as after send(2) and close(2)).
TEST_P(BackendIoTest, SendsInFlightAtCloseAreDelivered) {
  auto [fd, peer] = tcp_pair();
  ASSERT_NE(fd, -1);
  Probe p;
  Connection* c = attach_reading(*this, fd, &p);
  ASSERT_NE(c, nullptr);
  ASSERT_OK(pass(0));  // the receive is in the kernel
  const std::string out = pattern(8 * 1024 * 1024, 5);
  const std::size_t accepted = fill_send(*this, c, out);
  ASSERT_GT(accepted, 0u);
  ASSERT_LT(accepted, out.size()) << "the send side never filled";
  loop_->pool().close_connection(*c);

  std::string got;
  EXPECT_TRUE(read_to_end(*this, peer.get(), &got)) << "no FIN after the close";
  EXPECT_EQ(got.size(), accepted) << "bytes send() accepted were lost at close";
  EXPECT_TRUE(got == out.substr(0, got.size()));
}

// A response sent, the connection closed and the loop destroyed at once (a
// worker's graceful stop ends so): the peer still gets it all, then the FIN.
TEST_P(BackendIoTest, SendsJustBeforeTheLoopEndsAreDelivered) {
  auto [fd, peer] = tcp_pair();
  ASSERT_NE(fd, -1);
  Probe p;
  Connection* c = attach_io(*this, fd, &p);
  ASSERT_NE(c, nullptr);
  const std::string out = pattern(12000, 9);
  ASSERT_EQ(c->send(*c, out.data(), out.size()), static_cast<long>(out.size()));
  loop_->pool().close_connection(*c);
  destroy_loop();
  std::string got;
  char buf[4096];
  for (int i = 0; i < 1000; ++i) {
    const ssize_t r = ::recv(peer.get(), buf, sizeof buf, 0);
    if (r > 0) {
      got.append(buf, static_cast<std::size_t>(r));
      continue;
    }
    if (r == 0) break;
    ASSERT_EQ(errno, EAGAIN) << std::strerror(errno);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_TRUE(got == out) << got.size() << " of " << out.size() << " bytes";
}

// The same close, then the slot goes to a new connection at once while the
// old peer still sends: nothing of the old connection (its data, its
// receive's or send's completions) reaches the new owner. (ASan checks the
// in-flight buffers are not used after the close.) Data arriving at a
// closed socket resets it (RFC 1122, 4.2.2.13), so only the prefix is checked.
TEST_P(BackendIoTest, CloseWithRecvAndSendInFlightReusesTheSlotSafely) {
  auto [fd, peer] = tcp_pair();
  ASSERT_NE(fd, -1);
  Probe p;
  Connection* c = attach_reading(*this, fd, &p);
  ASSERT_NE(c, nullptr);
  ASSERT_OK(pass(0));
  const std::string out = pattern(8 * 1024 * 1024, 7);
  const std::size_t accepted = fill_send(*this, c, out);
  ASSERT_GT(accepted, 0u);
  const std::uint32_t old_generation = c->generation;
  loop_->pool().close_connection(*c);

  auto [fd2, peer2] = tcp_pair();
  ASSERT_NE(fd2, -1);
  Probe p2;
  p2.consume = true;
  Connection* c2 = attach_io(*this, fd2, &p2);
  ASSERT_EQ(c2, c) << "the pool did not reuse the slot";
  EXPECT_NE(c2->generation, old_generation);
  ASSERT_OK(loop_->handle_read_event(*c2->read));

  (void)!::send(peer.get(), "late", 4, MSG_NOSIGNAL);
  std::string got;
  EXPECT_TRUE(read_to_end(*this, peer.get(), &got)) << "the old connection never ended";
  EXPECT_LE(got.size(), accepted);
  EXPECT_TRUE(got == out.substr(0, got.size()));
  EXPECT_EQ(p2.data, "") << "the old connection's data reached the slot's next owner";
  EXPECT_EQ(p2.reads, 0);
  EXPECT_EQ(c2->sent, 0);

  write_some(peer2.get(), "mine");
  ASSERT_TRUE(run_until([&] { return p2.data == "mine"; }));
}

// More data arrives than the receive buffers hold while the handlers do not
// read: the backend falls back (io_uring: the multishot receive stops with
// ENOBUFS or is stopped, and recv() reads the socket itself), nothing is lost
// and nothing is reordered.
TEST_P(BackendIoTest, ReceiveBufferExhaustionLosesNothing) {
  const bool is_select = GetParam() == "select";
  const std::size_t n = is_select ? 60 : 100;
  const std::size_t per = 64 * 1024;
  ASSERT_OK(create_loop(256));
  std::vector<Probe> probes(n);
  std::vector<Fd> peers;
  std::vector<Connection*> cs;
  std::vector<std::string> sent;
  for (std::size_t i = 0; i < n; ++i) {
    auto [fd, peer] = unix_pair();
    ASSERT_NE(fd, -1);
    Connection* c = attach_io(*this, fd, &probes[i]);  // consume = false: nobody reads
    ASSERT_NE(c, nullptr);
    ASSERT_OK(loop_->handle_read_event(*c->read));
    cs.push_back(c);
    peers.push_back(std::move(peer));
    sent.push_back(pattern(per, static_cast<unsigned>(i)));
  }
  ASSERT_OK(pass(0));
  for (std::size_t i = 0; i < n; ++i) write_some(peers[i].get(), sent[i]);
  for (int i = 0; i < 5; ++i) ASSERT_OK(pass(20));
  if (GetParam() == "io_uring") {
    EXPECT_GT(loop_->stats().ring_buffer_misses, 0u) << "the buffer ring never ran out";
  }

  // Now the handlers read: each once by hand (as a posted event would run),
  // then by the events that follow.
  for (std::size_t i = 0; i < n; ++i) {
    probes[i].consume = true;
    on_recv_until_again(*cs[i]->read);
    ASSERT_OK(loop_->handle_read_event(*cs[i]->read));
  }
  auto all_in = [&] {
    for (std::size_t i = 0; i < n; ++i) {
      if (probes[i].data.size() < per) return false;
    }
    return true;
  };
  ASSERT_TRUE(run_until(all_in, 200, 50));
  for (std::size_t i = 0; i < n; ++i) {
    ASSERT_EQ(probes[i].data.size(), per) << "connection " << i;
    EXPECT_TRUE(probes[i].data == sent[i]) << "connection " << i << " got other bytes";
    EXPECT_EQ(probes[i].recv_errno, 0);
  }
}

// 10,000 clients in a child process (so neither side needs 20,000 fds),
// accepted through the loop's listening socket; every connection gets its
// byte echoed through the backend's I/O functions.
void echo_one(Connection& c) {
  c.read->handler = [](Event& ev) {
    auto* conn = ev.owner<Connection>();
    char b[16];
    const long n = conn->recv(*conn, b, sizeof b);
    if (n > 0) {
      (void)conn->send(*conn, b, static_cast<std::size_t>(n));
    } else if (n == 0 || n == kIoError) {
      conn->loop->pool().close_connection(*conn);
      return;
    }
    (void)conn->loop->handle_read_event(*conn->read);
  };
  c.write->handler = [](Event&) {};
  (void)c.loop->handle_read_event(*c.read);
}

int run_clients(int port, int n) {
  std::vector<int> fds;
  fds.reserve(static_cast<std::size_t>(n));
  const sockaddr_in a = loopback(static_cast<std::uint16_t>(port));
  for (int i = 0; i < n; ++i) {
    int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s == -1 || ::connect(s, reinterpret_cast<const sockaddr*>(&a), sizeof a) == -1) return 2;
    if (::send(s, "x", 1, MSG_NOSIGNAL) != 1) return 3;
    fds.push_back(s);
  }
  // All are connected at once; now every echo must come back.
  for (int s : fds) {
    pollfd pfd{s, POLLIN, 0};
    if (::poll(&pfd, 1, 20000) != 1) return 4;
    char b;
    if (::recv(s, &b, 1, 0) != 1 || b != 'x') return 5;
  }
  for (int s : fds) ::close(s);
  return 0;
}

// select() watches descriptors below FD_SETSIZE only (its limit is tested in
// backends/select_test.cc): this one runs on the backends built to scale.
class ScalingBackendIoTest : public BackendIoTest {};
std::vector<std::string> scaling_backends() {
  std::vector<std::string> names = all_backends();
  std::erase(names, std::string("select"));
  return names;
}

TEST_P(ScalingBackendIoTest, TenThousandConcurrentConnections) {
  constexpr int kClients = 10000;
  rlimit rl{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &rl), 0);
  rl.rlim_cur = rl.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &rl);
  ASSERT_GE(rl.rlim_cur, static_cast<rlim_t>(kClients + 100)) << "RLIMIT_NOFILE too low";

  EventLoopConfig cfg;
  cfg.use = GetParam();
  cfg.connections = kClients + 64;
  cfg.multi_accept = true;
  destroy_loop();
  auto r = EventLoop::create(cfg, log_);
  ASSERT_TRUE(r) << r.status().to_string();
  loop_ = std::move(r.value());
  Listening ls;
  ls.handler = echo_one;
  ls.backlog = 4096;
  ASSERT_TRUE(ls.set_address("127.0.0.1:0"));
  ASSERT_TRUE(ls.open());
  ASSERT_TRUE(loop_->add_listening(ls));

  const pid_t child = ::fork();
  ASSERT_NE(child, -1);
  if (child == 0) ::_exit(run_clients(ls.port(), kClients));

  // A tick every 50 ms, so a loop that is told nothing still comes back
  // to check the child and the deadline (a lost registration fails the
  // test instead of hanging it).
  Event tick;
  tick.data = loop_.get();
  tick.handler = [](Event& ev) { static_cast<EventLoop*>(ev.data)->add_timer(ev, 50); };
  loop_->add_timer(tick, 50);
  int status = -1;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    loop_->process_events_and_timers();
    const pid_t w = ::waitpid(child, &status, WNOHANG);
    if (w == child) break;
  }
  if (::waitpid(child, &status, WNOHANG) == 0) {
    ::kill(child, SIGKILL);
    ::waitpid(child, &status, 0);
    loop_->del_timer(tick);
    FAIL() << "the clients did not finish";
  }
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "client failure code (2 connect, 3 send, 4/5 echo)";
  EXPECT_GE(loop_->stats().accepted, static_cast<std::uint64_t>(kClients));
  // Let the closes arrive, then the pool holds only the listener.
  for (int i = 0; i < 200 && loop_->pool().free_count() + 1 < loop_->pool().size(); ++i) {
    loop_->process_events_and_timers();
  }
  EXPECT_EQ(loop_->pool().free_count() + 1, loop_->pool().size());
  loop_->del_timer(tick);
  loop_->close_listening();
}

INSTANTIATE_TEST_SUITE_P(AllBackends, BackendIoTest, ::testing::ValuesIn(all_backends()),
                         backend_label);
INSTANTIATE_TEST_SUITE_P(ScalingBackends, ScalingBackendIoTest,
                         ::testing::ValuesIn(scaling_backends()), backend_label);

}  // namespace
}  // namespace vigil::test
