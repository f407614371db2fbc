#pragma once
// The mail proxy session: the listener's handler for mail servers
// (Listening::servers is the MailPort), and the worker's counters.

#include <cstdint>

#include "vigil/event/connection.h"
#include "vigil/event/loop.h"

namespace vigil::mail {

void init_connection(Connection& c);

// This worker's counters, for /metrics.
struct MailCounters {
  std::uint64_t sessions = 0;
  std::uint64_t auth_ok = 0;
  std::uint64_t auth_failed = 0;
  std::uint64_t relayed = 0;
  std::uint64_t limited = 0;
};
MailCounters mail_counters();

// Frees the per-worker state (mail_limit_conn's table).
void exit_worker(EventLoop& loop);

}  // namespace vigil::mail
