#pragma once
// HTTP's hooks for the process runtime (server/modules.h): the listening
// sockets of the configuration and the per-worker set-up and tear-down.

#include <memory>
#include <vector>

#include "core/conf/loader.h"
#include "vigil/core/result.h"
#include "vigil/event/listening.h"
#include "vigil/event/loop.h"

namespace vigil::http {

Status create_listeners(const Configuration& conf, std::vector<std::unique_ptr<Listening>>& out);
Status init_worker(const Configuration& conf, EventLoop& loop, int worker_index);
void exit_worker(EventLoop& loop);
void reopen_logs(EventLoop& loop);
// Graceful stop began: every HTTP/2 connection says GOAWAY and ends once
// its streams are done (an idle one at once).
void begin_shutdown(EventLoop& loop);

}  // namespace vigil::http
