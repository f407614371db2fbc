#pragma once
// The shared state of limit_req_zone and limit_conn_zone (nginx's
// ngx_http_limit_req_shctx_t / ngx_http_limit_conn_shctx_t): in the zone, one
// red-black tree of entries keyed by the evaluated key (the node key is a
// hash of the bytes, the bytes themselves decide on a collision) and an LRU
// queue of the same entries, most recently used first. Everything here runs
// under the zone's lock (SlabPool::lock / SlabLock), in any worker: the zone
// is mapped before fork at the same address everywhere (core/shm_zone.h).
//
//   LimitTable t(zone);                  // this process's view of the zone
//   SlabLock lock(zone.pool());
//   LimitNode* n = t.find(hash, key);
//   if (!n) n = t.insert(hash, key);     // nullptr: the zone is full
//   t.touch(n);                          // most recently used
//
// Eviction is the caller's policy (limit_req expires idle buckets and, when
// the slab is full, drops the least recently used ones; limit_conn frees a
// node when its count returns to 0), built from oldest() and remove().

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/rbtree.h"
#include "core/shm_zone.h"
#include "vigil/core/clock.h"
#include "vigil/core/result.h"

namespace vigil::http {

// Longest key accounted; a longer one is logged and not accounted (nginx's
// limit is 65535; a key is usually 4 or 16 bytes).
inline constexpr std::size_t kMaxLimitKey = 1024;

struct LimitNode {
  RbNode rb;                  // key: limit_key_hash() of the bytes
  LimitNode* prev = nullptr;  // LRU queue: towards the most recent
  LimitNode* next = nullptr;  // towards the least recent
  std::int64_t excess = 0;    // limit_req: requests above the rate, in 1/1000
  Msec last = 0;              // limit_req: time of the last accounted request
  std::uint32_t count = 0;    // limit_conn: requests in progress
  std::uint16_t len = 0;
  char key[1];  // `len` bytes (allocated past the struct)

  std::string_view key_view() const { return {key, len}; }
};

// At the start of the zone's pool data (pool().data()).
struct LimitShared {
  RbTree tree;
  RbNode sentinel;
  LimitNode queue;            // the LRU queue's head: queue.next is the most recent
  std::uint64_t evicted = 0;  // entries dropped to make room
};

std::uint64_t limit_key_hash(std::string_view key);

class LimitTable {
 public:
  LimitTable() = default;
  explicit LimitTable(ShmZone& zone);

  // The zone's init (ShmZoneInit): lays a fresh LimitShared in a new zone, or
  // keeps the one a reused zone already holds.
  static Status init_zone(ShmZone& zone);

  bool valid() const { return sh_ != nullptr; }
  SlabPool& pool() { return *pool_; }
  LimitShared& shared() { return *sh_; }

  LimitNode* find(std::uint64_t hash, std::string_view key) const;
  // A new entry at the head of the queue, fields zeroed; nullptr when the
  // slab has no room (nothing is evicted here).
  LimitNode* insert(std::uint64_t hash, std::string_view key);
  void remove(LimitNode* n);  // unlinks and frees
  void touch(LimitNode* n);   // moves to the head of the queue
  LimitNode* oldest() const;  // tail of the queue, nullptr when empty
  std::size_t size() const;   // entries (walks the queue: tests)

 private:
  SlabPool* pool_ = nullptr;
  LimitShared* sh_ = nullptr;
};

}  // namespace vigil::http
