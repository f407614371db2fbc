// Passive health (max_fails / fail_timeout) as nginx: failures counted within
// fail_timeout, a failed server skipped for fail_timeout, then one request
// probes it; with `zone` one process's failures are seen by another.
#include <arpa/inet.h>
#include <sys/wait.h>
#include <unistd.h>

#include "unit/upstream/upstream_test_util.h"
#include "vigil/core/log.h"
#include "vigil/event/loop.h"

namespace vigil::upstream {
namespace {

class Health : public testing::UpstreamLoopTest {
 protected:
  void SetUp() override {
    UpstreamLoopTest::SetUp();
    if (HasFatalFailure()) return;
    at(1000000);
  }
  void TearDown() override {
    clock::time_update();  // back to the real clock
    UpstreamLoopTest::TearDown();
  }
  // The monotonic clock the balancer reads, at `ms`.
  void at(Msec ms) {
    now_ = ms;
    clock::time_update_fixed(1700000000, 0, ms);
  }
  // One attempt: the server it went to ("" when busy), ending as
  // state_of(that server's name) says.
  template <class StateOf>
  std::string attempt_with(Group& g, StateOf state_of) {
    PeerRequest pr;
    PeerConnection pc;
    pr.init(g, *loop_, 1);
    pr.attach(pc);
    if (PeerRequest::get(pc, &pr) != kPeerOk) return "";
    std::string name = pc.name;
    PeerRequest::free(pc, &pr, state_of(name));
    return name;
  }
  // One attempt, ending as `state`.
  std::string attempt(Group& g, unsigned state) {
    return attempt_with(g, [state](const std::string&) { return state; });
  }
  // One attempt that fails only when it reaches `bad`.
  std::string attempt_failing(Group& g, const std::string& bad) {
    return attempt_with(
        g, [&bad](const std::string& name) -> unsigned { return name == bad ? kPeerFailed : 0; });
  }

  Msec now_ = 0;
};

constexpr const char* kA = "127.0.0.1:1";
constexpr const char* kB = "127.0.0.1:2";

TEST_F(Health, FailedServerIsSkippedForFailTimeoutThenProbedOnce) {
  Group* g = load_group(
      "upstream u { server 127.0.0.1:1 max_fails=2 fail_timeout=10s; server 127.0.0.1:2; }");
  ASSERT_NE(g, nullptr);
  Peer& a = g->peers[0];
  // Round-robin alternates; A fails twice within the window.
  EXPECT_EQ(attempt(*g, kPeerFailed), kA);
  EXPECT_TRUE(peer_available(a, now_)) << "one failure of max_fails=2";
  EXPECT_EQ(attempt(*g, 0), kB);
  at(now_ + 1000);
  EXPECT_EQ(attempt(*g, kPeerFailed), kA);
  EXPECT_FALSE(peer_available(a, now_));
  EXPECT_EQ(a.stats->failures.load(), 2u);
  // For fail_timeout every request goes to B.
  for (int i = 0; i < 6; ++i) EXPECT_EQ(attempt(*g, 0), kB);
  at(now_ + 9999);
  EXPECT_EQ(attempt(*g, 0), kB);
  // fail_timeout has passed: A gets one probe; while it runs, others skip A.
  at(now_ + 2);
  PeerRequest probe;
  PeerConnection pc;
  probe.init(*g, *loop_, 1);
  probe.attach(pc);
  std::string first;
  for (int i = 0; i < 4 && first != kA; ++i) {
    ASSERT_EQ(PeerRequest::get(pc, &probe), kPeerOk);
    first = pc.name;
    if (first != kA) {
      PeerRequest::free(pc, &probe, 0);
      probe.init(*g, *loop_, 1);
      probe.attach(pc);
    }
  }
  ASSERT_EQ(first, kA) << "A is used again after fail_timeout";
  for (int i = 0; i < 4; ++i) EXPECT_EQ(attempt(*g, 0), kB) << "only one probe at a time";
  // The probe succeeds: A is healthy again and failures are forgotten.
  PeerRequest::free(pc, &probe, 0);
  EXPECT_EQ(a.health->fails.load(), 0u);
  EXPECT_TRUE(peer_available(a, now_));
  int to_a = 0;
  for (int i = 0; i < 4; ++i) to_a += attempt(*g, 0) == kA;
  EXPECT_EQ(to_a, 2);
}

TEST_F(Health, AFailedProbeDisablesAgainForAnotherWindow) {
  Group* g = load_group("upstream u { server 127.0.0.1:1 fail_timeout=5s; server 127.0.0.1:2; }");
  ASSERT_NE(g, nullptr);
  ASSERT_EQ(attempt(*g, kPeerFailed), kA);
  EXPECT_FALSE(peer_available(g->peers[0], now_));
  at(now_ + 5001);
  // A request after the window probes A (round-robin brings its reduced
  // effective weight back up first, as nginx's), and it fails again.
  std::string s;
  for (int i = 0; i < 4 && s != kA; ++i) s = attempt_failing(*g, kA);
  ASSERT_EQ(s, kA);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(attempt(*g, 0), kB);
  at(now_ + 4000);
  EXPECT_FALSE(peer_available(g->peers[0], now_));
}

TEST_F(Health, FailuresCountOnlyWithinFailTimeout) {
  Group* g = load_group("upstream u { server 127.0.0.1:1 max_fails=2 fail_timeout=10s; }");
  ASSERT_NE(g, nullptr);
  ASSERT_EQ(attempt(*g, kPeerFailed), kA);
  // A success after the window ends forgets the old failure...
  at(now_ + 11000);
  ASSERT_EQ(attempt(*g, 0), kA);
  EXPECT_EQ(g->peers[0].health->fails.load(), 0u);
  // ...so one more failure does not reach max_fails=2.
  ASSERT_EQ(attempt(*g, kPeerFailed), kA);
  EXPECT_TRUE(peer_available(g->peers[0], now_));
}

TEST_F(Health, MaxFailsZeroNeverDisables) {
  Group* g = load_group(
      "upstream u { server 127.0.0.1:1 max_fails=0; server 127.0.0.1:2 down; }");
  ASSERT_NE(g, nullptr);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(attempt(*g, kPeerFailed), kA);
}

// As nginx (peers->single): with nothing to fall back to, the one server's
// failures are not held against it, so a bad response does not turn every
// request of the next fail_timeout into "no live upstreams".
TEST_F(Health, ASingleServerIsNeverTakenOut) {
  Group* g = load_group("upstream u { server 127.0.0.1:1 max_fails=1 fail_timeout=30s; }");
  ASSERT_NE(g, nullptr);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(attempt(*g, kPeerFailed), kA) << i;
  EXPECT_EQ(attempt(*g, 0), kA);
  EXPECT_TRUE(peer_available(g->peers[0], now_));
  EXPECT_EQ(g->peers[0].health->fails.load(), 0u);
  EXPECT_EQ(g->peers[0].stats->failures.load(), 3u) << "still counted for /metrics";
}

TEST_F(Health, ASingleServerMarkedDownIsNeverUsed) {
  Group* g = load_group("upstream u { server 127.0.0.1:1 down; }");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(attempt(*g, 0), "");
}

TEST_F(Health, AServerWithABackupIsNotSingle) {
  Group* g = load_group("upstream u { server 127.0.0.1:1; server 127.0.0.1:2 backup; }");
  ASSERT_NE(g, nullptr);
  ASSERT_EQ(attempt(*g, kPeerFailed), kA);
  EXPECT_FALSE(peer_available(g->peers[0], now_));
  EXPECT_EQ(attempt(*g, 0), kB);
}

TEST_F(Health, NextStateIsNeitherFailureNorSuccess) {
  // A second (down) server: a single one would not count failures at all.
  Group* g = load_group("upstream u { server 127.0.0.1:1 max_fails=2; server 127.0.0.1:2 down; }");
  ASSERT_NE(g, nullptr);
  ASSERT_EQ(attempt(*g, kPeerFailed), kA);
  at(now_ + 20000);
  ASSERT_EQ(attempt(*g, kPeerNext), kA);
  EXPECT_EQ(g->peers[0].health->fails.load(), 1u) << "kPeerNext does not reset failures";
  EXPECT_EQ(g->peers[0].stats->failures.load(), 1u);
}

// Two processes: the child's failures with `zone` disable the server for the
// parent; without a zone each process keeps its own.
void fail_in_child(Group& g, EventLoop& loop) {
  pid_t pid = ::fork();
  ASSERT_NE(pid, -1);
  if (pid == 0) {
    for (int i = 0; i < 2; ++i) {
      PeerRequest pr;
      PeerConnection pc;
      pr.init(g, loop, 1);
      pr.attach(pc);
      if (PeerRequest::get(pc, &pr) != kPeerOk || pc.name != kA) ::_exit(2);
      PeerRequest::free(pc, &pr, kPeerFailed);
    }
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
}

TEST_F(Health, WithZoneOneProcessSeesAnothersFailures) {
  Group* g = load_group(
      "upstream u { zone u 64k; server 127.0.0.1:1 max_fails=2; server 127.0.0.1:2 down; }");
  ASSERT_NE(g, nullptr);
  fail_in_child(*g, *loop_);
  EXPECT_EQ(g->peers[0].health->fails.load(), 2u);
  EXPECT_FALSE(peer_available(g->peers[0], now_));
  EXPECT_EQ(attempt(*g, 0), "") << "the child disabled the only live server for everyone";
  EXPECT_EQ(g->peers[0].stats->failures.load(), 2u) << "counters are summed across processes";
}

TEST_F(Health, WithoutZoneEachProcessKeepsItsOwnHealth) {
  Group* g = load_group("upstream u { server 127.0.0.1:1 max_fails=2; server 127.0.0.1:2 down; }");
  ASSERT_NE(g, nullptr);
  fail_in_child(*g, *loop_);
  EXPECT_EQ(g->peers[0].health->fails.load(), 0u);
  EXPECT_EQ(attempt(*g, 0), kA);
  EXPECT_EQ(g->peers[0].stats->failures.load(), 2u) << "counters are shared even without a zone";
}

}  // namespace
}  // namespace vigil::upstream
