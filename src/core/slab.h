#pragma once
// A slab allocator inside one shared memory zone (the idea of nginx's
// ngx_slab_pool_t; our own layout). The zone is cut into 4 KiB pages:
//
//   [SlabHeader: lock, counters, free page runs, class lists, data]
//   [page descriptors, one per page]  [pad to 4 KiB]  [pages ...]
//
// Small requests (up to half a page) round up to a power of two from 8 bytes
// (9 classes: 8 .. 2048); a page serves chunks of one class, tracked by a
// bitmap in its descriptor, and goes back to the free pages when its last
// chunk is freed. Larger requests take a run of whole pages (first fit; freed
// runs coalesce with free neighbours). Chunks are aligned to their size,
// pages to 4 KiB.
//
// Failure is a result: alloc returns nullptr when the zone is full, never
// throws, never grows. The caller decides (nginx's modules log "could not
// allocate node in zone X", evict the least recently used entries and try
// again); stats() counts the failures per class for that message and /metrics.
//
// Processes: the pool itself (header, descriptors, pages) lives in the zone.
// A SlabPool object is this process's handle on it: a pointer to the header
// and a Shmtx over the ShmtxShared in the header. The handle is made in the
// master before fork (create() for a fresh zone, attach() for a zone reused
// across a reload) and forked workers use their inherited copy.
//
// Locking: alloc/calloc/free take the zone's lock; the *_locked variants
// expect the caller to hold it (lock()/unlock()), so a module can look up,
// allocate and link a node in one critical section.

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/shmtx.h"
#include "vigil/core/result.h"

namespace vigil {

struct SlabHeader;  // in the zone; defined in slab.cc

struct SlabClassStats {
  std::size_t size = 0;   // chunk size of the class
  std::size_t total = 0;  // chunks in pages owned by the class
  std::size_t used = 0;   // chunks handed out
  std::uint64_t requests = 0;
  std::uint64_t failures = 0;  // no free page for a new slab of this class
};

struct SlabStats {
  static constexpr int kClasses = 9;
  std::size_t pages_total = 0;
  std::size_t pages_free = 0;
  SlabClassStats classes[kClasses];
  std::uint64_t page_requests = 0;  // allocations above half a page
  std::uint64_t page_failures = 0;
  std::uint64_t bad_frees = 0;  // free() of a pointer that was not allocated
};

class SlabPool {
 public:
  static constexpr std::size_t kPageSize = 4096;
  static constexpr std::size_t kMinChunk = 8;
  static constexpr std::size_t kMaxChunk = kPageSize / 2;  // larger: whole pages
  static constexpr int kClasses = SlabStats::kClasses;

  SlabPool() = default;
  SlabPool(const SlabPool&) = delete;
  SlabPool& operator=(const SlabPool&) = delete;

  // Lays a new, empty pool over [addr, addr + size) and attaches this handle.
  // addr must be 4 KiB aligned (a mapping is); fails when `size` leaves no
  // page after the header. Initialises the lock: call it once per zone,
  // before any other process uses the memory.
  Status create(void* addr, std::size_t size);
  // Attaches this handle to the pool create() laid at `addr` (a zone kept
  // across a reload). Contents and lock state are left as they are.
  Status attach(void* addr);
  bool attached() const { return h_ != nullptr; }

  // nullptr when there is no room (or size == 0 / too large). calloc zeroes.
  void* alloc(std::size_t size);
  void* calloc(std::size_t size);
  // Returns false (and counts a bad free) when `p` is not a live allocation
  // of this pool: outside the zone, inside a chunk, already free. nullptr is
  // accepted and ignored (true).
  bool free(void* p);

  // The same with the lock already held by the caller.
  void* alloc_locked(std::size_t size);
  void* calloc_locked(std::size_t size);
  bool free_locked(void* p);

  void lock() { mutex_.lock(); }
  void unlock() { mutex_.unlock(); }
  bool trylock() { return mutex_.trylock(); }
  // The master's repair after worker `pid` died holding the lock.
  bool force_unlock(pid_t pid) { return mutex_.force_unlock(pid); }
  Shmtx& mutex() { return mutex_; }

  // A pointer the owning module keeps in the pool header (nginx's sp->data):
  // usually its shared struct, allocated from this pool in its zone init.
  void* data() const;
  void set_data(void* data);

  // Snapshot of the counters, taken under the lock.
  SlabStats stats();
  SlabStats stats_locked() const;
  // Chunk size a request of `size` bytes gets (a whole-page multiple above
  // kMaxChunk); 0 for 0.
  static std::size_t chunk_size(std::size_t size);
  // Walks the page table and the lists and checks they agree (tests, debug):
  // an empty message when consistent, else what is wrong. Caller holds the lock.
  std::string verify_locked() const;

  // True when `p` points into this pool's pages.
  bool owns(const void* p) const;
  void* addr() const { return h_; }

 private:
  SlabHeader* h_ = nullptr;
  Shmtx mutex_;
};

// RAII for the pool lock.
class SlabLock {
 public:
  explicit SlabLock(SlabPool& pool) : pool_(pool) { pool_.lock(); }
  ~SlabLock() { pool_.unlock(); }
  SlabLock(const SlabLock&) = delete;
  SlabLock& operator=(const SlabLock&) = delete;

 private:
  SlabPool& pool_;
};

}  // namespace vigil
