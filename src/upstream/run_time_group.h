#pragma once
// A group made for one request or session from addresses known only at run
// time (an address in proxy_pass with variables, or what the resolver gave
// for a name), as nginx's ngx_*_upstream_create_round_robin_peer: round
// robin over them, each tried once; no health is kept past its owner.

#include <sys/socket.h>

#include <cstddef>
#include <memory>
#include <string_view>

#include "upstream/upstream.h"

namespace vigil::upstream {

// Makes `group` the implicit group of the `n` addresses (named `server`, as
// written), with their health and counters in `health` and `stats`. False
// without memory.
bool fill_run_time_group(Group& group, std::unique_ptr<PeerHealth[]>& health,
                         std::unique_ptr<PeerStats[]>& stats, const sockaddr_storage* addrs,
                         const socklen_t* lens, std::size_t n, std::string_view server);

}  // namespace vigil::upstream
