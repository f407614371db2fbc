#include "event/tls/counters.h"

namespace vigil {

namespace {

#define VIGIL_FIGURE(member, metric, type, help) \
  {metric, type, help, offsetof(TlsCounters, member)},
constexpr CounterFigure kFigures[] = {VIGIL_TLS_TOTALS(VIGIL_FIGURE)};
#undef VIGIL_FIGURE

constinit CounterBlockOf<TlsCounters> g_block{kFigures};

}  // namespace

TlsCounters* tls_counters() {
  return g_block.get();
}
CounterBlock& tls_counter_block() {
  return g_block;
}

}  // namespace vigil
