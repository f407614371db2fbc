#pragma once
// A per-connection (or per-request) arena: bump allocation, freed all at once.
// Blocks come from an upstream resource; with a pool resource upstream (as the
// connection pool sets up) a reset arena gives its blocks back for reuse, so a
// warm worker allocates nothing from the heap per connection.
//
// Allocation failure is a result, never an exception: alloc, make and dup
// return nullptr when the upstream cannot give a block. A std::pmr upstream
// reports failure by throwing (std::bad_alloc); the arena catches it here, at
// its boundary, so nothing thrown ever reaches an event handler.
//
// Lifetime: everything allocated lives until reset() (for a connection's
// arena: until the connection is closed, see ConnectionPool::close_connection).

#include <cstddef>
#include <cstring>
#include <memory_resource>
#include <new>
#include <type_traits>
#include <utility>

namespace vigil {

class Arena {
 public:
  explicit Arena(std::size_t initial_size = 1024,
                 std::pmr::memory_resource* upstream = std::pmr::get_default_resource())
      : res_(initial_size, upstream) {}
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // `n` bytes aligned to `align`; nullptr when memory ran out.
  void* alloc(std::size_t n, std::size_t align = alignof(std::max_align_t)) noexcept {
    try {
      return res_.allocate(n, align);
    } catch (...) {  // std::bad_alloc from the upstream, or its own failure
      return nullptr;
    }
  }
  // A T constructed in the arena (never destroyed: T should be trivially
  // destructible or own nothing); nullptr when memory ran out.
  template <class T, class... Args>
  T* make(Args&&... args) noexcept(std::is_nothrow_constructible_v<T, Args...>) {
    void* p = alloc(sizeof(T), alignof(T));
    if (p == nullptr) return nullptr;
    return ::new (p) T(std::forward<Args>(args)...);
  }
  // Copies `n` bytes into the arena; nullptr when memory ran out.
  char* dup(const void* p, std::size_t n) noexcept {
    auto* d = static_cast<char*>(alloc(n ? n : 1, 1));
    if (d != nullptr && n != 0) std::memcpy(d, p, n);
    return d;
  }
  // Releases every allocation (destructors are not run: put only trivially
  // destructible objects here, or resources that don't own memory).
  void reset() noexcept { res_.release(); }
  // Releases every allocation and makes the next block `initial_size` bytes:
  // a connection's first block is sized by its listener (Listening::pool_size).
  void reset(std::size_t initial_size) noexcept {
    std::pmr::memory_resource* up = res_.upstream_resource();
    res_.~monotonic_buffer_resource();
    ::new (&res_) std::pmr::monotonic_buffer_resource(initial_size, up);
  }

 private:
  std::pmr::monotonic_buffer_resource res_;
};

}  // namespace vigil
