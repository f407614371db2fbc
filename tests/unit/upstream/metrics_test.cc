// /metrics lines for upstream servers: every family, labels, values that
// follow the counters, "up" following health.
#include <string>

#include "unit/upstream/upstream_test_util.h"
#include "vigil/core/log.h"
#include "vigil/event/loop.h"

namespace vigil::upstream {
namespace {

class Metrics : public testing::UpstreamConfTest {
 protected:
  std::string text() {
    std::string out(metrics_bytes_max(*conf_), '\0');
    out.resize(append_metrics(*conf_, out.data(), out.size()));
    return out;
  }
};

TEST_F(Metrics, EveryServerEveryFamily) {
  GroupSet* set = load_set(
      "upstream app { server 127.0.0.1:1; server 127.0.0.1:2 backup; server 127.0.0.1:3 down; }");
  ASSERT_NE(set, nullptr) << error_;
  ASSERT_TRUE(set->find_or_add("127.0.0.1:9", 80, " in x:1"));
  Group& g = *set->find("app");
  g.peers[0].stats->requests = 7;
  g.peers[0].stats->failures = 2;
  g.peers[0].stats->active = 1;
  g.peers[0].stats->cache_hits = 4;
  std::string t = text();
  const std::string l1 = "{protocol=\"http\",upstream=\"app\",server=\"127.0.0.1:1\"}";
  EXPECT_NE(t.find("# TYPE vigil_upstream_requests_total counter\n"), std::string::npos) << t;
  EXPECT_NE(t.find("vigil_upstream_requests_total" + l1 + " 7\n"), std::string::npos) << t;
  EXPECT_NE(t.find("vigil_upstream_failures_total" + l1 + " 2\n"), std::string::npos) << t;
  EXPECT_NE(t.find("vigil_upstream_connections_active" + l1 + " 1\n"), std::string::npos) << t;
  EXPECT_NE(t.find("vigil_upstream_keepalive_hits_total" + l1 + " 4\n"), std::string::npos) << t;
  EXPECT_NE(t.find("vigil_upstream_up" + l1 + " 1\n"), std::string::npos) << t;
  EXPECT_NE(t.find("vigil_upstream_up{protocol=\"http\",upstream=\"app\",server=\"127.0.0.1:2\",backup=\"1\"} 1\n"),
            std::string::npos) << t;
  EXPECT_NE(t.find("vigil_upstream_up{protocol=\"http\",upstream=\"app\",server=\"127.0.0.1:3\"} 0\n"),
            std::string::npos) << t;
  EXPECT_NE(t.find("upstream=\"127.0.0.1:9\""), std::string::npos) << "implicit groups too";
  // 5 families x 4 servers, each line once.
  std::size_t lines = 0;
  for (std::size_t p = 0; (p = t.find("\nvigil_upstream_", p)) != std::string::npos; ++p) ++lines;
  EXPECT_EQ(lines, 20u);
}

TEST_F(Metrics, UpFollowsFailures) {
  GroupSet* set = load_set("upstream app { server 127.0.0.1:1; server 127.0.0.1:2; }");
  ASSERT_NE(set, nullptr) << error_;
  EventLoopConfig cfg;
  cfg.connections = 8;
  auto loop = EventLoop::create(cfg, Log::global());
  ASSERT_TRUE(loop);
  clock::time_update();
  Group& g = *set->find("app");
  PeerRequest pr;
  PeerConnection pc;
  pr.init(g, *loop.value(), 0);
  pr.attach(pc);
  ASSERT_EQ(PeerRequest::get(pc, &pr), kPeerOk);
  const std::string failed = pc.name;
  PeerRequest::free(pc, &pr, kPeerFailed);
  std::string t = text();
  EXPECT_NE(t.find("vigil_upstream_up{protocol=\"http\",upstream=\"app\",server=\"" + failed + "\"} 0\n"),
            std::string::npos) << t;
  EXPECT_NE(t.find("vigil_upstream_failures_total{protocol=\"http\",upstream=\"app\",server=\"" + failed + "\"} 1\n"),
            std::string::npos) << t;
}

TEST_F(Metrics, NothingWithoutGroupsAndNoOverflow) {
  GroupSet* set = load_set("");
  ASSERT_NE(set, nullptr) << error_;
  EXPECT_EQ(text(), "");
  ASSERT_NE(load_set("upstream app { server 127.0.0.1:1; }"), nullptr);
  char small[100];
  std::size_t n = append_metrics(*conf_, small, sizeof small);
  EXPECT_LT(n, sizeof small);
  EXPECT_TRUE(n == 0 || small[n - 1] == '\n') << "whole lines only";
}

}  // namespace
}  // namespace vigil::upstream
