// The leaky bucket of limit_req (limit_req.cc), the shared table of the limit
// zones (limit_zone.cc: key collisions, LRU, expiry, eviction when the slab
// is full) and limit_conn's counting, on a real mapped zone.
#include "http/access/limit_req.h"

#include <gtest/gtest.h>

#include <string>

#include "core/shm_zone.h"
#include "http/access/limit_conn.h"
#include "http/access/limit_zone.h"

namespace vigil::http {
namespace {

const int kTag = 0;

// A mapped zone with a fresh LimitShared in it.
struct TestZone {
  explicit TestZone(std::size_t size) {
    auto z = zones.add("t", size, &kTag, " in test");
    EXPECT_TRUE(static_cast<bool>(z));
    zone = *z;
    zone->set_init([](ShmZone& zn, void*) { return LimitTable::init_zone(zn); });
    Status s = zones.map(nullptr);
    EXPECT_TRUE(static_cast<bool>(s)) << s.message();
    table = LimitTable(*zone);
  }
  SharedZones zones;
  ShmZone* zone = nullptr;
  LimitTable table;
};

TEST(LimitReqBucket, ExcessGrowsByOneRequestAndLeaksAtTheRate) {
  EXPECT_EQ(limit_req_excess(0, 0, 1000), 1000);  // 1r/s, same ms
  EXPECT_EQ(limit_req_excess(1000, 0, 1000), 2000);
  EXPECT_EQ(limit_req_excess(2000, 500, 1000), 2500);  // half a request leaked
  EXPECT_EQ(limit_req_excess(3000, 500, 2000), 3000);  // 2r/s leaks one in 500 ms
  // Drained: floors at 0 after the +1, as nginx (a request after a long idle
  // time counts as a first one).
  EXPECT_EQ(limit_req_excess(1000, 10000, 1000), 0);
  EXPECT_EQ(limit_req_excess(0, 1, 10000), 990);  // 10r/s: 10/1000 per ms
  EXPECT_EQ(limit_req_excess(5000, 1000, 1000 * 60 / 60), 5000);
  // 1r/m is 1000/60 = 16 per 1000 s: a second leaks 16/1000 of a request.
  EXPECT_EQ(limit_req_excess(1000, 1000, 16), 1984);
  // A clock that stepped back: no leak; far back, as 1 ms.
  EXPECT_EQ(limit_req_excess(2000, -5, 1000), 3000);
  EXPECT_EQ(limit_req_excess(2000, -70000, 1000), 2999);
}

TEST(LimitReqBucket, BurstRejectsWithoutAccounting) {
  TestZone z(SharedZones::kMinSize);
  const std::string key = "\x7f\0\0\x01";
  const auto h = limit_key_hash(key);
  std::int64_t excess = -1;
  SlabLock lock(z.zone->pool());
  // rate 1r/s, burst 2.
  EXPECT_EQ(limit_req_lookup(z.table, h, key, 1000, 2000, 100, &excess), LimitReqOutcome::kOk);
  EXPECT_EQ(excess, 0);
  EXPECT_EQ(limit_req_lookup(z.table, h, key, 1000, 2000, 100, &excess), LimitReqOutcome::kOk);
  EXPECT_EQ(excess, 1000);
  EXPECT_EQ(limit_req_lookup(z.table, h, key, 1000, 2000, 100, &excess), LimitReqOutcome::kOk);
  EXPECT_EQ(excess, 2000);
  EXPECT_EQ(limit_req_lookup(z.table, h, key, 1000, 2000, 100, &excess), LimitReqOutcome::kBusy);
  EXPECT_EQ(excess, 3000);
  // The rejected one was not accounted: 250 ms later 2000 - 250 + 1000.
  EXPECT_EQ(limit_req_lookup(z.table, h, key, 1000, 2000, 350, &excess), LimitReqOutcome::kBusy);
  EXPECT_EQ(excess, 2750);
  EXPECT_EQ(limit_req_lookup(z.table, h, key, 1000, 2000, 1100, &excess), LimitReqOutcome::kOk);
  EXPECT_EQ(excess, 2000);
  // Another key has its own bucket.
  EXPECT_EQ(limit_req_lookup(z.table, limit_key_hash("other"), "other", 1000, 0, 1100, &excess),
            LimitReqOutcome::kOk);
  EXPECT_EQ(z.table.size(), 2u);
}

TEST(LimitZone, EqualHashesAreToldApartByTheKeyBytes) {
  TestZone z(SharedZones::kMinSize);
  SlabLock lock(z.zone->pool());
  LimitNode* a = z.table.insert(42, "alpha");
  LimitNode* b = z.table.insert(42, "beta");
  LimitNode* c = z.table.insert(42, "al");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(z.table.find(42, "alpha"), a);
  EXPECT_EQ(z.table.find(42, "beta"), b);
  EXPECT_EQ(z.table.find(42, "al"), c);
  EXPECT_EQ(z.table.find(42, "gamma"), nullptr);
  EXPECT_EQ(z.table.find(43, "alpha"), nullptr);
  EXPECT_GE(z.table.shared().tree.check(), 0);
  z.table.remove(b);
  EXPECT_EQ(z.table.find(42, "beta"), nullptr);
  EXPECT_EQ(z.table.find(42, "alpha"), a);
  EXPECT_EQ(z.table.size(), 2u);
}

TEST(LimitZone, IdleDrainedEntriesExpireBusyOnesStay) {
  TestZone z(SharedZones::kMinSize);
  SlabLock lock(z.zone->pool());
  std::int64_t excess = 0;
  // "old" at t=0 with a full bucket of 5 (rate 1r/m = 16), "new" at 50 s.
  for (int i = 0; i < 6; ++i) limit_req_lookup(z.table, 1, "old", 16, 10000, 0, &excess);
  limit_req_lookup(z.table, 2, "new", 16, 10000, 50000, &excess);
  // 70 s: "old" idle long enough but 5 - 70*0.016 > 0 requests remain: kept.
  limit_req_expire(z.table, 16, 70000, false);
  EXPECT_NE(z.table.find(1, "old"), nullptr);
  // 400 s: drained (5000 - 16 * 400 < 0) and idle: expired; "new" too (idle 350 s, 1 request).
  limit_req_expire(z.table, 16, 400000, false);
  EXPECT_EQ(z.table.find(1, "old"), nullptr);
  EXPECT_EQ(z.table.find(2, "new"), nullptr);
  EXPECT_EQ(z.table.size(), 0u);
}

TEST(LimitZone, AFullZoneEvictsTheLeastRecentlyUsed) {
  TestZone z(SharedZones::kMinSize);
  SlabLock lock(z.zone->pool());
  std::int64_t excess = 0;
  // Far more distinct keys than 32 KiB holds: none is refused, the table
  // stays bounded and the first keys were the ones evicted.
  const int kKeys = 5000;
  for (int i = 0; i < kKeys; ++i) {
    const std::string key = "client-" + std::to_string(i);
    ASSERT_EQ(limit_req_lookup(z.table, limit_key_hash(key), key, 1000, 0, 1000, &excess),
              LimitReqOutcome::kOk)
        << i;
    if (i == 10) {
      // Keep key 0 recent: it must survive the evictions that follow for a while.
      ASSERT_EQ(limit_req_lookup(z.table, limit_key_hash("client-0"), "client-0", 1000, 5000, 1000,
                                 &excess),
                LimitReqOutcome::kOk);
    }
  }
  const std::size_t n = z.table.size();
  EXPECT_LT(n, static_cast<std::size_t>(kKeys));
  EXPECT_GT(z.table.shared().evicted, 0u);
  EXPECT_EQ(z.table.shared().evicted + n, static_cast<std::size_t>(kKeys));
  EXPECT_EQ(z.table.find(limit_key_hash("client-1"), "client-1"), nullptr);
  const std::string last = "client-" + std::to_string(kKeys - 1);
  EXPECT_NE(z.table.find(limit_key_hash(last), last), nullptr);
  EXPECT_EQ(z.zone->pool().verify_locked(), "");
  EXPECT_EQ(z.table.shared().tree.check(), static_cast<long>(n));
}

TEST(LimitConnCount, CountsUpToTheLimitAndFreesAtZero) {
  TestZone z(SharedZones::kMinSize);
  SlabLock lock(z.zone->pool());
  LimitNode* a = nullptr;
  LimitNode* b = nullptr;
  LimitNode* c = nullptr;
  const auto h = limit_key_hash("k");
  EXPECT_TRUE(limit_conn_acquire(z.table, h, "k", 2, &a));
  EXPECT_TRUE(limit_conn_acquire(z.table, h, "k", 2, &b));
  EXPECT_EQ(a, b);
  EXPECT_EQ(a->count, 2u);
  EXPECT_FALSE(limit_conn_acquire(z.table, h, "k", 2, &c));
  EXPECT_EQ(a->count, 2u);
  limit_conn_release(z.table, a);
  EXPECT_TRUE(limit_conn_acquire(z.table, h, "k", 2, &c));
  limit_conn_release(z.table, a);
  limit_conn_release(z.table, a);
  EXPECT_EQ(z.table.find(h, "k"), nullptr);
  EXPECT_EQ(z.table.size(), 0u);
}

}  // namespace
}  // namespace vigil::http
