// A counter block (vigil/core/counters.h): a layer's totals, counted in a
// process-local instance until placed in shared memory, and shown by
// /metrics through its figures without the reader knowing its type.
#include "vigil/core/counters.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <new>
#include <string_view>

namespace vigil {
namespace {

struct TwoCounters {
  SharedCounter first;
  SharedCounter second;
};

constexpr CounterFigure kFigures[] = {
    {"test_first_total", "counter", "The first.", offsetof(TwoCounters, first)},
    {"test_second", "gauge", "The second.", offsetof(TwoCounters, second)},
};

TEST(CounterBlock, FiguresReadWhereTheBlockCounts) {
  static constinit CounterBlockOf<TwoCounters> block{kFigures};
  CounterBlock& seen = block;  // as the master and /metrics see it
  EXPECT_EQ(seen.size(), 2 * kCacheLine) << "each counter on its own line";
  ASSERT_EQ(seen.figures().size(), 2u);

  block.get()->first.add(3);
  block.get()->second.add(-1);
  EXPECT_EQ(seen.value(seen.figures()[0]), 3u);
  EXPECT_EQ(seen.value(seen.figures()[1]), static_cast<std::uint64_t>(-1));

  // Placed: fresh counters there, and every add goes there.
  auto* shared =
      static_cast<unsigned char*>(::operator new (seen.size(), std::align_val_t{kCacheLine}));
  std::fill(shared, shared + seen.size(), 0xff);  // whatever was there before
  TwoCounters* local = block.get();
  seen.place(shared);
  EXPECT_EQ(static_cast<void*>(block.get()), shared);
  EXPECT_EQ(seen.value(seen.figures()[0]), 0u);
  block.get()->first.add(5);
  block.get()->second.add(2);
  EXPECT_EQ(seen.value(seen.figures()[0]), 5u);
  EXPECT_EQ(seen.value(seen.figures()[1]), 2u);
  EXPECT_EQ(local->first.get(), 3u) << "the process-local block is left alone";

  // Back to the process-local counters, as they were.
  seen.place(nullptr);
  EXPECT_EQ(block.get(), local);
  EXPECT_EQ(seen.value(seen.figures()[0]), 3u);
  ::operator delete (shared, std::align_val_t{kCacheLine});
}

TEST(CounterBlock, TheServerSetsTheList) {
  static constinit CounterBlockOf<TwoCounters> block{kFigures};
  const std::span<CounterBlock* const> before = counter_blocks();
  CounterBlock* const list[] = {&shared_counter_block(), &block};
  set_counter_blocks(list);
  ASSERT_EQ(counter_blocks().size(), 2u);
  EXPECT_EQ(counter_blocks()[1], &block);
  // The connection totals are core's block: what shared_counters() adds to.
  CounterBlock& connections = *counter_blocks()[0];
  const std::uint64_t accepted = shared_counters()->accepted.get();
  shared_counters()->accepted.add();
  bool found = false;
  for (const CounterFigure& f : connections.figures()) {
    if (std::string_view(f.metric) != "vigil_connections_accepted_total") continue;
    found = true;
    EXPECT_EQ(connections.value(f), accepted + 1);
  }
  EXPECT_TRUE(found);
  set_counter_blocks(before);
}

}  // namespace
}  // namespace vigil
