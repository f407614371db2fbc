// The connection pool: free list, generation counter, exhaustion, reusable drain.
#include "vigil/event/pool.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.h"
#include "vigil/core/log.h"
#include "vigil/event/loop.h"

namespace vigil {
namespace {

std::size_t count(const std::string& hay, const std::string& needle) {
  std::size_t n = 0;
  for (auto p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) ++n;
  return n;
}

class PoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    log_path_ = ::testing::TempDir() + "pool_test_" + std::to_string(::getpid()) + ".log";
    ::unlink(log_path_.c_str());
    ASSERT_TRUE(log_.open(log_path_, LogLevel::kInfo));
  }
  void TearDown() override { ::unlink(log_path_.c_str()); }
  std::unique_ptr<EventLoop> make(std::size_t n) {
    EventLoopConfig cfg;
    cfg.connections = n;
    auto r = EventLoop::create(cfg, log_);
    EXPECT_TRUE(r) << r.status().to_string();
    return std::move(r).value();
  }
  std::string log_path_;
  Log log_;
};

TEST_F(PoolTest, GetBumpsTheGenerationAndFreeReturnsTheSlot) {
  auto loop = make(4);
  ConnectionPool& pool = loop->pool();
  EXPECT_EQ(pool.size(), 4u);
  EXPECT_EQ(pool.free_count(), 4u);
  Connection* c = pool.get(-1, log_);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(pool.free_count(), 3u);
  const std::uint32_t gen = c->generation;
  EXPECT_EQ(c->read->data, c);
  EXPECT_TRUE(c->write->write);
  EXPECT_FALSE(c->read->write);
  EXPECT_EQ(c->loop, loop.get());
  pool.free(*c);
  EXPECT_EQ(pool.free_count(), 4u);
  // LIFO free list: the same slot comes back, one generation on; and on
  // again, where a one-bit instance would be back to its first value.
  Connection* again = pool.get(-1, log_);
  EXPECT_EQ(again, c);
  EXPECT_EQ(again->generation, gen + 1);
  EXPECT_GT(again->number, 0u);
  pool.free(*again);
  Connection* third = pool.get(-1, log_);
  EXPECT_EQ(third, c);
  EXPECT_EQ(third->generation, gen + 2);
  pool.free(*third);
}

TEST_F(PoolTest, ExhaustionRefusesCleanlyAndLogsOncePerSecond) {
  auto loop = make(8);
  ConnectionPool& pool = loop->pool();
  std::vector<Connection*> held;
  for (int i = 0; i < 8; ++i) {
    Connection* c = pool.get(-1, log_);
    ASSERT_NE(c, nullptr);
    held.push_back(c);
  }
  EXPECT_EQ(pool.free_count(), 0u);
  clock::time_update_fixed(1'800'000'000, 0, 1000);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(pool.get(-1, log_), nullptr);
  EXPECT_EQ(count(test::read_file(log_path_), "8 worker_connections are not enough"), 1u);
  clock::time_update_fixed(1'800'000'001, 0, 2000);  // one second later
  EXPECT_EQ(pool.get(-1, log_), nullptr);
  EXPECT_EQ(count(test::read_file(log_path_), "8 worker_connections are not enough"), 2u);
  for (Connection* c : held) pool.free(*c);
  EXPECT_EQ(pool.free_count(), 8u);
  clock::time_update();
}

int g_drained = 0;
void close_on_drain(Event& ev) {
  auto& c = *ev.owner<Connection>();
  if (c.close) {
    ++g_drained;
    c.loop->pool().close_connection(c);
  }
}

TEST_F(PoolTest, ReusableConnectionsAreDrainedOldestFirstWhenRunningShort) {
  auto loop = make(32);  // n/16 = 2
  ConnectionPool& pool = loop->pool();
  std::vector<Connection*> idle;
  for (int i = 0; i < 30; ++i) {
    int fd = ::dup(2);  // a real fd, so close_connection has something to close
    ASSERT_GE(fd, 0);
    Connection* c = pool.get(fd, log_);
    ASSERT_NE(c, nullptr);
    c->read->handler = close_on_drain;
    pool.reusable(*c, true);
    idle.push_back(c);
  }
  EXPECT_EQ(pool.reusable_count(), 30u);
  EXPECT_EQ(pool.free_count(), 2u);
  g_drained = 0;
  clock::time_update_fixed(1'800'000'100, 0, 5000);
  Connection* fresh = pool.get(-1, log_);
  ASSERT_NE(fresh, nullptr);
  EXPECT_GE(g_drained, 1);
  // The oldest idle connection went first.
  EXPECT_EQ(idle[0]->fd, -1);
  EXPECT_EQ(count(test::read_file(log_path_),
                  "32 worker_connections are not enough, reusing connections"),
            1u);
  // Marking a connection busy takes it off the reusable list.
  std::size_t before = pool.reusable_count();
  pool.reusable(*idle[29], false);
  EXPECT_EQ(pool.reusable_count(), before - 1);
  for (Connection* c : idle) {
    if (c->fd != -1 && c != fresh) pool.close_connection(*c);
  }
  pool.free(*fresh);
  EXPECT_EQ(pool.free_count(), 32u);
  clock::time_update();
}

TEST_F(PoolTest, CloseConnectionReleasesTimersPostedEventsAndTheArena) {
  auto loop = make(4);
  ConnectionPool& pool = loop->pool();
  int fd = ::dup(2);
  Connection* c = pool.get(fd, log_);
  ASSERT_NE(c, nullptr);
  c->read->handler = close_on_drain;
  loop->add_timer(*c->read, 1000);
  loop->post(*c->write);
  void* p = c->arena->alloc(100);
  ASSERT_NE(p, nullptr);
  pool.close_connection(*c);
  EXPECT_EQ(c->fd, -1);
  EXPECT_FALSE(c->read->timer_set);
  EXPECT_TRUE(loop->timers().empty());
  EXPECT_FALSE(c->write->posted);
  EXPECT_TRUE(loop->posted().empty());
  EXPECT_EQ(pool.free_count(), 4u);
  EXPECT_EQ(::fcntl(fd, F_GETFD), -1) << "the fd must be closed";
}

}  // namespace
}  // namespace vigil
