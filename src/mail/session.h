#pragma once
// The mail proxy session: the listener's handler for mail servers
// (Listening::servers is the MailPort). Its counters are the shared totals
// vigil_mail_* of /metrics (mail/counters.h).

#include <cstdint>

#include "vigil/event/connection.h"
#include "vigil/event/loop.h"

namespace vigil::mail {

void init_connection(Connection& c);

// Frees the per-worker state (mail_limit_conn's table).
void exit_worker(EventLoop& loop);

}  // namespace vigil::mail
