#pragma once
// The process-shared lock (seed 004, ngx_shmtx_t): the lock word lives in
// shared memory and holds the owner's pid, so a lock left behind by a dead
// worker can be recognised and released by the master. trylock is one
// compare-and-swap; lock spins with the CPU's pause instruction in growing
// rounds, then sleeps on a process-shared POSIX semaphore. Where atomics cannot
// be used, an fcntl() file lock does the same job (the kernel releases it when
// its holder dies).

#include <semaphore.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "vigil/core/process_mutex.h"
#include "vigil/core/result.h"

namespace vigil {

// The part that lives in shared memory. Create it (zeroed) before fork().
struct ShmtxShared {
  std::atomic<std::uint64_t> lock{0};  // 0 or the owner's pid
  std::atomic<std::int64_t> wait{0};   // processes asleep on the semaphore
  sem_t sem;
  std::atomic<std::uint32_t> has_sem{0};  // create() initialised sem (for attach())
};
static_assert(std::atomic<std::uint64_t>::is_always_lock_free, "shmtx needs lock-free atomics");

class Shmtx : public ProcessMutex {
 public:
  enum class Mode { kAtomic, kFileLock };
  static constexpr unsigned kDefaultSpin = 2048;

  Shmtx() = default;
  ~Shmtx() override;
  Shmtx(const Shmtx&) = delete;
  Shmtx& operator=(const Shmtx&) = delete;

  // kAtomic: uses `shared` (semaphore initialised here; call once, before fork).
  // kFileLock: opens (creating) `lock_file`. fcntl locks belong to the process,
  // so a child that inherited the descriptor locks on its own; reopen() gives
  // a process its own descriptor when it wants one.
  Status create(ShmtxShared* shared, Mode mode = Mode::kAtomic, const std::string& lock_file = "",
                unsigned spin = kDefaultSpin);
  // kAtomic only: a second handle on a lock another Shmtx create()d in
  // `shared` (a shared zone reused across a reload). Unlike create() it
  // resets nothing: the lock may be held right now.
  Status attach(ShmtxShared* shared, unsigned spin = kDefaultSpin);
  Status reopen();  // after fork, kFileLock only
  void destroy();   // in the master, after the workers are gone

  bool trylock() override;
  void lock();
  void unlock() override;
  // The master's repair after a worker died: releases the lock if `pid` holds it.
  bool force_unlock(pid_t pid);
  pid_t owner() const;  // 0 when free (kAtomic only)
  Mode mode() const { return mode_; }

 private:
  void wakeup();

  Mode mode_ = Mode::kAtomic;
  ShmtxShared* sh_ = nullptr;
  bool semaphore_ = false;
  unsigned spin_ = kDefaultSpin;
  int fd_ = -1;
  std::string lock_file_;
};

}  // namespace vigil
