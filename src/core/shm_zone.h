#pragma once
// Named shared memory zones (nginx's ngx_shared_memory_add and the shm part
// of ngx_init_cycle). Everything workers share — limit_req/limit_conn state,
// the TLS session cache, upstream health — lives in one, with its own lock
// and a slab allocator (core/slab.h), sized by configuration.
//
// Life of a zone:
//   1. Configuration load. A directive handler registers the zone with the
//      load's registry (DirectiveCall::zones(), also ConfInit::env().zones):
//
//        static const int kTag = 0;  // the module's key: the address of a static
//        auto z = call.zones().add(name, size, &kTag, call.where());
//        if (!z) return z.status();
//        (*z)->set_init([ctx](ShmZone& zone, void* old_data) { ... });
//        conf.zone = *z;  // keep the pointer: it stays valid with the Configuration
//
//      size 0 references a zone another directive sizes (limit_req zone=x
//      before or after limit_req_zone x ...). Registration does not map.
//   2. Mapping. Whoever creates the processes maps every zone of the new
//      configuration before forking (server/cycle.cc: make_cycle, run by the
//      master, and by the single-process runtime likewise): SharedZones::map().
//      A zone gets a fresh anonymous shared mapping with an empty SlabPool over
//      it and its init runs with old_data == nullptr; or, on reload, when the
//      previous configuration had a zone of the same name, size and tag, the
//      mapping is reused as it is (contents, pool and lock untouched) and init
//      runs with old_data = that zone's data(). That is what keeps the session
//      cache and limit state across a reload. init runs in the master, before
//      any worker of the new generation exists.
//   3. Workers inherit the mapping at fork, at the same address, and use
//      zone->pool() and zone->data() through the configuration they run.
//   4. Unmapping. A mapping is shared by the generations that use it and is
//      unmapped from the master when the last Configuration holding it is
//      destroyed (the master drops the old cycle right after a reload; old
//      workers keep their own inherited mapping until they exit, so the
//      kernel frees the memory only after the last of them is gone).
//
// Errors (all end with `where`, " in F:L" of the directive):
//   zone "x" is too small                  size below kMinSize (8 pages)
//   the size N of shared memory zone "x" conflicts with already declared size M
//   the shared memory zone "x" is already declared for a different use  (tag)
//   zero size shared memory zone "x"       referenced, never sized (at map())

#include <sys/types.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/shm.h"
#include "core/slab.h"
#include "vigil/core/result.h"

namespace vigil {

class ShmZone;

// Runs in the master when the zone is mapped (see above). Typical body: on
// old_data, adopt the old shared state; else allocate the module's shared
// struct from zone.pool() and publish it with zone.pool().set_data() (and/or
// zone.set_data()). A failure fails the configuration (reload keeps running
// the old one).
using ShmZoneInit = std::function<Status(ShmZone& zone, void* old_data)>;

class ShmZone {
 public:
  ShmZone(const ShmZone&) = delete;
  ShmZone& operator=(const ShmZone&) = delete;

  const std::string& name() const { return name_; }
  // Bytes as configured; 0 while only referenced.
  std::size_t size() const { return size_; }
  // The owning module's key (the address of one of its static objects).
  const void* tag() const { return tag_; }
  // " in F:L" of the registration that gave the size (else the first one).
  const std::string& where() const { return where_; }

  void set_init(ShmZoneInit init) { init_ = std::move(init); }
  // The module's pointer for this generation (nginx's shm_zone->data). It
  // may point into the zone or at the module's conf; a reused zone's init
  // gets the previous generation's value as old_data.
  void* data() const { return data_; }
  void set_data(void* data) { data_ = data; }

  bool mapped() const { return shm_ != nullptr; }
  // This generation kept the previous one's memory (reload).
  bool reused() const { return reused_; }
  void* addr() const { return shm_ ? shm_->addr() : nullptr; }
  // The allocator over the zone; valid once mapped.
  SlabPool& pool() { return pool_; }

 private:
  friend class SharedZones;
  ShmZone(std::string name, std::size_t size, const void* tag, std::string where)
      : name_(std::move(name)), size_(size), tag_(tag), where_(std::move(where)) {}

  std::string name_;
  std::size_t size_;
  const void* tag_;
  std::string where_;
  ShmZoneInit init_;
  void* data_ = nullptr;
  bool reused_ = false;
  std::shared_ptr<SharedMemory> shm_;  // shared with the generation it was reused from
  SlabPool pool_;                      // this process's handle on the pool in shm_
};

// The zones of one configuration, owned by its Configuration.
class SharedZones {
 public:
  static constexpr std::size_t kMinSize = 8 * SlabPool::kPageSize;

  SharedZones() = default;
  SharedZones(const SharedZones&) = delete;
  SharedZones& operator=(const SharedZones&) = delete;

  // Registers zone `name`, or returns the one registered before (then the
  // tag must match, and the sizes unless one of them is 0). The pointer is
  // valid as long as this registry.
  Result<ShmZone*> add(std::string_view name, std::size_t size, const void* tag,
                       std::string_view where);
  ShmZone* find(std::string_view name) const;
  const std::vector<std::unique_ptr<ShmZone>>& zones() const { return zones_; }
  bool empty() const { return zones_.empty(); }

  // Maps every zone (see the top of this file), reusing `previous`'s
  // mappings where name, size and tag match. Call once, in the process that
  // forks the workers, before forking. On failure the zones mapped so far are
  // released with this registry; `previous` is left intact.
  Status map(SharedZones* previous);
  bool mapped() const { return mapped_; }

  // The master's repair after worker `pid` died: releases every zone lock it
  // held (nginx's ngx_unlock_mutexes). Returns the names of those zones.
  std::vector<std::string> force_unlock(pid_t pid);

 private:
  std::vector<std::unique_ptr<ShmZone>> zones_;
  bool mapped_ = false;
};

}  // namespace vigil
