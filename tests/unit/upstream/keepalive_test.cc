// The keepalive cache behind get/free, on real sockets and every backend: a
// reusable connection is handed out again (pc.cached), a connection the
// backend closed or wrote on while idle is dropped at once, LRU eviction,
// keepalive_requests, keepalive_timeout, retry on a fresh connection.
#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "test_util.h"
#include "unit/upstream/upstream_test_util.h"
#include "vigil/core/log.h"
#include "vigil/event/listening.h"
#include "vigil/event/loop.h"

namespace vigil::upstream {
namespace {

class Keepalive : public testing::UpstreamConfTest,
                  public ::testing::WithParamInterface<std::string> {
 protected:
  void SetUp() override {
    UpstreamConfTest::SetUp();
    EventLoopConfig cfg;
    cfg.use = GetParam();
    cfg.connections = 32;
    auto r = EventLoop::create(cfg, Log::global());
    ASSERT_TRUE(r) << r.status().to_string();
    loop_ = std::move(r).value();
    ASSERT_TRUE(backend_.set_address("127.0.0.1:0"));
    ASSERT_TRUE(backend_.open());
  }
  void TearDown() override {
    if (loop_) close_keepalive(*loop_);
    for (int fd : accepted_) ::close(fd);
    backend_.close();
    UpstreamConfTest::TearDown();
  }
  Group* group(const std::string& params) {
    return load_group("upstream u { server 127.0.0.1:" + std::to_string(backend_.port()) + "; " +
                      params + " }");
  }
  void run_once() { loop_->process_events_and_timers(); }

  // A request: get + connect (waiting for it), returning get's code.
  struct Attempt {
    PeerRequest pr;
    PeerConnection pc;
    int rc = 0;
  };
  std::unique_ptr<Attempt> connect(Group& g, const void* reuse_key = nullptr) {
    auto a = std::make_unique<Attempt>();
    a->pr.init(g, *loop_, 0);
    a->pr.set_reuse_key(reuse_key);
    a->pr.attach(a->pc);
    a->rc = event_connect_peer(*loop_, a->pc);
    if (a->rc == kPeerAgain) {
      Connection* c = a->pc.connection;
      c->write->handler = [](Event&) {};
      c->read->handler = [](Event&) {};
      EXPECT_TRUE(test::run_until([&] { run_once(); }, [&] { return c->write->ready != 0; }));
      EXPECT_EQ(peer_connect_result(*c), 0);
    }
    if (a->rc == kPeerOk || a->rc == kPeerAgain) {
      int fd = ::accept4(backend_.fd, nullptr, nullptr, SOCK_CLOEXEC);
      EXPECT_NE(fd, -1);
      accepted_.push_back(fd);
    }
    return a;
  }
  // The backend's end of a connection the proxy closed reads EOF (or a reset
  // when unread bytes were discarded). io_uring submits the close with the
  // next wait, so the loop runs until the backend sees it.
  bool backend_sees_close(int fd) {
    pollfd p{fd, POLLIN, 0};
    if (!test::run_until([&] { run_once(); }, [&] { return ::poll(&p, 1, 0) == 1; }, 3000)) {
      return false;
    }
    char b;
    return ::recv(fd, &b, 1, 0) <= 0;
  }
  // A request/response round trip on the attempt's connection.
  void exchange(Attempt& a) {
    Connection& c = *a.pc.connection;
    c.write->ready = 1;
    ASSERT_EQ(c.send(c, "ping", 4), 4);
    int fd = accepted_.back();
    char buf[4];
    ASSERT_EQ(::recv(fd, buf, 4, MSG_WAITALL), 4);
    ASSERT_EQ(::send(fd, "pong", 4, 0), 4);
    pollfd p{c.fd, POLLIN, 0};
    ASSERT_EQ(::poll(&p, 1, 2000), 1);
    ASSERT_EQ(::recv(c.fd, buf, 4, 0), 4);
    c.read->ready = 0;
  }

  std::unique_ptr<EventLoop> loop_;
  Listening backend_;
  std::vector<int> accepted_;
};

TEST_P(Keepalive, ReusableConnectionIsHandedOutAgain) {
  Group* g = group("keepalive 4;");
  ASSERT_NE(g, nullptr);
  auto a = connect(*g);
  ASSERT_TRUE(a->rc == kPeerOk || a->rc == kPeerAgain) << a->rc;
  EXPECT_FALSE(a->pc.cached);
  exchange(*a);
  Connection* c = a->pc.connection;
  a->pc.free(a->pc, a->pc.data, kPeerKeepalive);
  EXPECT_EQ(a->pc.connection, nullptr) << "the cache took it";
  EXPECT_EQ(keepalive_cached(*loop_, *g), 1u);

  auto b = connect(*g);
  ASSERT_EQ(b->rc, kPeerDone);
  EXPECT_TRUE(b->pc.cached);
  EXPECT_TRUE(b->pr.cached());
  EXPECT_EQ(b->pc.connection, c);
  EXPECT_EQ(keepalive_cached(*loop_, *g), 0u);
  EXPECT_EQ(g->peers[0].stats->cache_hits.load(), 1u);
  EXPECT_EQ(g->peers[0].stats->requests.load(), 2u);
  exchange(*b);  // the same backend socket answers
  b->pc.free(b->pc, b->pc.data, 0);
  ASSERT_NE(b->pc.connection, nullptr) << "not reusable: the caller closes it";
  loop_->pool().close_connection(*b->pc.connection);
}

// A connection cached under one reuse key (an https location's TLS
// context) goes only to a request with the same key; others connect anew.
TEST_P(Keepalive, ReuseKeySeparatesConnections) {
  Group* g = group("keepalive 4;");
  ASSERT_NE(g, nullptr);
  int ctx_a = 0, ctx_b = 0;
  auto a = connect(*g, &ctx_a);
  exchange(*a);
  Connection* c = a->pc.connection;
  a->pc.free(a->pc, a->pc.data, kPeerKeepalive);
  ASSERT_EQ(keepalive_cached(*loop_, *g), 1u);

  auto plain = connect(*g);
  EXPECT_NE(plain->rc, kPeerDone) << "no key: not the keyed connection";
  auto other = connect(*g, &ctx_b);
  EXPECT_NE(other->rc, kPeerDone);
  EXPECT_EQ(keepalive_cached(*loop_, *g), 1u) << "left in the cache, not closed";
  auto same = connect(*g, &ctx_a);
  ASSERT_EQ(same->rc, kPeerDone);
  EXPECT_EQ(same->pc.connection, c);
  for (auto* at : {plain.get(), other.get(), same.get()}) {
    at->pc.free(at->pc, at->pc.data, 0);
    if (at->pc.connection != nullptr) loop_->pool().close_connection(*at->pc.connection);
  }
}

TEST_P(Keepalive, ConnectionClosedByTheBackendIsDroppedAtOnce) {
  Group* g = group("keepalive 4;");
  ASSERT_NE(g, nullptr);
  auto a = connect(*g);
  exchange(*a);
  const std::size_t free_before = loop_->pool().free_count();
  a->pc.free(a->pc, a->pc.data, kPeerKeepalive);
  ASSERT_EQ(keepalive_cached(*loop_, *g), 1u);
  ::close(accepted_.back());
  accepted_.pop_back();
  ASSERT_TRUE(test::run_until([&] { run_once(); }, [&] { return keepalive_cached(*loop_, *g) == 0; }));
  EXPECT_EQ(loop_->pool().free_count(), free_before + 1) << "the connection was closed";
  auto b = connect(*g);
  EXPECT_TRUE(b->rc == kPeerOk || b->rc == kPeerAgain) << "a fresh connection, never the stale one";
  EXPECT_FALSE(b->pc.cached);
  loop_->pool().close_connection(*b->pc.connection);
}

TEST_P(Keepalive, UnsolicitedBytesDropTheConnection) {
  Group* g = group("keepalive 4;");
  ASSERT_NE(g, nullptr);
  auto a = connect(*g);
  exchange(*a);
  a->pc.free(a->pc, a->pc.data, kPeerKeepalive);
  ASSERT_EQ(::send(accepted_.back(), "x", 1, 0), 1);
  ASSERT_TRUE(test::run_until([&] { run_once(); }, [&] { return keepalive_cached(*loop_, *g) == 0; }));
  EXPECT_TRUE(backend_sees_close(accepted_.back()));
}

TEST_P(Keepalive, LeastRecentlyUsedIsEvictedWhenFull) {
  Group* g = group("keepalive 1;");
  ASSERT_NE(g, nullptr);
  auto a = connect(*g);
  auto b = connect(*g);
  int a_backend = accepted_[0];
  exchange(*b);
  a->pc.free(a->pc, a->pc.data, kPeerKeepalive);
  b->pc.free(b->pc, b->pc.data, kPeerKeepalive);
  EXPECT_EQ(keepalive_cached(*loop_, *g), 1u);
  // The older one (a) was closed to make room.
  EXPECT_TRUE(backend_sees_close(a_backend));
}

TEST_P(Keepalive, KeepaliveRequestsLimitsUses) {
  Group* g = group("keepalive 4; keepalive_requests 2;");
  ASSERT_NE(g, nullptr);
  auto a = connect(*g);
  a->pc.free(a->pc, a->pc.data, kPeerKeepalive);
  ASSERT_EQ(keepalive_cached(*loop_, *g), 1u);
  auto b = connect(*g);
  ASSERT_EQ(b->rc, kPeerDone);
  b->pc.free(b->pc, b->pc.data, kPeerKeepalive);
  EXPECT_NE(b->pc.connection, nullptr) << "second request on it: keepalive_requests 2 reached";
  EXPECT_EQ(keepalive_cached(*loop_, *g), 0u);
  loop_->pool().close_connection(*b->pc.connection);
}

TEST_P(Keepalive, IdleTimeoutCloses) {
  Group* g = group("keepalive 4; keepalive_timeout 50ms;");
  ASSERT_NE(g, nullptr);
  auto a = connect(*g);
  a->pc.free(a->pc, a->pc.data, kPeerKeepalive);
  ASSERT_EQ(keepalive_cached(*loop_, *g), 1u);
  ASSERT_TRUE(test::run_until([&] { run_once(); }, [&] { return keepalive_cached(*loop_, *g) == 0; }));
}

TEST_P(Keepalive, FailedOrNonReusableIsNotCached) {
  Group* g = group("keepalive 4;");
  ASSERT_NE(g, nullptr);
  auto a = connect(*g);
  a->pc.free(a->pc, a->pc.data, kPeerFailed | kPeerKeepalive);
  EXPECT_NE(a->pc.connection, nullptr);
  EXPECT_EQ(keepalive_cached(*loop_, *g), 0u);
  loop_->pool().close_connection(*a->pc.connection);
  Group* none = load_group("upstream n { server 127.0.0.1:" + std::to_string(backend_.port()) + "; }");
  ASSERT_NE(none, nullptr);
  auto b = connect(*none);
  b->pc.free(b->pc, b->pc.data, kPeerKeepalive);
  EXPECT_NE(b->pc.connection, nullptr) << "no keepalive in the group";
  loop_->pool().close_connection(*b->pc.connection);
}

TEST_P(Keepalive, StaleCachedConnectionRetriesOnAFreshOne) {
  Group* g = group("keepalive 4;");
  ASSERT_NE(g, nullptr);
  auto a = connect(*g);
  a->pc.free(a->pc, a->pc.data, kPeerKeepalive);
  auto b = connect(*g);
  ASSERT_EQ(b->rc, kPeerDone);
  const unsigned tries = b->pc.tries;
  // The send failed before any response byte: retry on a fresh connection.
  Connection* stale = b->pc.connection;
  b->pr.retry_fresh(b->pc);
  loop_->pool().close_connection(*stale);
  b->rc = event_connect_peer(*loop_, b->pc);
  EXPECT_TRUE(b->rc == kPeerOk || b->rc == kPeerAgain) << b->rc;
  EXPECT_FALSE(b->pc.cached);
  EXPECT_EQ(b->pc.tries, tries) << "no try used up";
  EXPECT_EQ(g->peers[0].stats->failures.load(), 0u);
  EXPECT_EQ(g->peers[0].stats->active.load(), 1);
  loop_->pool().close_connection(*b->pc.connection);
  b->pc.free(b->pc, b->pc.data, kPeerNext);
  EXPECT_EQ(g->peers[0].stats->active.load(), 0);
}

TEST_P(Keepalive, CloseKeepaliveClosesEverything) {
  Group* g = group("keepalive 4;");
  ASSERT_NE(g, nullptr);
  const std::size_t free_before = loop_->pool().free_count();
  auto a = connect(*g);
  auto b = connect(*g);
  a->pc.free(a->pc, a->pc.data, kPeerKeepalive);
  b->pc.free(b->pc, b->pc.data, kPeerKeepalive);
  EXPECT_EQ(keepalive_cached(*loop_, *g), 2u);
  close_keepalive(*loop_);
  EXPECT_EQ(keepalive_cached(*loop_, *g), 0u);
  EXPECT_EQ(loop_->pool().free_count(), free_before);
}

TEST_P(Keepalive, PoolDrainClosesCachedConnections) {
  Group* g = group("keepalive 4;");
  ASSERT_NE(g, nullptr);
  auto a = connect(*g);
  a->pc.free(a->pc, a->pc.data, kPeerKeepalive);
  EXPECT_EQ(loop_->pool().close_idle(), 1u);
  EXPECT_EQ(keepalive_cached(*loop_, *g), 0u);
}

INSTANTIATE_TEST_SUITE_P(Backends, Keepalive, ::testing::ValuesIn(test::backend_params()),
                         test::backend_param_name);

}  // namespace
}  // namespace vigil::upstream
