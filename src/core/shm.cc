#include "core/shm.h"

#include <sys/mman.h>

#include <cerrno>
#include <utility>

namespace vigil {

SharedMemory::~SharedMemory() {
  if (addr_ != nullptr) ::munmap(addr_, size_);
}

SharedMemory& SharedMemory::operator=(SharedMemory&& o) noexcept {
  if (this != &o) {
    if (addr_ != nullptr) ::munmap(addr_, size_);
    addr_ = std::exchange(o.addr_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

Result<SharedMemory> SharedMemory::map(std::size_t size) {
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_SHARED, -1, 0);
  if (p == MAP_FAILED) return Status::sys("mmap(MAP_ANONYMOUS|MAP_SHARED, " + std::to_string(size) + ")");
  SharedMemory m;
  m.addr_ = p;
  m.size_ = size;
  return m;
}

}  // namespace vigil
