// Where a group's per-server state lives.
//
//   health (fails, last failure, last probe, connections): with `zone`, in
//     the named shared zone (core/shm_zone.h), which the runtime maps before
//     it forks the workers, so every worker reads and updates one copy; the
//     zone's init (place_zone_health) allocates it from the zone's slab pool.
//     Without `zone` (and until the zone is mapped: `vigil -t`, unit tests
//     that never map), in the process's own heap, which fork() copies: each
//     worker then keeps its own, as nginx does without a zone.
//   counters (requests, failures, active, keepalive hits): always in a small
//     shared mapping of the group's own, so /metrics can sum over workers
//     without a zone (the implicit zone the issue asks us to choose: one page
//     per group, no configuration needed, nothing to size).
#include <new>
#include <type_traits>

#include "upstream/group.h"

namespace vigil::upstream {

namespace {

// What an upstream zone's data() points to: the health arrays allocated in
// it, so the next generation (reload) can free them before allocating its own.
struct ZoneDirectory {
  std::size_t count;
  void* blocks[1];  // `count` entries
};

}  // namespace

Status place_state(Group& group) {
  const std::size_t n = group.peers.size();
  const std::size_t bytes = (n == 0 ? 1 : n) * sizeof(PeerStats);
  auto stats = SharedMemory::map(bytes);
  if (!stats) {
    return Status::error("could not map the counters of upstream \"" + group.name + "\"",
                         stats.status().err());
  }
  group.stats_mem = std::move(stats).value();
  auto* st = static_cast<PeerStats*>(group.stats_mem.addr());
  // Shared memory is unmapped, never destroyed: the counters must own nothing.
  static_assert(std::is_trivially_destructible_v<PeerStats>);
  for (std::size_t i = 0; i < n; ++i) group.peers[i].stats = new (&st[i]) PeerStats();

  group.local_health = std::make_unique<PeerHealth[]>(n);
  for (std::size_t i = 0; i < n; ++i) group.peers[i].health = &group.local_health[i];
  return Status::ok();
}

Status place_zone_health(ShmZone& zone, void* old_data, const std::vector<Group*>& groups) {
  SlabPool& pool = zone.pool();
  // A zone kept across a reload: the previous generation's arrays go back to
  // the pool (the servers may have changed; their health starts afresh).
  if (auto* old = static_cast<ZoneDirectory*>(old_data)) {
    for (std::size_t i = 0; i < old->count; ++i) pool.free(old->blocks[i]);
    pool.free(old);
  }
  const std::size_t dir_bytes = sizeof(ZoneDirectory) + groups.size() * sizeof(void*);
  auto* dir = static_cast<ZoneDirectory*>(pool.calloc(dir_bytes));
  if (dir == nullptr) return Status::error("zone \"" + zone.name() + "\" is too small" + zone.where());
  zone.set_data(dir);
  for (Group* g : groups) {
    const std::size_t n = g->peers.size();
    void* mem = pool.calloc(n * sizeof(PeerHealth));
    if (mem == nullptr) {
      return Status::error("zone \"" + zone.name() + "\" is too small for upstream \"" + g->name + "\"" +
                           zone.where());
    }
    dir->blocks[dir->count++] = mem;
    static_assert(std::is_trivially_destructible_v<PeerHealth>);  // freed to the slab pool as is
    auto* h = static_cast<PeerHealth*>(mem);
    for (std::size_t i = 0; i < n; ++i) g->peers[i].health = new (&h[i]) PeerHealth();
  }
  return Status::ok();
}

}  // namespace vigil::upstream
