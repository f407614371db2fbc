#pragma once
// A stream balancer's "connected" notice (nginx's
// ngx_stream_upstream_notify_round_robin_peer, NGX_STREAM_UPSTREAM_NOTIFY_CONNECT):
// a failed server counts as recovered once a connection to it is established,
// not when that session ends (stream sessions can be long), so new
// connections go to it again at once.

#include "upstream/upstream.h"

namespace vigil::upstream {

// The connection of `pr`'s current attempt is established (and its TLS
// handshake done): a probe after the fail_timeout window clears the
// server's failures.
void peer_connected(const PeerRequest& pr);

}  // namespace vigil::upstream
