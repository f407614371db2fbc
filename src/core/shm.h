#pragma once
// Anonymous shared memory, mapped before fork() so the master and every worker
// see the same pages (nginx's ngx_shm_alloc with MAP_ANON|MAP_SHARED).

#include <cstddef>

#include "vigil/core/result.h"

namespace vigil {

class SharedMemory {
 public:
  SharedMemory() = default;
  ~SharedMemory();
  SharedMemory(SharedMemory&& o) noexcept : addr_(o.addr_), size_(o.size_) {
    o.addr_ = nullptr;
    o.size_ = 0;
  }
  SharedMemory& operator=(SharedMemory&& o) noexcept;
  SharedMemory(const SharedMemory&) = delete;
  SharedMemory& operator=(const SharedMemory&) = delete;

  // Zero-filled, page-aligned, shared with children forked afterwards.
  static Result<SharedMemory> map(std::size_t size);
  void* addr() const { return addr_; }
  std::size_t size() const { return size_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(addr_);
  }

 private:
  void* addr_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace vigil
