#pragma once
// Internal: the mail proxy's totals every worker adds to, a block of the mail
// layer's own (vigil/core/counters.h): the server places it in the master's
// shared zone and /metrics shows it where the server lists it.

#include "vigil/core/counters.h"

//   TOTAL(member, metric, type, help), as VIGIL_SHARED_TOTALS (vigil/core/stats.h)
#define VIGIL_MAIL_TOTALS(TOTAL)                                                          \
  TOTAL(sessions, "vigil_mail_sessions_total", "counter", "Mail proxy sessions started.") \
  TOTAL(auth_ok, "vigil_mail_auth_ok_total", "counter",                                   \
        "Mail logins the auth_http server accepted.")                                     \
  TOTAL(auth_failed, "vigil_mail_auth_failed_total", "counter",                           \
        "Mail logins the auth_http server refused.")                                      \
  TOTAL(relayed, "vigil_mail_relayed_total", "counter",                                   \
        "Mail sessions logged in to their backend and relayed.")                          \
  TOTAL(limited, "vigil_mail_limited_total", "counter",                                   \
        "Mail connections refused by mail_limit_conn.")

namespace vigil::mail {

struct MailCounters {
#define VIGIL_MAIL_FIELD(member, ...) SharedCounter member;
  VIGIL_MAIL_TOTALS(VIGIL_MAIL_FIELD)
#undef VIGIL_MAIL_FIELD
};

// The mail totals this process adds to; never null.
MailCounters* mail_counters();
// Their block, for the server's list.
CounterBlock& mail_counter_block();

}  // namespace vigil::mail
