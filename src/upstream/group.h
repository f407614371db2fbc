#pragma once
// Internal to the upstream layer: building groups from their configuration
// (address resolution, peers, the consistent-hash ring) and placing their
// health and counters in memory (shared_state.cc).

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/shm_zone.h"
#include "upstream/upstream.h"

namespace vigil::upstream {

// One `server` line as parsed.
struct ServerLine {
  std::string address;  // as written
  std::string where;    // " in F:L"
  int weight = 1;
  unsigned max_fails = 1;
  Msec fail_timeout = 10000;
  std::int64_t max_conns = 0;  // 0: no limit
  bool backup = false;
  bool down = false;
};

// "host:port", "[v6]:port", "host" (default_port; 0: a port is required) or
// "unix:/path", resolved now (getaddrinfo: every address of a name). The error
// text is nginx's, without the location.
Status resolve_address(std::string_view text, unsigned default_port, std::vector<Peer>& out);

// Fuzz targets turn name resolution into numeric-only parsing (no DNS query
// for random host names); the server never does.
void set_numeric_hosts_only(bool on);

// Appends the peers of `line` to `group` (primaries and backups are ordered by
// finish_peers).
Status add_server(Group& group, const ServerLine& line, unsigned default_port);
// Orders primaries before backups, numbers the peers, sets weights, builds the
// ring for consistent hash.
void finish_peers(Group& group);

// Health in the group's private memory and counters in a shared mapping of
// the group's own (shared_state.cc).
Status place_state(Group& group);
// A zone's init (core/shm_zone.h): moves the health of `groups` into the
// zone's slab pool, freeing what a previous generation allocated there.
Status place_zone_health(ShmZone& zone, void* old_data, const std::vector<Group*>& groups);

// CRC-32 (IEEE), as nginx's hash methods use.
std::uint32_t crc32(std::string_view data, std::uint32_t crc = 0);

// Process-wide list of live GroupSets (metrics find the ones of a configuration).
void register_set(GroupSet* set);
void unregister_set(GroupSet* set);
const std::vector<GroupSet*>& live_sets();

}  // namespace vigil::upstream
