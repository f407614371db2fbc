#include "core/shm_zone.h"

namespace vigil {

namespace {

std::string quoted(std::string_view name) {
  return "\"" + std::string(name) + "\"";
}

}  // namespace

Result<ShmZone*> SharedZones::add(std::string_view name, std::size_t size, const void* tag,
                                  std::string_view where) {
  if (size != 0 && size < kMinSize) {
    return Status::error("zone " + quoted(name) + " is too small" + std::string(where));
  }
  if (ShmZone* z = find(name)) {
    if (z->tag_ != tag) {
      return Status::error("the shared memory zone " + quoted(name) +
                           " is already declared for a different use" + std::string(where));
    }
    if (size != 0 && z->size_ != 0 && size != z->size_) {
      return Status::error("the size " + std::to_string(size) + " of shared memory zone " +
                           quoted(name) + " conflicts with already declared size " +
                           std::to_string(z->size_) + std::string(where));
    }
    if (z->size_ == 0 && size != 0) {
      z->size_ = size;
      z->where_ = std::string(where);
    }
    return z;
  }
  zones_.push_back(
      std::unique_ptr<ShmZone>(new ShmZone(std::string(name), size, tag, std::string(where))));
  return zones_.back().get();
}

ShmZone* SharedZones::find(std::string_view name) const {
  for (const auto& z : zones_) {
    if (z->name_ == name) return z.get();
  }
  return nullptr;
}

Status SharedZones::map(SharedZones* previous) {
  for (auto& zp : zones_) {
    ShmZone& z = *zp;
    if (z.shm_ != nullptr) continue;
    if (z.size_ == 0) {
      return Status::error("zero size shared memory zone " + quoted(z.name_) + z.where_);
    }
    // The same name, size and owner as before: the memory and what is in it
    // carry over (nginx's ngx_init_cycle does the same test).
    ShmZone* old = previous != nullptr ? previous->find(z.name_) : nullptr;
    if (old != nullptr && old->shm_ != nullptr && old->tag_ == z.tag_ && old->size_ == z.size_) {
      z.shm_ = old->shm_;
      z.reused_ = true;
      if (Status s = z.pool_.attach(z.shm_->addr()); !s) {
        return Status::error(s.message() + " in shared memory zone " + quoted(z.name_));
      }
      if (z.init_) {
        if (Status s = z.init_(z, old->data_); !s) return s;
      }
      continue;
    }
    // mmap rounds up to whole pages anyway; the pool uses them all.
    const std::size_t bytes =
        (z.size_ + SlabPool::kPageSize - 1) / SlabPool::kPageSize * SlabPool::kPageSize;
    auto m = SharedMemory::map(bytes);
    if (!m) {
      return Status::error(m.status().message() + " for shared memory zone " + quoted(z.name_),
                           m.status().err());
    }
    z.shm_ = std::make_shared<SharedMemory>(std::move(m).value());
    if (Status s = z.pool_.create(z.shm_->addr(), z.shm_->size()); !s) {
      return Status::error(s.message() + " in shared memory zone " + quoted(z.name_));
    }
    if (z.init_) {
      if (Status s = z.init_(z, nullptr); !s) return s;
    }
  }
  mapped_ = true;
  return Status::ok();
}

std::vector<std::string> SharedZones::force_unlock(pid_t pid) {
  std::vector<std::string> names;
  for (auto& z : zones_) {
    if (z->pool_.attached() && z->pool_.force_unlock(pid)) names.push_back(z->name_);
  }
  return names;
}

}  // namespace vigil
