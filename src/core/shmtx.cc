#include "core/shmtx.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

namespace vigil {

namespace {

inline void cpu_pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

long ncpu() {
  static const long n = ::sysconf(_SC_NPROCESSORS_ONLN);
  return n;
}

// The lock word holds the owner's pid, needed on every lock and unlock;
// getpid() is a system call (glibc does not cache it), so the pid is taken
// once per process. fork() runs the atfork handler in the child, which
// forgets the parent's pid before any code of the child can lock.
std::atomic<pid_t> g_self{0};

void forget_self() {
  g_self.store(0, std::memory_order_relaxed);
}

std::uint64_t self_pid() {
  pid_t pid = g_self.load(std::memory_order_relaxed);
  if (pid == 0) {
    static const int registered = ::pthread_atfork(nullptr, nullptr, forget_self);
    (void)registered;
    pid = ::getpid();
    g_self.store(pid, std::memory_order_relaxed);
  }
  return static_cast<std::uint64_t>(pid);
}

}  // namespace

Shmtx::~Shmtx() {
  if (fd_ != -1) ::close(fd_);
}

Status Shmtx::create(ShmtxShared* shared, Mode mode, const std::string& lock_file, unsigned spin) {
  mode_ = mode;
  spin_ = spin;
  if (mode == Mode::kFileLock) {
    lock_file_ = lock_file;
    return reopen();
  }
  if (shared == nullptr) return Status::error("shmtx: no shared memory given");
  sh_ = shared;
  sh_->lock.store(0);
  sh_->wait.store(0);
  // Without a semaphore, waiters fall back to sched_yield(): correct but busier.
  semaphore_ = ::sem_init(&sh_->sem, 1, 0) == 0;
  sh_->has_sem.store(semaphore_ ? 1 : 0);
  return Status::ok();
}

Status Shmtx::attach(ShmtxShared* shared, unsigned spin) {
  if (shared == nullptr) return Status::error("shmtx: no shared memory given");
  mode_ = Mode::kAtomic;
  spin_ = spin;
  sh_ = shared;
  semaphore_ = sh_->has_sem.load() != 0;
  return Status::ok();
}

Status Shmtx::reopen() {
  if (mode_ != Mode::kFileLock) return Status::ok();
  if (fd_ != -1) ::close(fd_);
  fd_ = ::open(lock_file_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd_ == -1) return Status::sys("open() \"" + lock_file_ + "\"");
  return Status::ok();
}

void Shmtx::destroy() {
  if (mode_ == Mode::kAtomic && semaphore_ && sh_ != nullptr) ::sem_destroy(&sh_->sem);
  if (mode_ == Mode::kFileLock && fd_ != -1) {
    ::close(fd_);
    fd_ = -1;
    ::unlink(lock_file_.c_str());
  }
}

bool Shmtx::trylock() {
  if (mode_ == Mode::kFileLock) {
    struct flock fl {};
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    return ::fcntl(fd_, F_SETLK, &fl) == 0;
  }
  // Reading first keeps a contended line shared instead of bouncing it with
  // failed CAS writes (seed 004: lock == 0 && CAS(0 -> pid)).
  std::uint64_t expected = 0;
  return sh_->lock.load(std::memory_order_relaxed) == 0 &&
         sh_->lock.compare_exchange_strong(expected, self_pid(), std::memory_order_acquire,
                                           std::memory_order_relaxed);
}

void Shmtx::lock() {
  if (mode_ == Mode::kFileLock) {
    struct flock fl {};
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    while (::fcntl(fd_, F_SETLKW, &fl) == -1 && errno == EINTR) {
    }
    return;
  }
  for (;;) {
    if (trylock()) return;
    if (ncpu() > 1) {
      // Spin in rounds of 1, 2, 4 ... pauses: the holder runs on another CPU
      // and usually releases within microseconds.
      for (unsigned n = 1; n < spin_; n <<= 1) {
        for (unsigned i = 0; i < n; ++i) cpu_pause();
        if (trylock()) return;
      }
    }
    if (semaphore_) {
      sh_->wait.fetch_add(1);
      if (trylock()) {
        sh_->wait.fetch_sub(1);
        return;
      }
      while (::sem_wait(&sh_->sem) == -1 && errno == EINTR) {
      }
      continue;
    }
    ::sched_yield();
  }
}

void Shmtx::unlock() {
  if (mode_ == Mode::kFileLock) {
    struct flock fl {};
    fl.l_type = F_UNLCK;
    fl.l_whence = SEEK_SET;
    (void)::fcntl(fd_, F_SETLK, &fl);
    return;
  }
  // Only the owner's pid can be swapped out: a stray unlock is harmless.
  std::uint64_t expected = self_pid();
  if (sh_->lock.compare_exchange_strong(expected, 0, std::memory_order_release,
                                        std::memory_order_relaxed)) {
    wakeup();
  }
}

bool Shmtx::force_unlock(pid_t pid) {
  if (mode_ == Mode::kFileLock) return false;  // the kernel dropped the dead holder's lock
  std::uint64_t expected = static_cast<std::uint64_t>(pid);
  if (sh_->lock.compare_exchange_strong(expected, 0)) {
    wakeup();
    return true;
  }
  return false;
}

pid_t Shmtx::owner() const {
  return mode_ == Mode::kAtomic ? static_cast<pid_t>(sh_->lock.load()) : 0;
}

void Shmtx::wakeup() {
  if (!semaphore_) return;
  // Take one sleeper off the count and wake it; if none sleeps, post nothing.
  std::int64_t w = sh_->wait.load();
  do {
    if (w <= 0) return;
  } while (!sh_->wait.compare_exchange_weak(w, w - 1));
  (void)::sem_post(&sh_->sem);
}

}  // namespace vigil
