#pragma once
// A generic intrusive red-black tree (nginx's ngx_rbtree_t): the node is a
// member of the caller's struct, the tree never allocates, and the leaves are
// one sentinel node per tree. Limit zones and the TLS session cache keep one
// in a shared zone (see core/shm_zone.h); timers could use it too.
//
// Shared memory: RbTree, its sentinel and its nodes may all live in a shared
// zone. Raw pointers are fine there because every process that sees the zone
// is forked from the master after the zone was mapped, so the zone is at the
// same address in all of them. The insert function pointer is the same for
// the same reason (one binary). Keep the sentinel in the zone next to the
// tree: every leaf pointer points at it and erase writes its parent link, so
// all processes must see the one sentinel (one per tree, never a global: two
// trees sharing a sentinel would race on that link).
//
// Concurrency: none. A tree in a zone is guarded by the zone's lock
// (SlabPool::lock()) around every call.
//
//   struct Entry { RbNode node; ... };           // node first: a cast gets the Entry
//   RbTree tree; RbNode sentinel;                // e.g. both in the zone's header
//   tree.init(&sentinel);                        // or init(&sentinel, my_insert)
//   entry->node.key = hash; tree.insert(&entry->node);
//   RbNode* n = tree.find(hash);                 // first node with that key
//   tree.erase(n);

#include <cstdint>

namespace vigil {

struct RbNode {
  std::uint64_t key = 0;
  RbNode* left = nullptr;
  RbNode* right = nullptr;
  RbNode* parent = nullptr;
  std::uint8_t red = 0;  // 1 red, 0 black
  // Free for the owner (nginx's node->data: a short key's length, a flag).
  std::uint8_t data = 0;
};

// Places `node` (key and any secondary value already set) as a leaf below
// `root`, setting node->parent, node->left/right = sentinel and node->red = 1.
// It must only choose the position; the tree rebalances afterwards.
using RbInsertFn = void (*)(RbNode* root, RbNode* node, RbNode* sentinel);

class RbTree {
 public:
  // Makes an empty tree whose leaves are `sentinel` (colored black here).
  // The sentinel must outlive the tree and stay at the same address.
  void init(RbNode* sentinel, RbInsertFn fn = &insert_value);

  void insert(RbNode* node);
  // `node` must be in this tree. Its fields are garbage afterwards.
  void erase(RbNode* node);

  bool empty() const { return root_ == sentinel_; }
  RbNode* root() const { return root_; }
  RbNode* sentinel() const { return sentinel_; }
  RbInsertFn insert_fn() const { return insert_; }

  // Leftmost node, or nullptr when empty.
  RbNode* min() const;
  // In-order successor of `node`, or nullptr after the last.
  RbNode* next(RbNode* node) const;
  // The first node in order with this key, or nullptr.
  RbNode* find(std::uint64_t key) const;

  // Lookup by key, then a secondary comparison on equal keys: `cmp(node)`
  // returns <0 when the wanted item sorts before `node`, 0 on match, >0
  // after. Pair it with insert_by<Less> using the same order.
  template <class Cmp>
  RbNode* find_by(std::uint64_t key, Cmp&& cmp) const {
    RbNode* n = root_;
    while (n != sentinel_) {
      if (key != n->key) {
        n = key < n->key ? n->left : n->right;
        continue;
      }
      const int c = cmp(n);
      if (c == 0) return n;
      n = c < 0 ? n->left : n->right;
    }
    return nullptr;
  }

  // Default insert: by key; equal keys go to the right (insertion order kept
  // among equals, as a multimap).
  static void insert_value(RbNode* root, RbNode* node, RbNode* sentinel);
  // Keys are deadlines compared wrap-safely ((int64)(a - b) < 0), nginx's
  // ngx_rbtree_insert_timer_value.
  static void insert_timer_value(RbNode* root, RbNode* node, RbNode* sentinel);
  // By key, then by `Less(a, b)` on equal keys (nginx's
  // ngx_str_rbtree_insert_value, for hashed string keys): returns an
  // RbInsertFn, one per Less.
  template <bool (*Less)(const RbNode* a, const RbNode* b)>
  static void insert_by(RbNode* root, RbNode* node, RbNode* sentinel) {
    RbNode** link;
    RbNode* t = root;
    for (;;) {
      if (node->key != t->key) {
        link = node->key < t->key ? &t->left : &t->right;
      } else {
        link = Less(node, t) ? &t->left : &t->right;
      }
      if (*link == sentinel) break;
      t = *link;
    }
    *link = node;
    node->parent = t;
    node->left = sentinel;
    node->right = sentinel;
    node->red = 1;
  }

  // Red-black properties, parent links and sentinel color; with
  // `ordered_by_key` also that in-order keys never decrease (false for the
  // timer order, whose keys wrap). Returns the node count, or -1 when broken.
  long check(bool ordered_by_key = true) const;

 private:
  void rotate_left(RbNode* x);
  void rotate_right(RbNode* x);

  RbNode* root_ = nullptr;
  RbNode* sentinel_ = nullptr;
  RbInsertFn insert_ = nullptr;
};

}  // namespace vigil
