#pragma once
// The core's figures for /metrics and stub_status, defined once: the client
// connections the event layer's accept counts. Every other figure is listed
// by the layer that counts it, in the same form: the event loop's and the
// io_uring backend's per worker (vigil/event/stats.h), TLS's
// (src/event/tls/counters.h), HTTP's (src/http/core/counters.h), mail's
// (src/mail/counters.h). A layer's totals are a CounterBlock
// (vigil/core/counters.h), so core never names them; the server lists the
// blocks in /metrics order. A new figure is one line in its layer's list
// (plus the code that counts it).
//
// Each list takes macros that the user defines for the occasion (and
// VIGIL_STATS_SKIP for kinds it has no use for), one entry per figure, in
// /metrics order.

// The connection totals every worker adds to (the first of nginx's
// stub_status figures):
//   TOTAL(member, metric, type, help)
#define VIGIL_SHARED_TOTALS(TOTAL)                                                               \
  TOTAL(active, "vigil_connections_active", "gauge", "Client connections open now.")             \
  TOTAL(accepted, "vigil_connections_accepted_total", "counter", "Client connections accepted.") \
  TOTAL(handled, "vigil_connections_handled_total", "counter",                                   \
        "Accepted connections that got a connection slot.")

#define VIGIL_STATS_SKIP(...)
