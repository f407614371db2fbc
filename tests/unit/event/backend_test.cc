// The backend conformance suite: one parametrized suite, run against every
// backend in backend_names(). Each test drives the backend directly through
// EventLoop::backend().process_events() on a real EventLoop and real sockets
// (socketpairs, TCP over 127.0.0.1), and every wait is bounded, so a broken
// backend fails a test instead of hanging it.

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "unit/event/backend_fixture.h"
#include "vigil/event/backend.h"
#include "vigil/event/peer.h"

namespace vigil::test {
namespace {

TEST_P(BackendTest, ReportsReadable) {
  auto [fd, peer] = unix_pair();
  Probe p;
  Connection* c = attach(fd, &p);
  ASSERT_NE(c, nullptr);
  ASSERT_OK(backend().add(*c->read, conn_flags()));
  EXPECT_TRUE(c->read->active);

  ASSERT_OK(pass(0));
  EXPECT_EQ(p.reads, 0) << "reported before any data arrived";

  const auto events_before = loop_->stats().events;
  write_some(peer.get(), "x");
  ASSERT_TRUE(run_until([&] { return p.reads > 0; }));
  EXPECT_TRUE(p.ready_seen);
  EXPECT_EQ(c->read->available, -1);
  EXPECT_GT(loop_->stats().events, events_before);
  EXPECT_EQ(p.writes, 0) << "write handler ran without a write registration";

  ASSERT_OK(backend().del(*c->read, 0));
  EXPECT_FALSE(c->read->active);
}

TEST_P(BackendTest, UnreadDataIsReportedOnceWhenEdgeAgainWhenLevel) {
  auto [fd, peer] = unix_pair();
  Probe p;  // the handler does not read
  Connection* c = attach(fd, &p);
  ASSERT_NE(c, nullptr);
  ASSERT_OK(backend().add(*c->read, conn_flags()));
  write_some(peer.get(), "first");
  ASSERT_TRUE(run_until([&] { return p.reads > 0; }));
  const int after_first = p.reads;

  const auto empty_before = loop_->stats().empty_waits;
  for (int i = 0; i < 3; ++i) ASSERT_OK(pass(30));

  if (edge()) {
    EXPECT_EQ(p.reads, after_first) << "edge-triggered backend reported unread data again";
    EXPECT_GT(loop_->stats().empty_waits, empty_before);
    write_some(peer.get(), "second");
    EXPECT_TRUE(run_until([&] { return p.reads > after_first; }))
        << "new data after an unread report was not reported";
  } else {
    EXPECT_GE(p.reads, after_first + 3) << "level-triggered backend forgot unread data";
  }
}

// Level registrations exist on edge backends too: nginx registers listening
// sockets without EPOLLET, so a backlog one pass did not empty is reported
// again (io_uring re-arms a single-shot poll for them).
TEST_P(BackendTest, LevelRegistrationReportsUnreadDataAgainOnEveryBackend) {
  auto [fd, peer] = unix_pair();
  Probe p;  // the handler does not read
  Connection* c = attach(fd, &p);
  ASSERT_NE(c, nullptr);
  ASSERT_OK(backend().add(*c->read, kEvLevel));
  write_some(peer.get(), "pending");
  ASSERT_TRUE(run_until([&] { return p.reads >= 3; }, 20, 50))
      << "reported " << p.reads << " times";
}

// A listening socket registered the way the loop does it (EPOLLEXCLUSIVE
// where the backend offers it) reports a pending connection, again and again
// until it is accepted.
TEST_P(BackendTest, ListeningSocketReportsUntilAccepted) {
  sockaddr_in addr{};
  Fd ls = tcp_listener(&addr);
  ASSERT_NE(ls.get(), -1);
  Probe pl;
  Connection* l = attach(ls.release(), &pl);
  ASSERT_NE(l, nullptr);
  l->read->accept = 1;
  const unsigned flags = (loop_->capabilities() & kCapExclusive) ? kEvExclusive : kEvLevel;
  ASSERT_OK(backend().add(*l->read, flags));

  Fd client(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  const int rc = ::connect(client.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  ASSERT_TRUE(rc == 0 || errno == EINPROGRESS) << std::strerror(errno);
  ASSERT_TRUE(run_until([&] { return pl.reads >= 2; }, 20, 50)) << "not reported again";
  // Through the backend: io_uring's kernel accept may hold it already.
  Fd accepted(backend().accept(*l, nullptr, nullptr));
  ASSERT_NE(accepted.get(), -1) << std::strerror(errno);
  ASSERT_OK(pass(0));  // may still carry a report taken before the accept
  const int reads = pl.reads;
  for (int i = 0; i < 2; ++i) ASSERT_OK(pass(20));
  EXPECT_EQ(pl.reads, reads) << "an empty backlog was reported";
}

TEST_P(BackendTest, DelOneDirectionKeepsTheOther) {
  auto [fd, peer] = unix_pair();
  Probe p;
  p.consume = true;
  Connection* c = attach(fd, &p);
  ASSERT_NE(c, nullptr);
  ASSERT_OK(backend().add(*c->read, conn_flags()));
  ASSERT_OK(backend().add(*c->write, conn_flags()));
  ASSERT_TRUE(run_until([&] { return p.writes > 0; })) << "an empty socket is writable";
  ASSERT_OK(backend().del(*c->write, conn_flags()));
  EXPECT_FALSE(c->write->active);
  EXPECT_TRUE(c->read->active);

  const int writes = p.writes;
  write_some(peer.get(), "still here");
  ASSERT_TRUE(run_until([&] { return p.data == "still here"; }));
  for (int i = 0; i < 2; ++i) ASSERT_OK(pass(20));
  EXPECT_EQ(p.writes, writes) << "deleted write event was reported";
}

TEST_P(BackendTest, AddConnRegistersPerTheBackendsModel) {
  auto [fd, peer] = unix_pair();
  Probe p;
  p.consume = true;
  Connection* c = attach(fd, &p);
  ASSERT_NE(c, nullptr);
  ASSERT_OK(backend().add_conn(*c));
  EXPECT_TRUE(c->read->active);
  // Edge-triggered backends register both directions for the connection's
  // lifetime; level-triggered ones the read side only (nginx's ngx_add_conn
  // is NULL for poll and select).
  EXPECT_EQ(static_cast<bool>(c->write->active), edge());

  write_some(peer.get(), "abc");
  ASSERT_TRUE(run_until([&] { return p.data == "abc"; }));
  if (edge()) {
    EXPECT_GT(p.writes, 0);
  }

  ASSERT_OK(backend().del_conn(*c, 0));
  EXPECT_FALSE(c->read->active);
  EXPECT_FALSE(c->write->active);
  const int reads = p.reads;
  write_some(peer.get(), "more");
  for (int i = 0; i < 2; ++i) ASSERT_OK(pass(20));
  EXPECT_EQ(p.reads, reads) << "reported after del_conn";
}

TEST_P(BackendTest, PeerCloseWithoutDataIsEof) {
  check_peer_close("");
}
TEST_P(BackendTest, PeerCloseAfterDataIsEof) {
  check_peer_close("last words");
}

// A read handler as the protocols write one: c.recv() while the event is
// ready. A short read clears ready (the socket is drained), so a FIN that came
// with the data must be reported with it (EPOLLRDHUP, kqueue's EV_EOF) or
// the FIN would never be seen: no new edge comes for it.
void on_read_while_ready(Event& ev) {
  auto* c = ev.owner<Connection>();
  auto* p = static_cast<Probe*>(c->data);
  ++p->reads;
  char buf[4096];
  while (ev.ready) {
    const long n = c->recv(*c, buf, sizeof buf);
    if (n > 0) {
      p->data.append(buf, static_cast<std::size_t>(n));
    } else if (n == 0) {
      p->eof = true;
      return;
    } else {
      return;  // kIoAgain (ready cleared) or an error
    }
  }
}

TEST_P(BackendTest, FinThatCameWithTheDataIsSeenAfterAShortRead) {
  auto [fd, peer] = tcp_pair();
  ASSERT_NE(fd, -1);
  Probe p;
  Connection* c = attach(fd, &p, on_read_while_ready);
  ASSERT_NE(c, nullptr);
  c->recv = unix_recv;  // readiness I/O on every backend (io_uring's own recv aside)
  if (edge()) {
    ASSERT_OK(backend().add_conn(*c));  // both directions, as accepted connections
  } else {
    ASSERT_OK(backend().add(*c->read, kEvLevel));
  }
  ASSERT_OK(pass(0));
  write_some(peer.get(), "body then FIN");
  peer.reset();
  ASSERT_TRUE(run_until([&] { return p.eof; }, 10, 50)) << "the FIN was never seen";
  EXPECT_EQ(p.data, "body then FIN");
}

TEST_P(BackendTest, WritableAgainAfterTheSendBufferDrains) {
  auto [fd, peer] = unix_pair();
  Probe p;
  Connection* c = attach(fd, &p);
  ASSERT_NE(c, nullptr);

  // Fill the send buffer until the kernel says EAGAIN.
  std::string chunk(65536, 'z');
  std::size_t queued = 0;
  for (;;) {
    ssize_t n = ::send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL);
    if (n > 0) {
      queued += static_cast<std::size_t>(n);
      continue;
    }
    ASSERT_EQ(errno, EAGAIN) << std::strerror(errno);
    break;
  }
  ASSERT_GT(queued, 0u);

  ASSERT_OK(backend().add(*c->write, conn_flags()));
  for (int i = 0; i < 2; ++i) ASSERT_OK(pass(30));
  EXPECT_EQ(p.writes, 0) << "a full socket was reported writable";

  // The peer reads everything: the buffer drains and the write side wakes.
  std::size_t drained = 0;
  char buf[65536];
  for (;;) {
    ssize_t n = ::recv(peer.get(), buf, sizeof buf, 0);
    if (n <= 0) break;
    drained += static_cast<std::size_t>(n);
  }
  EXPECT_EQ(drained, queued);
  ASSERT_TRUE(run_until([&] { return p.writes > 0; })) << "write readiness not reported";
  EXPECT_TRUE(c->write->ready);
}

TEST_P(BackendTest, RefusedConnectIsReportedWithTheError) {
  // A port that was just bound and closed: nothing listens there.
  sockaddr_in a{};
  { Fd gone = tcp_listener(&a); }
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  ASSERT_NE(fd, -1);
  const int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  const int connect_errno = rc == -1 ? errno : 0;
  Probe p;  // handlers only count: SO_ERROR stays for the test to read
  Connection* c = attach(fd, &p);
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(connect_errno == EINPROGRESS || connect_errno == ECONNREFUSED)
      << std::strerror(connect_errno);
  ASSERT_OK(backend().add(*c->write, conn_flags()));
  ASSERT_OK(backend().add(*c->read, conn_flags()));

  ASSERT_TRUE(run_until([&] { return p.writes > 0; })) << "no write event for the failed connect";
  if (connect_errno == EINPROGRESS) {
    // SO_ERROR, or what kqueue reported with EV_EOF (libkqueue reads SO_ERROR
    // to report it, which clears it).
    const int err = peer_connect_result(*c);
    EXPECT_EQ(err, ECONNREFUSED) << std::strerror(err);
  }
  // The read side hears of it too (error/hang-up goes to both directions).
  EXPECT_GT(p.reads, 0);
}

// close_connection() must really close: a backend that keeps a reference to
// the socket (an io_uring poll holds the file) has to drop it by the next pass.
TEST_P(BackendTest, PeerSeesTheCloseByTheNextPass) {
  auto [fd, peer] = unix_pair();
  Probe p;
  Connection* c = attach(fd, &p);
  ASSERT_NE(c, nullptr);
  ASSERT_OK(backend().add(*c->read, conn_flags()));
  ASSERT_OK(backend().add(*c->write, conn_flags()));
  ASSERT_TRUE(run_until([&] { return p.writes > 0; }));  // armed and reporting
  loop_->pool().close_connection(*c);
  ASSERT_OK(pass(0));  // the loop always comes back here after the handlers
  char b;
  EXPECT_EQ(::recv(peer.get(), &b, 1, 0), 0)
      << "the peer does not see the close: " << std::strerror(errno);
}

// Handlers of the 1000-connection test: read the byte, count the connection once.
struct Fanout {
  std::size_t fired = 0;
};
Fanout* g_fanout = nullptr;

void on_read_count_once(Event& ev) {
  auto* c = ev.owner<Connection>();
  auto* p = static_cast<Probe*>(c->data);
  if (p->reads++ == 0) ++g_fanout->fired;
  char b[16];
  while (::recv(c->fd, b, sizeof b, 0) > 0) {
  }
}

TEST_P(BackendTest, AThousandConnectionsAllReported) {
  // select() cannot watch fds past FD_SETSIZE (1024): with 2 fds per pair it
  // gets as many pairs as fit below that.
  const bool is_select = GetParam() == "select";
  const std::size_t n = is_select ? 400 : 1000;
  ASSERT_OK(create_loop(is_select ? 1024 : 2048));

  Fanout fan;
  g_fanout = &fan;
  std::vector<Probe> probes(n);
  std::vector<Fd> peers;
  peers.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    auto [fd, peer] = unix_pair();
    ASSERT_NE(fd, -1);
    Connection* c = attach(fd, &probes[i], on_read_count_once);
    ASSERT_NE(c, nullptr);
    ASSERT_OK(backend().add(*c->read, conn_flags()));
    peers.push_back(std::move(peer));
  }
  for (Fd& peer : peers) write_some(peer.get(), "!");

  const auto events_before = loop_->stats().events;
  int passes = 0;
  while (fan.fired < n && passes < 20) {
    ASSERT_OK(pass(1000));
    ++passes;
  }
  EXPECT_EQ(fan.fired, n) << "after " << passes << " passes";
  // epoll_events (512 here) bounds one wait: a few passes, not one per fd.
  EXPECT_LE(passes, 10);
  EXPECT_GE(loop_->stats().events - events_before, n);
  g_fanout = nullptr;
}

// The stale-event scenario of seed 000/001 inside one batch: X and Y are both
// ready; whichever handler runs first closes the other connection and reuses
// its pool slot for a fresh fd (`reuses` times: taken and freed, then taken
// again). The other's report, already taken from the kernel, now names a slot
// of a newer generation: it must be dropped, not delivered to the new
// connection. With two reuses nginx's one instance bit is back where it was.
struct ReuseScenario {
  BackendTest* test = nullptr;
  Connection* x = nullptr;
  Connection* y = nullptr;
  Connection* victim = nullptr;
  Connection* reused = nullptr;
  Fd reused_peer;
  int reuses = 1;
  std::uint32_t victim_generation = 0;
  int first_runs = 0;
  int reused_reads = 0;
  bool same_slot = false;
};
ReuseScenario* g_reuse = nullptr;

void on_reused_read(Event&) {
  ++g_reuse->reused_reads;
}

void on_read_close_other(Event& ev) {
  ReuseScenario& s = *g_reuse;
  auto* c = ev.owner<Connection>();
  ++s.first_runs;
  char b[16];
  while (::recv(c->fd, b, sizeof b, 0) > 0) {
  }
  if (s.victim != nullptr) return;
  s.victim = c == s.x ? s.y : s.x;
  s.victim_generation = s.victim->generation;
  EventLoop& loop = *s.test->loop_;
  loop.pool().close_connection(*s.victim);
  s.same_slot = true;
  for (int i = 0; i < s.reuses; ++i) {
    if (s.reused != nullptr) loop.pool().close_connection(*s.reused);  // taken and freed again
    auto [fd, peer] = unix_pair();  // no data: nothing may be reported for it
    s.reused_peer = std::move(peer);
    Connection* r = loop.pool().get(fd, s.test->log_);
    if (r == nullptr) {
      ::close(fd);
      s.reused = nullptr;
      return;
    }
    s.reused = r;
    s.same_slot = s.same_slot && r == s.victim;
    r->read->handler = on_reused_read;
    r->write->handler = on_reused_read;
    Status st = loop.backend().add(*r->read, s.test->conn_flags());
    EXPECT_TRUE(st.is_ok()) << st.to_string();
  }
}

void run_reuse_scenario(BackendTest& t, int reuses);

void run_reuse_scenario(BackendTest& t, int reuses) {
  ReuseScenario s;
  s.test = &t;
  s.reuses = reuses;
  g_reuse = &s;
  auto [fx, px] = unix_pair();
  auto [fy, py] = unix_pair();
  Probe probe_x, probe_y;
  s.x = t.attach(fx, &probe_x, on_read_close_other);
  s.y = t.attach(fy, &probe_y, on_read_close_other);
  ASSERT_NE(s.x, nullptr);
  ASSERT_NE(s.y, nullptr);
  ASSERT_OK(t.backend().add(*s.x->read, t.conn_flags()));
  ASSERT_OK(t.backend().add(*s.y->read, t.conn_flags()));
  write_some(px.get(), "x");
  write_some(py.get(), "y");

  const auto events_before = t.loop_->stats().events;
  ASSERT_TRUE(t.run_until([&] { return s.first_runs > 0; }));
  EXPECT_EQ(s.first_runs, 1);
  EXPECT_GE(t.loop_->stats().events - events_before, 2u)
      << "both reports should come in one batch for the scenario to mean anything";
  ASSERT_NE(s.reused, nullptr);
  EXPECT_TRUE(s.same_slot) << "the pool did not hand out the freed slot";
  EXPECT_EQ(s.reused->generation, s.victim_generation + static_cast<std::uint32_t>(reuses));
  EXPECT_EQ(s.reused_reads, 0) << "a stale report reached the slot's new connection";
  for (int i = 0; i < 2; ++i) ASSERT_OK(t.pass(20));
  EXPECT_EQ(s.reused_reads, 0);
  t.conns_.push_back(s.reused);
  g_reuse = nullptr;
}

TEST_P(BackendTest, StaleEventInTheSameBatchIsDropped) {
  run_reuse_scenario(*this, 1);
}

// Issue 12: a slot taken and freed twice inside one batch. A one-bit
// instance flips back (the generations differ by 2: same low bit), so nginx's
// check would hand the stale report to the new connection; the generation
// counter does not.
TEST_P(BackendTest, StaleEventAfterTheSlotIsReusedTwiceInOneBatchIsDropped) {
  run_reuse_scenario(*this, 2);
}

// The same rule across a close: A is registered and ready, then closed while
// a dup of its fd keeps the open file alive, so epoll keeps A's registration
// and still reports it, tagged with A's generation. The slot goes to B (one
// generation on); B has no data, so B's handler must never run.
TEST_P(BackendTest, StaleEventAfterCloseAndReuseIsDropped) {
  auto [fa, pa] = unix_pair();
  Probe probe_a, probe_b;
  Connection* a = attach(fa, &probe_a);
  ASSERT_NE(a, nullptr);
  ASSERT_OK(backend().add(*a->read, conn_flags()));
  write_some(pa.get(), "for A");
  Fd keep(::dup(fa));
  ASSERT_NE(keep.get(), -1);
  const std::uint32_t old_generation = a->generation;
  loop_->pool().close_connection(*a);

  auto [fb, pb] = unix_pair();
  Connection* b = attach(fb, &probe_b);
  ASSERT_NE(b, nullptr);
  ASSERT_EQ(b, a) << "the pool did not reuse the freed slot";
  EXPECT_EQ(b->generation, old_generation + 1);
  ASSERT_OK(backend().add(*b->read, conn_flags()));

  const auto events_before = loop_->stats().events;
  for (int i = 0; i < 3; ++i) ASSERT_OK(pass(30));
  EXPECT_EQ(probe_b.reads, 0) << "A's stale report reached B";
  if (GetParam() == "epoll") {
    EXPECT_GT(loop_->stats().events, events_before)
        << "epoll should still have reported A's registration (kept alive by the dup)";
  }
  // B still works.
  write_some(pb.get(), "for B");
  EXPECT_TRUE(run_until([&] { return probe_b.reads > 0; }));
}

std::atomic<int> g_notified{0};

TEST_P(BackendTest, NotifyFromAnotherThreadWakesAnInfiniteWait) {
  g_notified = 0;
  loop_->notify_event().handler = [](Event&) { ++g_notified; };

  // A watchdog that wakes the wait through an ordinary fd after 5 s, so a
  // broken notify fails the test instead of hanging it.
  auto [wfd, wpeer] = unix_pair();
  Probe wp;
  Connection* w = attach(wfd, &wp);
  ASSERT_NE(w, nullptr);
  ASSERT_OK(backend().add(*w->read, conn_flags()));
  std::atomic<bool> woken{false};
  std::thread watchdog([&] {
    for (int i = 0; i < 500 && !woken; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (!woken) (void)!::write(wpeer.get(), "w", 1);
  });
  std::thread notifier([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    Status st = loop_->backend().notify();
    EXPECT_TRUE(st.is_ok()) << st.to_string();
  });

  // A wait may also end early with EINTR (not an error, and not a report):
  // wait again, as the loop would, until the notify or the watchdog arrives.
  Status st;
  for (int i = 0; i < 10 && st && g_notified == 0 && wp.reads == 0; ++i) {
    st = pass(kTimerInfinite);
  }
  woken = true;
  notifier.join();
  watchdog.join();
  ASSERT_OK(std::move(st));
  EXPECT_EQ(g_notified.load(), 1);
  EXPECT_EQ(wp.reads, 0) << "only the watchdog woke the wait";

  // The counter was reset: nothing more to report.
  ASSERT_OK(pass(20));
  EXPECT_EQ(g_notified.load(), 1);
  loop_->notify_event().handler = nullptr;
}

TEST_P(BackendTest, PostEventsQueuesAcceptAndOthersSeparately) {
  sockaddr_in addr{};
  Fd ls = tcp_listener(&addr);
  ASSERT_NE(ls.get(), -1);
  Probe pl, pd;
  Connection* l = attach(ls.release(), &pl);
  ASSERT_NE(l, nullptr);
  l->read->accept = 1;
  // Listening sockets are level-triggered on every backend, as in nginx.
  ASSERT_OK(backend().add(*l->read, kEvLevel));

  auto [dfd, dpeer] = unix_pair();
  Connection* d = attach(dfd, &pd);
  ASSERT_NE(d, nullptr);
  ASSERT_OK(backend().add(*d->read, conn_flags()));

  Fd client(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  const int rc = ::connect(client.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  ASSERT_TRUE(rc == 0 || errno == EINPROGRESS) << std::strerror(errno);
  write_some(dpeer.get(), "d");

  ASSERT_TRUE(run_until([&] { return l->read->posted && d->read->posted; }, 50, 100,
                        kProcUpdateTime | kProcPostEvents));
  EXPECT_EQ(pl.reads, 0) << "handler called although kProcPostEvents";
  EXPECT_EQ(pd.reads, 0) << "handler called although kProcPostEvents";
  EXPECT_TRUE(l->read->ready);
  EXPECT_TRUE(d->read->ready);
  EXPECT_EQ(loop_->posted_accept().front(), l->read);
  EXPECT_EQ(loop_->posted().front(), d->read);

  EXPECT_EQ(loop_->posted_accept().process(), 1u);
  EXPECT_EQ(pl.reads, 1);
  EXPECT_EQ(pd.reads, 0);
  EXPECT_EQ(loop_->posted().process(), 1u);
  EXPECT_EQ(pd.reads, 1);
}

// An fd closed behind the backend's back must not make the loop spin: poll
// reports POLLNVAL and select fails with EBADF on every call until the fd is
// dropped; epoll and io_uring simply stop reporting it.
TEST_P(BackendTest, FdClosedBehindTheBackendDoesNotSpin) {
  auto [fd, peer] = unix_pair();
  Probe p;
  Connection* c = attach(fd, &p);
  ASSERT_NE(c, nullptr);
  ASSERT_OK(backend().add(*c->read, conn_flags()));
  ASSERT_EQ(::close(fd), 0);  // and no fd is opened until the passes are done

  for (int i = 0; i < 3; ++i) ASSERT_OK(pass(20));
  if (loop_->capabilities() & kCapLevel) {
    EXPECT_EQ(p.reads, 1) << "the bad fd should be reported once, then dropped";
  } else {
    EXPECT_LE(p.reads, 1);
  }
  // Release the slot without closing the (already closed) fd.
  ASSERT_OK(backend().del(*c->read, kEvClose));
  c->fd = -1;
  loop_->pool().free(*c);
}

INSTANTIATE_TEST_SUITE_P(AllBackends, BackendTest, ::testing::ValuesIn(all_backends()),
                         backend_label);

// ---- selection -----------------------------------------------------------------

TEST(MakeBackend, EmptyNameIsEpoll) {
  auto b = make_backend("");
  ASSERT_TRUE(b.is_ok()) << b.status().to_string();
  EXPECT_EQ(b.value()->name(), "epoll");
}

TEST(MakeBackend, UnknownNameIsRefusedInNginxWords) {
  auto b = make_backend("eventport");
  ASSERT_FALSE(b.is_ok());
  EXPECT_EQ(b.status().message(), "invalid event type \"eventport\"");
}

TEST(MakeBackend, EveryListedNameMakesThatBackend) {
  const auto names = backend_names();
  ASSERT_FALSE(names.empty());
  EXPECT_EQ(names.front(), "epoll");
  for (std::string_view want : {"epoll", "poll", "select"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  }
  const bool has_uring = std::find(names.begin(), names.end(), "io_uring") != names.end();
#if VIGIL_HAVE_URING
  EXPECT_TRUE(has_uring);
#else
  EXPECT_FALSE(has_uring);
  EXPECT_FALSE(make_backend("io_uring").is_ok());
#endif
  for (std::string_view n : names) {
    auto b = make_backend(n);
    ASSERT_TRUE(b.is_ok()) << n;
    EXPECT_EQ(b.value()->name(), n);
  }
}

}  // namespace
}  // namespace vigil::test
