// The per-worker figures are defined once (vigil/event/stats.h): LoopStats,
// WorkerSlot, the publisher and /metrics all come from the lists, so every
// figure the loop counts reaches the slot, under a valid, unique metric name
// (with every layer's totals: tests/unit/server/modules_test.cc).
#include <gtest/gtest.h>

#include <string>

#include "vigil/core/counters.h"
#include "vigil/core/log.h"
#include "vigil/event/loop.h"
#include "vigil/event/stats.h"

namespace vigil {
namespace {

TEST(Stats, PublishCopiesEveryLoopAndPoolFigure) {
  EventLoopConfig cfg;
  cfg.connections = 37;
  auto created = EventLoop::create(cfg, Log::global());
  ASSERT_TRUE(created) << created.status().to_string();
  EventLoop& loop = *created.value();
  std::uint64_t v = 1000;
#define SET_FIGURE(member, ...) loop.stats().member = ++v;
  VIGIL_WORKER_STATS(SET_FIGURE, VIGIL_STATS_SKIP, VIGIL_STATS_SKIP)
#undef SET_FIGURE
  Connection* c = loop.pool().get(-1, Log::global());
  ASSERT_NE(c, nullptr);

  WorkerSlot slot;
  loop.publish(slot);
  v = 1000;
  int figures = 0;
#define CHECK_FIGURE(member, ...) \
  EXPECT_EQ(slot.member.load(), ++v) << #member; \
  ++figures;
  VIGIL_WORKER_STATS(CHECK_FIGURE, VIGIL_STATS_SKIP, VIGIL_STATS_SKIP)
#undef CHECK_FIGURE
  EXPECT_GE(figures, 7);
  EXPECT_EQ(slot.connections_used.load(), 1u);
  EXPECT_EQ(slot.connections_max.load(), 37u);
  EXPECT_EQ(slot.pid.load(), 0) << "the pid is the caller's to set";
  loop.pool().free(*c);
}

}  // namespace
}  // namespace vigil
