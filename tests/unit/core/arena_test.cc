// Arena: bump allocation from an upstream resource, released at once, and
// the first block sized per use (a connection's arena is sized by its
// listener's pool_size).
#include "vigil/core/arena.h"

#include <gtest/gtest.h>

#include <memory_resource>
#include <new>
#include <string>
#include <vector>

namespace vigil {
namespace {

class Recording : public std::pmr::memory_resource {
 public:
  std::vector<std::size_t> sizes;

 private:
  void* do_allocate(std::size_t n, std::size_t a) override {
    sizes.push_back(n);
    return std::pmr::new_delete_resource()->allocate(n, a);
  }
  void do_deallocate(void* p, std::size_t n, std::size_t a) override {
    std::pmr::new_delete_resource()->deallocate(p, n, a);
  }
  bool do_is_equal(const memory_resource& o) const noexcept override { return this == &o; }
};

TEST(Arena, FirstBlockFollowsTheInitialSize) {
  Recording up;
  Arena arena(512, &up);
  (void)arena.alloc(16);
  ASSERT_EQ(up.sizes.size(), 1u);
  const std::size_t big = up.sizes[0];
  EXPECT_GE(big, 512u);

  arena.reset(128);  // everything released, next block smaller
  (void)arena.alloc(16);
  ASSERT_EQ(up.sizes.size(), 2u);
  EXPECT_GE(up.sizes[1], 128u);
  EXPECT_LT(up.sizes[1], big);

  // Allocations beyond the first block still succeed (a new block).
  for (int i = 0; i < 10; ++i) EXPECT_NE(arena.alloc(100), nullptr);
  EXPECT_GT(up.sizes.size(), 2u);
}

TEST(Arena, DupCopies) {
  Arena arena(256);
  const char text[] = "abc";
  char* d = arena.dup(text, 3);
  EXPECT_EQ(std::string(d, 3), "abc");
}

// An upstream that gives `budget` bytes and then fails as std::pmr does: by
// throwing std::bad_alloc.
class Limited : public std::pmr::memory_resource {
 public:
  explicit Limited(std::size_t budget) : budget_(budget) {}
  std::size_t failures = 0;
  void set_budget(std::size_t b) { budget_ = b; }

 private:
  void* do_allocate(std::size_t n, std::size_t a) override {
    if (n > budget_) {
      ++failures;
      throw std::bad_alloc();
    }
    budget_ -= n;
    return std::pmr::new_delete_resource()->allocate(n, a);
  }
  void do_deallocate(void* p, std::size_t n, std::size_t a) override {
    std::pmr::new_delete_resource()->deallocate(p, n, a);
  }
  bool do_is_equal(const memory_resource& o) const noexcept override { return this == &o; }
  std::size_t budget_;
};

struct Pair {
  int a = 1;
  int b = 2;
};

TEST(Arena, AllocationFailureIsNullNotAnException) {
  Limited up(0);  // nothing at all
  Arena arena(256, &up);
  static_assert(noexcept(arena.alloc(1)));
  static_assert(noexcept(arena.dup("x", 1)));
  static_assert(noexcept(arena.make<Pair>()));
  void* p = reinterpret_cast<void*>(1);
  EXPECT_NO_THROW(p = arena.alloc(64));
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(arena.make<Pair>(), nullptr);
  EXPECT_EQ(arena.dup("abc", 3), nullptr);
  EXPECT_EQ(up.failures, 3u);

  // Memory again: the same arena works.
  up.set_budget(1 << 20);
  Pair* pair = arena.make<Pair>();
  ASSERT_NE(pair, nullptr);
  EXPECT_EQ(pair->b, 2);
  char* d = arena.dup("abc", 3);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(std::string(d, 3), "abc");
}

TEST(Arena, FailsWhenTheBlocksRunOutMidway) {
  Limited up(4096);
  Arena arena(1024, &up);
  std::size_t ok = 0;
  void* last = nullptr;
  for (int i = 0; i < 100; ++i) {
    last = arena.alloc(512);
    if (last == nullptr) break;
    ++ok;
  }
  EXPECT_EQ(last, nullptr) << "4 KiB cannot hold 100 x 512 bytes";
  EXPECT_GE(ok, 1u);
  EXPECT_LT(ok, 8u);
  EXPECT_GE(up.failures, 1u);
}

}  // namespace
}  // namespace vigil
