#include "vigil/core/counters.h"

namespace vigil {

namespace {

#define VIGIL_FIGURE(member, metric, type, help) \
  {metric, type, help, offsetof(SharedCounters, member)},
constexpr CounterFigure kFigures[] = {VIGIL_SHARED_TOTALS(VIGIL_FIGURE)};
#undef VIGIL_FIGURE

constinit CounterBlockOf<SharedCounters> g_block{kFigures};
std::span<CounterBlock* const> g_blocks;

}  // namespace

std::span<CounterBlock* const> counter_blocks() {
  return g_blocks;
}
void set_counter_blocks(std::span<CounterBlock* const> blocks) {
  g_blocks = blocks;
}

SharedCounters* shared_counters() {
  return g_block.get();
}
CounterBlock& shared_counter_block() {
  return g_block;
}

}  // namespace vigil
