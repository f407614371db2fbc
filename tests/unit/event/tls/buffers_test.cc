// Tests for src/event/tls/buffers.cc: which keep-alive connections keep
// their record buffers (tls_idle) and how the per-loop list stays bounded.

#include <gtest/gtest.h>
#include <signal.h>

#include <vector>

#include "tls_pair.h"

namespace vigil {
namespace {

using test::TestContexts;
using test::TestTlsPair;

bool releases(const TestTlsPair& p) {
  return (SSL_get_mode(p.tc.ssl) & SSL_MODE_RELEASE_BUFFERS) != 0;
}

// One request and its answer, as a keep-alive connection serves them.
void serve_one(TestTlsPair& p) {
  ASSERT_TRUE(p.client_write("GET / HTTP/1.1\r\n\r\n"));
  char buf[256];
  p.rev.ready = 1;
  ASSERT_EQ(tls_recv(p.c, buf, sizeof buf), 18);
  ASSERT_EQ(tls_send(p.c, "HTTP/1.1 204 \r\n\r\n", 17), 17);
  ASSERT_EQ(p.client_read_available().size(), 17u);
}

// Two requests, each followed by a keep-alive wait: from its second wait the
// connection keeps its buffers.
void serve_twice(TestTlsPair& p) {
  ASSERT_NO_FATAL_FAILURE(serve_one(p));
  tls_idle(p.c);
  ASSERT_NO_FATAL_FAILURE(serve_one(p));
  tls_idle(p.c);
}

class WarmBuffers : public ::testing::Test {
 protected:
  void SetUp() override {
    ::signal(SIGPIPE, SIG_IGN);
    ASSERT_TRUE(ctx_.ok);
    loop_ = test::make_test_loop();
    ASSERT_NE(loop_, nullptr);
  }
  void TearDown() override {
    pairs_.clear();
    if (loop_ != nullptr) tls_exit_loop(*loop_);
  }
  TestTlsPair& add() {
    pairs_.push_back(std::make_unique<TestTlsPair>(ctx_, loop_.get()));
    return *pairs_.back();
  }
  TestContexts ctx_;
  std::unique_ptr<EventLoop> loop_;
  std::vector<std::unique_ptr<TestTlsPair>> pairs_;
};

TEST_F(WarmBuffers, AConnectionServedOnceKeepsNothing) {
  TestTlsPair& p = add();
  ASSERT_TRUE(p.ok);
  serve_one(p);
  tls_idle(p.c);
  EXPECT_TRUE(releases(p)) << "it may stay idle for good: OpenSSL frees its buffers";
  EXPECT_EQ(p.tc.warm, 0u);
  // Its buffers are gone already: nothing is left to free.
  EXPECT_EQ(SSL_free_buffers(p.tc.ssl), 1);
}

TEST_F(WarmBuffers, AConnectionThatComesBackKeepsItsBuffers) {
  TestTlsPair& p = add();
  ASSERT_TRUE(p.ok);
  serve_twice(p);
  EXPECT_FALSE(releases(p));
  EXPECT_EQ(p.tc.warm, 1u);
  serve_one(p);  // served with the buffers it kept
  tls_idle(p.c);
  EXPECT_FALSE(releases(p));
}

TEST_F(WarmBuffers, TheListIsBoundedAndTheLeastRecentlyIdleLeavesIt) {
  std::vector<TestTlsPair*> ps;
  for (std::size_t i = 0; i < kTlsWarmMax + 2; ++i) {
    TestTlsPair& p = add();
    ASSERT_TRUE(p.ok) << i;
    ps.push_back(&p);
  }
  for (TestTlsPair* p : ps) {
    serve_one(*p);
    tls_idle(p->c);
    serve_one(*p);
  }
  // Idle in order, but the first one idles again last: it is the most recent.
  for (std::size_t i = 0; i < kTlsWarmMax; ++i) tls_idle(ps[i]->c);
  tls_idle(ps[0]->c);
  for (TestTlsPair* p : ps)
    EXPECT_EQ(p->tc.warm, p == ps[kTlsWarmMax] || p == ps[kTlsWarmMax + 1] ? 0u : 1u);
  // Two more: the two least recently idle (1 and 2) go back to releasing.
  tls_idle(ps[kTlsWarmMax]->c);
  tls_idle(ps[kTlsWarmMax + 1]->c);
  EXPECT_EQ(ps[0]->tc.warm, 1u);
  EXPECT_EQ(ps[1]->tc.warm, 0u);
  EXPECT_EQ(ps[2]->tc.warm, 0u);
  EXPECT_TRUE(releases(*ps[1]));
  EXPECT_TRUE(releases(*ps[2]));
  EXPECT_EQ(ps[3]->tc.warm, 1u);
  EXPECT_FALSE(releases(*ps[3]));
  std::size_t warm = 0;
  for (TestTlsPair* p : ps) warm += p->tc.warm;
  EXPECT_EQ(warm, kTlsWarmMax);
  // A connection that is closed leaves the list (tls_close), and the list
  // still works: the next idle one joins without pushing anybody out.
  tls_close(ps[5]->c);
  EXPECT_EQ(ps[5]->tc.warm, 0u);
  tls_idle(ps[1]->c);
  EXPECT_EQ(ps[1]->tc.warm, 1u);
  EXPECT_EQ(ps[3]->tc.warm, 1u) << "room was made by the closed one";
  // Buffers left holding bytes are freed by OpenSSL once they are empty.
  serve_one(*ps[2]);
}

TEST_F(WarmBuffers, TheLoopsExitHookEmptiesTheList) {
  TestTlsPair& p = add();
  ASSERT_TRUE(p.ok);
  serve_twice(p);
  ASSERT_EQ(p.tc.warm, 1u);
  tls_exit_loop(*loop_);
  EXPECT_EQ(p.tc.warm, 0u);
  // The connection closes after its loop's list is gone (worker exit order).
  tls_close(p.c);
  EXPECT_EQ(p.tc.ssl, nullptr);
}

}  // namespace
}  // namespace vigil
