// The slab pool (src/core/slab.cc): size classes and alignment, running out
// (nullptr and a counted failure, never an exception), page runs splitting and
// joining again, bad frees caught, a random workload checked byte for byte
// with the page table verified, and processes allocating and freeing at once.

#include "core/slab.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <new>
#include <random>
#include <set>
#include <vector>

#include "core/shm.h"

namespace vigil {
namespace {

class SlabTest : public ::testing::Test {
 protected:
  void make(std::size_t size) {
    auto m = SharedMemory::map(size);
    ASSERT_TRUE(m) << m.status().to_string();
    shm_ = std::move(m).value();
    Status s = pool_.create(shm_.addr(), shm_.size());
    ASSERT_TRUE(s) << s.to_string();
  }
  std::string verify() {
    SlabLock l(pool_);
    return pool_.verify_locked();
  }
  SharedMemory shm_;
  SlabPool pool_;
};

TEST(SlabSizes, ChunkSizes) {
  EXPECT_EQ(SlabPool::chunk_size(0), 0u);
  EXPECT_EQ(SlabPool::chunk_size(1), 8u);
  EXPECT_EQ(SlabPool::chunk_size(8), 8u);
  EXPECT_EQ(SlabPool::chunk_size(9), 16u);
  EXPECT_EQ(SlabPool::chunk_size(100), 128u);
  EXPECT_EQ(SlabPool::chunk_size(2048), 2048u);
  EXPECT_EQ(SlabPool::chunk_size(2049), 4096u);
  EXPECT_EQ(SlabPool::chunk_size(4097), 8192u);
}

TEST(SlabCreate, TooSmallOrMisaligned) {
  auto m = SharedMemory::map(64 * 1024);
  ASSERT_TRUE(m);
  SlabPool p;
  EXPECT_FALSE(p.create(m->addr(), 1000));  // no room for a page
  EXPECT_FALSE(p.create(static_cast<char*>(m->addr()) + 8, 32 * 1024));
  EXPECT_FALSE(p.attach(m->addr()));  // nothing created there yet
  ASSERT_TRUE(p.create(m->addr(), 8 * SlabPool::kPageSize));
  SlabStats s = p.stats();
  // The header and the page table take one of the 8 pages.
  EXPECT_EQ(s.pages_total, 7u);
  EXPECT_EQ(s.pages_free, 7u);
}

TEST_F(SlabTest, EveryClassAlignedAndDistinct) {
  make(256 * 1024);
  std::vector<void*> ptrs;
  for (std::size_t size = 1; size <= 3 * SlabPool::kPageSize; size = size * 3 / 2 + 1) {
    void* p = pool_.alloc(size);
    ASSERT_NE(p, nullptr) << size;
    const std::size_t align = std::min(SlabPool::chunk_size(size), SlabPool::kPageSize);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % align, 0u) << size;
    EXPECT_TRUE(pool_.owns(p));
    std::memset(p, static_cast<int>(size & 0xff), size);
    ptrs.push_back(p);
  }
  // No two allocations overlap: each still holds its own byte.
  std::size_t i = 0;
  for (std::size_t size = 1; size <= 3 * SlabPool::kPageSize; size = size * 3 / 2 + 1, ++i) {
    const auto* b = static_cast<const unsigned char*>(ptrs[i]);
    for (std::size_t k = 0; k < size; ++k) ASSERT_EQ(b[k], size & 0xff) << size;
  }
  EXPECT_EQ(verify(), "");
  for (void* p : ptrs) EXPECT_TRUE(pool_.free(p));
  EXPECT_EQ(verify(), "");
  SlabStats s = pool_.stats();
  EXPECT_EQ(s.pages_free, s.pages_total);
  for (const auto& c : s.classes) {
    EXPECT_EQ(c.used, 0u);
    EXPECT_EQ(c.total, 0u);
  }
}

TEST_F(SlabTest, CallocZeroes) {
  make(64 * 1024);
  void* p = pool_.alloc(100);
  std::memset(p, 0xab, 100);
  ASSERT_TRUE(pool_.free(p));
  auto* q = static_cast<unsigned char*>(pool_.calloc(100));
  ASSERT_NE(q, nullptr);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(q[i], 0);
}

TEST_F(SlabTest, RunningOutIsAResultAndCounted) {
  make(16 * SlabPool::kPageSize);
  const std::size_t pages = pool_.stats().pages_total;
  std::vector<void*> ptrs;
  for (;;) {
    void* p = pool_.alloc(64);
    if (p == nullptr) break;
    ptrs.push_back(p);
    ASSERT_LT(ptrs.size(), 100000u);
  }
  EXPECT_EQ(ptrs.size(), pages * (SlabPool::kPageSize / 64));
  SlabStats s = pool_.stats();
  EXPECT_EQ(s.pages_free, 0u);
  EXPECT_EQ(s.classes[3].size, 64u);
  EXPECT_EQ(s.classes[3].failures, 1u);
  EXPECT_EQ(s.classes[3].used, ptrs.size());
  EXPECT_EQ(s.classes[3].requests, ptrs.size() + 1);
  // Another class has no page either; a big request neither.
  EXPECT_EQ(pool_.alloc(8), nullptr);
  EXPECT_EQ(pool_.alloc(5000), nullptr);
  s = pool_.stats();
  EXPECT_EQ(s.classes[0].failures, 1u);
  EXPECT_EQ(s.page_failures, 1u);
  EXPECT_EQ(verify(), "");

  // Freeing one chunk makes room in its class only (the page stays in use).
  ASSERT_TRUE(pool_.free(ptrs.back()));
  ptrs.pop_back();
  EXPECT_EQ(pool_.alloc(8), nullptr);
  void* again = pool_.alloc(60);
  ASSERT_NE(again, nullptr);
  ptrs.push_back(again);
  for (void* p : ptrs) ASSERT_TRUE(pool_.free(p));
  s = pool_.stats();
  EXPECT_EQ(s.pages_free, pages);
  EXPECT_EQ(verify(), "");
}

TEST_F(SlabTest, PageRunsSplitAndJoin) {
  make(40 * SlabPool::kPageSize);
  const std::size_t pages = pool_.stats().pages_total;
  std::vector<void*> singles;
  for (std::size_t i = 0; i < pages; ++i) {
    void* p = pool_.alloc(SlabPool::kPageSize);
    ASSERT_NE(p, nullptr);
    singles.push_back(p);
  }
  EXPECT_EQ(pool_.alloc(SlabPool::kPageSize), nullptr);
  // Every other page free: plenty of pages, but no two adjacent.
  for (std::size_t i = 0; i < pages; i += 2) ASSERT_TRUE(pool_.free(singles[i]));
  EXPECT_EQ(verify(), "");
  EXPECT_EQ(pool_.alloc(2 * SlabPool::kPageSize), nullptr);
  // Freeing the rest joins everything into one run again, in either order.
  for (std::size_t i = pages; i-- > 0;) {
    if (i % 2 == 0) continue;
    ASSERT_TRUE(pool_.free(singles[i]));
    ASSERT_EQ(verify(), "");
  }
  EXPECT_EQ(pool_.stats().pages_free, pages);
  void* all = pool_.alloc(pages * SlabPool::kPageSize);
  ASSERT_NE(all, nullptr);
  EXPECT_EQ(pool_.stats().pages_free, 0u);
  ASSERT_TRUE(pool_.free(all));
  EXPECT_EQ(verify(), "");
}

TEST_F(SlabTest, BadFreesAreRefusedAndCounted) {
  make(64 * 1024);
  auto* small = static_cast<char*>(pool_.alloc(32));
  auto* big = static_cast<char*>(pool_.alloc(3 * SlabPool::kPageSize));
  ASSERT_NE(small, nullptr);
  ASSERT_NE(big, nullptr);
  EXPECT_TRUE(pool_.free(nullptr));
  EXPECT_FALSE(pool_.free(small + 4));                  // inside a chunk
  EXPECT_FALSE(pool_.free(small + 32));                 // a free chunk
  EXPECT_FALSE(pool_.free(big + SlabPool::kPageSize));  // a later page of a run
  EXPECT_FALSE(pool_.free(big + 100));                  // inside the first page
  int local = 0;
  EXPECT_FALSE(pool_.free(&local));  // not in the zone
  EXPECT_TRUE(pool_.free(small));
  EXPECT_FALSE(pool_.free(small));  // twice (its page is free now)
  EXPECT_TRUE(pool_.free(big));
  EXPECT_FALSE(pool_.free(big));
  EXPECT_EQ(pool_.stats().bad_frees, 7u);
  EXPECT_EQ(verify(), "");
  EXPECT_EQ(pool_.stats().pages_free, pool_.stats().pages_total);
}

TEST_F(SlabTest, AttachSeesTheSamePool) {
  make(64 * 1024);
  int* v = static_cast<int*>(pool_.alloc(sizeof(int)));
  *v = 42;
  pool_.set_data(v);
  SlabPool other;
  ASSERT_TRUE(other.attach(shm_.addr()));
  EXPECT_EQ(other.data(), v);
  EXPECT_EQ(other.stats().classes[0].used, 1u);
  // One lock: held through one handle, the other cannot take it.
  pool_.lock();
  EXPECT_FALSE(other.trylock());
  pool_.unlock();
  EXPECT_TRUE(other.trylock());
  other.unlock();
  EXPECT_TRUE(other.free(v));
  EXPECT_EQ(pool_.stats().classes[0].used, 0u);
}

// Random sizes, each allocation filled with its own pattern and checked
// before it is freed; the page table verified along the way.
TEST_F(SlabTest, RandomWorkloadKeepsContents) {
  make(256 * 1024);
  std::mt19937 rng(3);
  struct Live {
    unsigned char* p;
    std::size_t size;
    unsigned char fill;
  };
  std::vector<Live> live;
  std::size_t failures = 0;
  for (int step = 0; step < 20000; ++step) {
    if (live.empty() || rng() % 100 < 52) {
      const std::size_t size = rng() % 4 == 0 ? 1 + rng() % 12000 : 1 + rng() % 600;
      auto* p = static_cast<unsigned char*>(pool_.alloc(size));
      if (p == nullptr) {
        ++failures;
        continue;
      }
      const auto fill = static_cast<unsigned char>(rng());
      std::memset(p, fill, size);
      live.push_back({p, size, fill});
    } else {
      const std::size_t i = rng() % live.size();
      const Live l = live[i];
      live[i] = live.back();
      live.pop_back();
      for (std::size_t k = 0; k < l.size; ++k) ASSERT_EQ(l.p[k], l.fill) << "step " << step;
      ASSERT_TRUE(pool_.free(l.p));
    }
    if (step % 500 == 0) {
      ASSERT_EQ(verify(), "") << "step " << step;
    }
  }
  EXPECT_GT(failures, 0u);  // the zone did fill up at times
  for (const Live& l : live) {
    for (std::size_t k = 0; k < l.size; ++k) ASSERT_EQ(l.p[k], l.fill);
    ASSERT_TRUE(pool_.free(l.p));
  }
  EXPECT_EQ(verify(), "");
  SlabStats s = pool_.stats();
  EXPECT_EQ(s.pages_free, s.pages_total);
  EXPECT_EQ(s.bad_frees, 0u);
}

// Workers forked from the creator allocate and free at the same time through
// the pool's lock; each checks its own bytes. Afterwards nothing is lost.
TEST_F(SlabTest, ProcessesAllocateConcurrently) {
  make(512 * 1024);
  constexpr int kProcs = 4;
  // A start line, so the workers really overlap instead of running one
  // after another as they are forked.
  auto gate = SharedMemory::map(sizeof(std::atomic<int>));
  ASSERT_TRUE(gate);
  auto* ready = new (gate->addr()) std::atomic<int>(0);
  std::vector<pid_t> pids;
  for (int w = 0; w < kProcs; ++w) {
    pid_t pid = ::fork();
    ASSERT_NE(pid, -1);
    if (pid == 0) {
      std::mt19937 rng(100 + static_cast<unsigned>(w));
      struct Live {
        unsigned char* p;
        std::size_t size;
      };
      std::vector<Live> live;
      const auto fill = static_cast<unsigned char>(0x10 + w);
      int rc = 0;
      ready->fetch_add(1);
      while (ready->load() < kProcs) {
      }
      for (int step = 0; step < 200000 && rc == 0; ++step) {
        if (live.size() < 64 && (live.empty() || rng() % 100 < 55)) {
          const std::size_t size = rng() % 8 == 0 ? 1 + rng() % 10000 : 1 + rng() % 700;
          auto* p = static_cast<unsigned char*>(pool_.alloc(size));
          if (p == nullptr) {
            continue;  // full for now: another worker frees soon
          }
          std::memset(p, fill, size);
          live.push_back({p, size});
        } else {
          const std::size_t i = rng() % live.size();
          const Live l = live[i];
          live[i] = live.back();
          live.pop_back();
          for (std::size_t k = 0; k < l.size; ++k) {
            if (l.p[k] != fill) rc = 2;  // someone else wrote into our chunk
          }
          if (!pool_.free(l.p)) rc = 3;
        }
      }
      for (const Live& l : live) {
        for (std::size_t k = 0; k < l.size; ++k) {
          if (l.p[k] != fill) rc = 2;
        }
        if (!pool_.free(l.p)) rc = 3;
      }
      ::_exit(rc);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0);
  }
  EXPECT_EQ(verify(), "");
  SlabStats s = pool_.stats();
  EXPECT_EQ(s.pages_free, s.pages_total);
  EXPECT_EQ(s.bad_frees, 0u);
  std::uint64_t requests = s.page_requests;
  for (const auto& c : s.classes) {
    EXPECT_EQ(c.used, 0u);
    requests += c.requests;
  }
  // Every worker's allocations went through the shared counters.
  EXPECT_GT(requests, static_cast<std::uint64_t>(kProcs) * 5000);
}

}  // namespace
}  // namespace vigil
