#pragma once
// The shared state of the limit zones (limit_req_zone, and limit_conn_zone
// in http and stream; nginx's ngx_http_limit_req_shctx_t /
// ngx_*_limit_conn_shctx_t): in the zone, one red-black tree of entries keyed
// by the evaluated key (the node key is a hash of the bytes, the bytes
// themselves decide on a collision) and an LRU queue of the same entries,
// most recently used first. Everything here runs under the zone's lock
// (SlabPool::lock / SlabLock), in any worker: the zone is mapped before fork
// at the same address everywhere (core/shm_zone.h).
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
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/conf/module.h"
#include "core/conf/values.h"
#include "core/rbtree.h"
#include "core/shm_zone.h"
#include "vigil/core/clock.h"
#include "vigil/core/result.h"

namespace vigil {

// Longest key accounted; a longer one is logged and not accounted (nginx's
// limit is 65535 in http, 255 in stream; a key is usually 4 or 16 bytes).
inline constexpr std::size_t kMaxLimitKey = 1024;

struct LimitNode {
  RbNode rb;                  // key: limit_key_hash() of the bytes
  LimitNode* prev = nullptr;  // LRU queue: towards the most recent
  LimitNode* next = nullptr;  // towards the least recent
  std::int64_t excess = 0;    // limit_req: requests above the rate, in 1/1000
  Msec last = 0;              // limit_req: time of the last accounted request
  std::uint32_t count = 0;    // limit_conn: requests (sessions) in progress
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

// limit_conn's accounting: one more connection for `key` unless `max` are
// in progress; false when refused or when the zone has no room for a new
// entry. Caller holds the lock.
bool limit_conn_acquire(LimitTable& t, std::uint64_t hash, std::string_view key, std::uint32_t max,
                        LimitNode** node);
// One fewer; the entry goes at 0. Caller holds the lock.
void limit_conn_release(LimitTable& t, LimitNode* n);

// "name:size" of a zone= parameter (limit_conn_zone, limit_req_zone).
inline Status parse_zone_arg(const DirectiveCall& call, std::string_view v, std::string& name,
                             std::uint64_t& size) {
  const auto colon = v.rfind(':');
  auto parsed = colon == std::string_view::npos || colon == 0 ? std::nullopt
                                                              : parse_size(v.substr(colon + 1));
  if (!parsed) return call.error("invalid zone size \"" + std::string(v) + "\"");
  name = std::string(v.substr(0, colon));
  size = *parsed;
  return Status::ok();
}

// Registers the zone a *_zone directive declares for `ctx` (a type with a
// compiled `key` that has source(), the `zone` and the `table` over it). A
// zone has one key; a reload that keeps the zone must keep its key too
// ("<reload_label> "x" uses the "$a" key while previously it used the "$b"
// key", nginx's text). The table is laid over the zone when it is mapped.
// `ctx` is kept alive in `keep` (the configuration's list) once bound.
template <class Zone>
Status bind_limit_zone(const DirectiveCall& call, const char* directive, const char* reload_label,
                       const std::string& name, std::uint64_t size, const void* tag,
                       std::shared_ptr<Zone> ctx, std::vector<std::shared_ptr<void>>& keep) {
  Zone* raw = ctx.get();
  auto z = call.zones().add(name, size, tag, call.where());
  if (!z) return z.status();
  if ((*z)->data() != nullptr) {
    return call.error(std::string(directive) + " \"" + name + "\" is already bound to key \"" +
                      static_cast<Zone*>((*z)->data())->key.source() + "\"");
  }
  raw->zone = *z;
  (*z)->set_data(raw);
  (*z)->set_init([raw, reload_label](ShmZone& zone, void* old_data) -> Status {
    if (old_data != nullptr) {
      const auto* old = static_cast<const Zone*>(old_data);
      if (old->key.source() != raw->key.source()) {
        return Status::error(std::string(reload_label) + " \"" + zone.name() + "\" uses the \"" +
                             raw->key.source() + "\" key while previously it used the \"" +
                             old->key.source() + "\" key");
      }
    }
    if (Status s = LimitTable::init_zone(zone); !s) return s;
    raw->table = LimitTable(zone);
    zone.set_data(raw);
    return Status::ok();
  });
  keep.push_back(std::move(ctx));
  return Status::ok();
}

}  // namespace vigil
