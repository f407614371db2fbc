// The red-black tree (src/core/rbtree.cc) against std::multimap: random
// inserts and erases with many equal keys, the invariants and the whole
// in-order sequence checked after every operation; the secondary-order and
// wrap-safe insert functions; and a tree living in shared memory that a forked
// child changes.

#include "core/rbtree.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "core/shm.h"

namespace vigil {
namespace {

struct Entry {
  RbNode node;  // first: an RbNode* is the Entry*
  int id = 0;
  bool in = false;
  char name[16] = {};
};

Entry* entry(RbNode* n) {
  return reinterpret_cast<Entry*>(n);
}

std::vector<int> in_order(const RbTree& t) {
  std::vector<int> ids;
  for (RbNode* n = t.min(); n != nullptr; n = t.next(n)) ids.push_back(entry(n)->id);
  return ids;
}

TEST(RbTree, EmptyTree) {
  RbTree t;
  RbNode sentinel;
  t.init(&sentinel);
  EXPECT_TRUE(t.empty());
  EXPECT_EQ(t.min(), nullptr);
  EXPECT_EQ(t.find(1), nullptr);
  EXPECT_EQ(t.check(), 0);
}

TEST(RbTree, AscendingDescendingAndSingle) {
  for (int order = 0; order < 2; ++order) {
    std::vector<Entry> es(1000);
    RbTree t;
    RbNode sentinel;
    t.init(&sentinel);
    for (int i = 0; i < 1000; ++i) {
      es[i].id = i;
      es[i].node.key = order == 0 ? i : 1000 - i;
      t.insert(&es[i].node);
      ASSERT_EQ(t.check(), i + 1);
    }
    EXPECT_EQ(entry(t.min())->id, order == 0 ? 0 : 999);
    for (int i = 0; i < 1000; ++i) {
      t.erase(&es[i].node);
      ASSERT_EQ(t.check(), 999 - i);
    }
    EXPECT_TRUE(t.empty());
  }
}

// Random operations over a small key range (many duplicates); std::multimap
// keeps equal keys in insertion order, and so must insert_value.
TEST(RbTree, RandomAgainstMultimap) {
  for (unsigned seed = 1; seed <= 4; ++seed) {
    std::mt19937_64 rng(seed);
    constexpr int kEntries = 300;
    std::vector<Entry> es(kEntries);
    for (int i = 0; i < kEntries; ++i) es[i].id = i;
    RbTree t;
    RbNode sentinel;
    t.init(&sentinel);
    std::multimap<std::uint64_t, int> model;
    std::vector<int> live;
    const std::uint64_t key_range = seed % 2 == 0 ? 50 : 1u << 20;

    for (int step = 0; step < 4000; ++step) {
      const bool grow = live.size() < kEntries && (live.empty() || rng() % 100 < 55);
      if (grow) {
        int id;
        do {
          id = static_cast<int>(rng() % kEntries);
        } while (es[id].in);
        es[id].node.key = rng() % key_range;
        es[id].in = true;
        t.insert(&es[id].node);
        model.emplace(es[id].node.key, id);
        live.push_back(id);
      } else {
        const std::size_t pick = rng() % live.size();
        const int id = live[pick];
        live[pick] = live.back();
        live.pop_back();
        auto [lo, hi] = model.equal_range(es[id].node.key);
        for (auto it = lo; it != hi; ++it) {
          if (it->second == id) {
            model.erase(it);
            break;
          }
        }
        t.erase(&es[id].node);
        es[id].in = false;
      }
      ASSERT_EQ(t.check(), static_cast<long>(model.size())) << "seed " << seed << " step " << step;
      std::vector<int> want;
      for (const auto& [k, id] : model) want.push_back(id);
      ASSERT_EQ(in_order(t), want) << "seed " << seed << " step " << step;

      const std::uint64_t probe = rng() % key_range;
      auto it = model.lower_bound(probe);
      RbNode* found = t.find(probe);
      if (it == model.end() || it->first != probe) {
        ASSERT_EQ(found, nullptr);
      } else {
        ASSERT_NE(found, nullptr);
        ASSERT_EQ(entry(found)->id, it->second);
      }
    }
  }
}

// Hashed string keys, as the limit zones and the session cache use them:
// equal hashes are ordered by the string.
bool name_less(const RbNode* a, const RbNode* b) {
  return std::strcmp(reinterpret_cast<const Entry*>(a)->name,
                     reinterpret_cast<const Entry*>(b)->name) < 0;
}

TEST(RbTree, SecondaryOrderOnEqualKeys) {
  std::mt19937_64 rng(7);
  std::vector<Entry> es(400);
  RbTree t;
  RbNode sentinel;
  t.init(&sentinel, &RbTree::insert_by<name_less>);
  std::map<std::pair<std::uint64_t, std::string>, int> model;
  for (int i = 0; i < 400; ++i) {
    es[i].id = i;
    std::snprintf(es[i].name, sizeof(es[i].name), "n%05d", static_cast<int>(rng() % 100000));
    es[i].node.key = rng() % 8;  // a hash with many collisions
    if (!model.emplace(std::make_pair(es[i].node.key, std::string(es[i].name)), i).second) {
      continue;  // a duplicate (key, name): not inserted
    }
    es[i].in = true;
    t.insert(&es[i].node);
    ASSERT_GT(t.check(), 0);
  }
  std::vector<int> want;
  for (const auto& [k, id] : model) want.push_back(id);
  EXPECT_EQ(in_order(t), want);

  for (const auto& [k, id] : model) {
    const std::string& name = k.second;
    RbNode* n = t.find_by(k.first, [&](const RbNode* node) {
      return std::strcmp(name.c_str(), reinterpret_cast<const Entry*>(node)->name);
    });
    ASSERT_NE(n, nullptr);
    EXPECT_EQ(entry(n)->id, id);
  }
  // Same hash, a name nobody has.
  EXPECT_EQ(t.find_by(3,
                      [](const RbNode* node) {
                        return std::strcmp("zzz", reinterpret_cast<const Entry*>(node)->name);
                      }),
            nullptr);

  // Erase half, then lookups still find exactly the rest.
  int erased = 0;
  for (auto& e : es) {
    if (e.in && e.id % 2 == 0) {
      t.erase(&e.node);
      e.in = false;
      ++erased;
      ASSERT_GE(t.check(), 0);
    }
  }
  EXPECT_EQ(t.check(), static_cast<long>(model.size()) - erased);
  for (const auto& [k, id] : model) {
    const std::string& name = k.second;
    RbNode* n = t.find_by(k.first, [&](const RbNode* node) {
      return std::strcmp(name.c_str(), reinterpret_cast<const Entry*>(node)->name);
    });
    EXPECT_EQ(n != nullptr, es[id].in) << name;
    if (n != nullptr) {
      EXPECT_EQ(entry(n)->id, id);
    }
  }
}

// Deadlines around the wrap of the 64-bit counter stay in deadline order.
TEST(RbTree, TimerOrderAcrossWrap) {
  std::mt19937_64 rng(11);
  const std::uint64_t base = ~std::uint64_t{0} - 5000;
  std::vector<Entry> es(500);
  RbTree t;
  RbNode sentinel;
  t.init(&sentinel, &RbTree::insert_timer_value);
  std::multimap<std::uint64_t, int> model;  // by offset from base
  for (int i = 0; i < 500; ++i) {
    es[i].id = i;
    const std::uint64_t off = rng() % 10000;
    es[i].node.key = base + off;  // about half of them wrap past 0
    t.insert(&es[i].node);
    model.emplace(off, i);
    ASSERT_EQ(t.check(false), i + 1);
  }
  std::vector<int> want;
  for (const auto& [k, id] : model) want.push_back(id);
  EXPECT_EQ(in_order(t), want);
  EXPECT_EQ(entry(t.min())->id, model.begin()->second);
  // The plain key order would put the wrapped ones first: it does not hold.
  EXPECT_EQ(t.check(true), -1);
}

// The tree, its sentinel and the nodes in a shared mapping: a forked child
// inserts and erases, the parent sees a valid tree with the child's changes.
TEST(RbTree, InSharedMemoryAcrossFork) {
  struct Area {
    RbTree tree;
    RbNode sentinel;
    Entry entries[256];
  };
  auto shm = SharedMemory::map(sizeof(Area));
  ASSERT_TRUE(shm) << shm.status().to_string();
  Area* a = new (shm->addr()) Area();
  a->tree.init(&a->sentinel);
  for (int i = 0; i < 128; ++i) {
    a->entries[i].id = i;
    a->entries[i].node.key = static_cast<std::uint64_t>(i * 7 % 128);
    a->tree.insert(&a->entries[i].node);
  }
  pid_t pid = ::fork();
  ASSERT_NE(pid, -1);
  if (pid == 0) {
    for (int i = 128; i < 256; ++i) {
      a->entries[i].id = i;
      a->entries[i].node.key = static_cast<std::uint64_t>(i);
      a->tree.insert(&a->entries[i].node);
    }
    for (int i = 0; i < 128; i += 2) a->tree.erase(&a->entries[i].node);
    ::_exit(a->tree.check() == 192 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(a->tree.check(), 192);
  EXPECT_EQ(a->tree.find(0), nullptr);  // entry 0 (key 0) was erased by the child
  ASSERT_NE(a->tree.find(200), nullptr);
  EXPECT_EQ(entry(a->tree.find(200))->id, 200);
  EXPECT_EQ(entry(a->tree.find(7))->id, 1);  // key 7 is entry 1, still there
}

}  // namespace
}  // namespace vigil
