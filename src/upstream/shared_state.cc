// Where a group's per-server state lives.
//
//   health (fails, last failure, last probe, connections): in the `zone` when
//     the group has one, a MAP_SHARED mapping made while the configuration is
//     loaded, before fork(), so every worker reads and updates one copy;
//     without `zone`, in the process's own heap, which fork() copies: each
//     worker then keeps its own, as nginx does without a zone.
//   counters (requests, failures, active, keepalive hits): always in a small
//     shared mapping of the group's own, so /metrics can sum over workers
//     without a zone (the implicit zone the issue asks us to choose: one page
//     per group, no configuration needed, nothing to size).
//
// The zone is a mapping of its own per name (GroupSet::Zone). When the named
// shared zones of src/core/shm_zone.h exist, Zone::mem becomes a slab
// allocation in the named zone and nothing else here changes.
#include <new>

#include "upstream/group.h"

namespace vigil::upstream {

namespace {
constexpr std::size_t kZoneHeader = 64;  // room kept for the zone's own bookkeeping
}  // namespace

std::size_t zone_bytes_for(std::size_t peers) {
  return peers * sizeof(PeerHealth);
}

Status place_state(Group& group, GroupSet::Zone* zone) {
  const std::size_t n = group.peers.size();
  auto stats = SharedMemory::map(n * sizeof(PeerStats) == 0 ? sizeof(PeerStats) : n * sizeof(PeerStats));
  if (!stats) return Status::error("could not map the counters of upstream \"" + group.name + "\"", stats.status().err());
  group.stats_mem = std::move(stats).value();
  auto* st = static_cast<PeerStats*>(group.stats_mem.addr());
  for (std::size_t i = 0; i < n; ++i) group.peers[i].stats = new (&st[i]) PeerStats();

  if (zone == nullptr) {
    group.local_health = std::make_unique<PeerHealth[]>(n);
    for (std::size_t i = 0; i < n; ++i) group.peers[i].health = &group.local_health[i];
    return Status::ok();
  }
  if (zone->mem.addr() == nullptr) {
    auto mem = SharedMemory::map(zone->size);
    if (!mem) return Status::error("could not map zone \"" + zone->name + "\"", mem.status().err());
    zone->mem = std::move(mem).value();
    zone->used = kZoneHeader;
  }
  std::size_t need = zone_bytes_for(n);
  std::size_t at = (zone->used + alignof(PeerHealth) - 1) / alignof(PeerHealth) * alignof(PeerHealth);
  if (at + need > zone->size) {
    return Status::error("zone \"" + zone->name + "\" is too small for upstream \"" + group.name +
                         "\"" + zone->where);
  }
  auto* h = reinterpret_cast<PeerHealth*>(static_cast<char*>(zone->mem.addr()) + at);
  for (std::size_t i = 0; i < n; ++i) group.peers[i].health = new (&h[i]) PeerHealth();
  zone->used = at + need;
  return Status::ok();
}

}  // namespace vigil::upstream
