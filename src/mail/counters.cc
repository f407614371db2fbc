#include "mail/counters.h"

namespace vigil::mail {

namespace {

#define VIGIL_FIGURE(member, metric, type, help) \
  {metric, type, help, offsetof(MailCounters, member)},
constexpr CounterFigure kFigures[] = {VIGIL_MAIL_TOTALS(VIGIL_FIGURE)};
#undef VIGIL_FIGURE

constinit CounterBlockOf<MailCounters> g_block{kFigures};

}  // namespace

MailCounters* mail_counters() {
  return g_block.get();
}
CounterBlock& mail_counter_block() {
  return g_block;
}

}  // namespace vigil::mail
