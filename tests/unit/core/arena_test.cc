// Arena: bump allocation from an upstream resource, released at once, and
// the first block sized per use (a connection's arena is sized by its
// listener's pool_size).
#include "vigil/core/arena.h"

#include <gtest/gtest.h>

#include <memory_resource>
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

}  // namespace
}  // namespace vigil
