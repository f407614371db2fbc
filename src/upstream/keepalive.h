#pragma once
// Internal: the per-worker cache of idle upstream connections (nginx's
// ngx_http_upstream_keepalive_module), kept in the event loop's context.

#include "upstream/upstream.h"
#include "vigil/event/connection.h"

namespace vigil::upstream {

// A cached connection to `peer` of `group` cached under `key` (see
// PeerRequest::set_reuse_key), taken out of the cache (ready to send on), or
// null; `born` is when it was connected (keepalive_time).
Connection* keepalive_take(EventLoop& loop, Group& group, const Peer& peer, const void* key,
                           Msec& born);
// Keeps `c` (idle, nothing unread), connected at `born`, for a later request
// to `peer` with the same `key`. False when it cannot be kept (the caller
// closes it).
bool keepalive_put(EventLoop& loop, Group& group, Peer& peer, Connection& c, const void* key,
                   Msec born);

}  // namespace vigil::upstream
