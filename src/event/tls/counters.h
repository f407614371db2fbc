#pragma once
// Internal: the TLS totals every worker adds to, a block of the TLS layer's
// own (vigil/core/counters.h): the server places it in the master's shared
// zone and /metrics shows it where the server lists it.

#include "vigil/core/counters.h"

//   TOTAL(member, metric, type, help), as VIGIL_SHARED_TOTALS (vigil/core/stats.h)
#define VIGIL_TLS_TOTALS(TOTAL)                                                           \
  TOTAL(handshakes, "vigil_tls_handshakes_total", "counter", "TLS handshakes completed.") \
  TOTAL(handshakes_failed, "vigil_tls_handshakes_failed_total", "counter",                \
        "TLS handshakes that failed (alert, garbage, timeout, reset).")                   \
  TOTAL(sessions_reused, "vigil_tls_sessions_reused_total", "counter",                    \
        "TLS handshakes that resumed a session.")

namespace vigil {

struct TlsCounters {
#define VIGIL_TLS_FIELD(member, ...) SharedCounter member;
  VIGIL_TLS_TOTALS(VIGIL_TLS_FIELD)
#undef VIGIL_TLS_FIELD
};

// The TLS totals this process adds to; never null.
TlsCounters* tls_counters();
// Their block, for the server's list.
CounterBlock& tls_counter_block();

}  // namespace vigil
