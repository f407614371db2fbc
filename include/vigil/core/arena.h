#pragma once
// A per-connection (or per-request) arena: bump allocation, freed all at once.
// Blocks come from an upstream resource; with a pool resource upstream (as the
// connection pool sets up) a reset arena gives its blocks back for reuse, so a
// warm worker allocates nothing from the heap per connection.

#include <cstddef>
#include <memory_resource>
#include <new>
#include <utility>

namespace vigil {

class Arena {
 public:
  explicit Arena(std::size_t initial_size = 1024,
                 std::pmr::memory_resource* upstream = std::pmr::get_default_resource())
      : res_(initial_size, upstream) {}
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  void* alloc(std::size_t n, std::size_t align = alignof(std::max_align_t)) {
    return res_.allocate(n, align);
  }
  template <class T, class... Args>
  T* make(Args&&... args) {
    return ::new (alloc(sizeof(T), alignof(T))) T(std::forward<Args>(args)...);
  }
  // Copies `n` bytes into the arena.
  char* dup(const void* p, std::size_t n);
  std::pmr::memory_resource* resource() { return &res_; }
  // Releases every allocation (destructors are not run: put only trivially
  // destructible objects here, or resources that don't own memory).
  void reset() { res_.release(); }
  // Releases every allocation and makes the next block `initial_size` bytes:
  // a connection's first block is sized by its listener (Listening::pool_size).
  void reset(std::size_t initial_size) {
    std::pmr::memory_resource* up = res_.upstream_resource();
    res_.~monotonic_buffer_resource();
    ::new (&res_) std::pmr::monotonic_buffer_resource(initial_size, up);
  }

 private:
  std::pmr::monotonic_buffer_resource res_;
};

inline char* Arena::dup(const void* p, std::size_t n) {
  auto* d = static_cast<char*>(alloc(n ? n : 1, 1));
  for (std::size_t i = 0; i < n; ++i) d[i] = static_cast<const char*>(p)[i];
  return d;
}

}  // namespace vigil
