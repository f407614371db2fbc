// Seed 004's experiment as a test: processes increment a counter in shared
// memory under the lock; the total is exact with the lock and not without it.
#include "core/shmtx.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <new>
#include <string>

#include "core/shm.h"

namespace vigil {
namespace {

struct Shared {
  ShmtxShared mtx;
  alignas(128) volatile long counter;
  alignas(128) volatile long in_critical;  // >1 ever seen means mutual exclusion broke
  alignas(128) volatile long overlap_seen;
  alignas(128) std::atomic<int> go;  // start barrier: all processes run at once
};

constexpr int kProcs = 4;
constexpr long kIncrements = 50000;

// A deliberately slow read-modify-write that now and then gives up the CPU
// between reading and writing, so that unsynchronised updates are certainly
// lost even when all the processes share one core.
void bump(Shared* sh, long i) {
  long in = sh->in_critical + 1;
  sh->in_critical = in;
  if (in > 1) sh->overlap_seen = 1;
  long v = sh->counter;
  if (i % 64 == 0) ::sched_yield();
  sh->counter = v + 1;
  sh->in_critical = sh->in_critical - 1;
}

long run_experiment(Shmtx* mtx, Shared* sh, bool use_lock, bool use_trylock = false) {
  sh->counter = 0;
  sh->in_critical = 0;
  sh->overlap_seen = 0;
  sh->go.store(0);
  pid_t pids[kProcs];
  for (int p = 0; p < kProcs; ++p) {
    pids[p] = ::fork();
    if (pids[p] == 0) {
      if (mtx != nullptr && !mtx->reopen()) ::_exit(3);
      while (sh->go.load() == 0) {
      }
      for (long i = 0; i < kIncrements; ++i) {
        if (use_lock) {
          if (use_trylock) {
            while (!mtx->trylock()) {
            }
          } else {
            mtx->lock();
          }
        }
        bump(sh, i);
        if (use_lock) mtx->unlock();
      }
      ::_exit(0);
    }
  }
  sh->go.store(1);
  for (pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  return sh->counter;
}

class ShmtxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = SharedMemory::map(sizeof(Shared));
    ASSERT_TRUE(m) << m.status().to_string();
    mem_ = std::move(m).value();
    sh_ = new (mem_.addr()) Shared{};
  }
  SharedMemory mem_;
  Shared* sh_ = nullptr;
};

TEST_F(ShmtxTest, AtomicLockMakesTheSharedCounterExact) {
  Shmtx mtx;
  ASSERT_TRUE(mtx.create(&sh_->mtx));
  EXPECT_EQ(run_experiment(&mtx, sh_, true), kProcs * kIncrements);
  EXPECT_EQ(sh_->overlap_seen, 0);
  EXPECT_EQ(mtx.owner(), 0);
  mtx.destroy();
}

TEST_F(ShmtxTest, TrylockAloneAlsoExcludes) {
  Shmtx mtx;
  ASSERT_TRUE(mtx.create(&sh_->mtx));
  EXPECT_EQ(run_experiment(&mtx, sh_, true, true), kProcs * kIncrements);
  EXPECT_EQ(sh_->overlap_seen, 0);
  mtx.destroy();
}

TEST_F(ShmtxTest, WithoutTheLockUpdatesAreLost) {
  // The control experiment: the same work unsynchronised loses increments, so
  // the exact totals above are the lock's doing. On a loaded machine the
  // scheduler may run the processes one after another now and then, so the
  // experiment is repeated (at most 20 times) until the processes overlap.
  long total = kProcs * kIncrements;
  for (int attempt = 0; attempt < 20 && total == kProcs * kIncrements; ++attempt) {
    total = run_experiment(nullptr, sh_, false);
  }
  EXPECT_LT(total, kProcs * kIncrements);
  EXPECT_EQ(sh_->overlap_seen, 1);
}

TEST_F(ShmtxTest, FileLockFallbackMakesTheSharedCounterExact) {
  std::string path = ::testing::TempDir() + "shmtx_" + std::to_string(::getpid()) + ".lock";
  Shmtx mtx;
  ASSERT_TRUE(mtx.create(nullptr, Shmtx::Mode::kFileLock, path));
  EXPECT_EQ(run_experiment(&mtx, sh_, true), kProcs * kIncrements);
  EXPECT_EQ(sh_->overlap_seen, 0);
  mtx.destroy();
}

TEST_F(ShmtxTest, LockWordHoldsTheOwnersPidAndOnlyTheOwnerUnlocks) {
  Shmtx mtx;
  ASSERT_TRUE(mtx.create(&sh_->mtx));
  ASSERT_TRUE(mtx.trylock());
  EXPECT_EQ(mtx.owner(), ::getpid());
  EXPECT_FALSE(mtx.trylock());
  pid_t child = ::fork();
  if (child == 0) {
    mtx.unlock();  // not the owner: must have no effect
    ::_exit(mtx.owner() == ::getppid() ? 0 : 1);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  mtx.unlock();
  EXPECT_EQ(mtx.owner(), 0);
  mtx.destroy();
}

TEST_F(ShmtxTest, MasterForceUnlocksALockHeldByAKilledProcess) {
  Shmtx mtx;
  ASSERT_TRUE(mtx.create(&sh_->mtx));
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t child = ::fork();
  if (child == 0) {
    mtx.lock();
    char c = 'L';
    (void)!::write(ready[1], &c, 1);
    for (;;) ::pause();
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  EXPECT_EQ(mtx.owner(), child);
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  ::waitpid(child, nullptr, 0);
  EXPECT_FALSE(mtx.trylock()) << "a dead holder keeps the lock until the master repairs it";
  EXPECT_FALSE(mtx.force_unlock(child + 1)) << "only the dead pid's lock is released";
  EXPECT_TRUE(mtx.force_unlock(child));
  EXPECT_TRUE(mtx.trylock());
  mtx.unlock();
  ::close(ready[0]);
  ::close(ready[1]);
  mtx.destroy();
}

TEST_F(ShmtxTest, ASleepingWaiterIsWokenByUnlock) {
  Shmtx mtx;
  ASSERT_TRUE(mtx.create(&sh_->mtx, Shmtx::Mode::kAtomic, "", 1));  // no spinning: sleep at once
  ASSERT_TRUE(mtx.trylock());
  pid_t child = ::fork();
  if (child == 0) {
    mtx.lock();
    bool mine = mtx.owner() == ::getpid();
    mtx.unlock();
    ::_exit(mine ? 0 : 1);
  }
  // Wait until the child sleeps on the semaphore, then release.
  for (int i = 0; i < 500 && sh_->mtx.wait.load() == 0; ++i) ::usleep(2000);
  EXPECT_EQ(sh_->mtx.wait.load(), 1);
  mtx.unlock();
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  mtx.destroy();
}

}  // namespace
}  // namespace vigil
