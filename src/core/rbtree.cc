// The red-black algorithms of CLRS (chapter 13) with a sentinel leaf: the
// sentinel is always black and stands for every nil, so the fix-ups read its
// color without checks; erase may write its parent link (x may be the
// sentinel), which is why each tree has its own.

#include "core/rbtree.h"

namespace vigil {

void RbTree::init(RbNode* sentinel, RbInsertFn fn) {
  sentinel->red = 0;
  sentinel->left = sentinel->right = sentinel->parent = sentinel;
  sentinel_ = sentinel;
  root_ = sentinel;
  insert_ = fn != nullptr ? fn : &insert_value;
}

void RbTree::rotate_left(RbNode* x) {
  RbNode* y = x->right;
  x->right = y->left;
  if (y->left != sentinel_) y->left->parent = x;
  y->parent = x->parent;
  if (x == root_) {
    root_ = y;
  } else if (x == x->parent->left) {
    x->parent->left = y;
  } else {
    x->parent->right = y;
  }
  y->left = x;
  x->parent = y;
}

void RbTree::rotate_right(RbNode* x) {
  RbNode* y = x->left;
  x->left = y->right;
  if (y->right != sentinel_) y->right->parent = x;
  y->parent = x->parent;
  if (x == root_) {
    root_ = y;
  } else if (x == x->parent->right) {
    x->parent->right = y;
  } else {
    x->parent->left = y;
  }
  y->right = x;
  x->parent = y;
}

void RbTree::insert(RbNode* node) {
  if (root_ == sentinel_) {
    node->parent = nullptr;
    node->left = node->right = sentinel_;
    node->red = 0;
    root_ = node;
    return;
  }
  insert_(root_, node, sentinel_);

  // Restore "no red node has a red child", walking up while the parent is red.
  while (node != root_ && node->parent->red) {
    RbNode* parent = node->parent;
    RbNode* grand = parent->parent;
    if (parent == grand->left) {
      RbNode* uncle = grand->right;
      if (uncle->red) {
        parent->red = 0;
        uncle->red = 0;
        grand->red = 1;
        node = grand;
        continue;
      }
      if (node == parent->right) {
        node = parent;
        rotate_left(node);
        parent = node->parent;
      }
      parent->red = 0;
      grand->red = 1;
      rotate_right(grand);
    } else {
      RbNode* uncle = grand->left;
      if (uncle->red) {
        parent->red = 0;
        uncle->red = 0;
        grand->red = 1;
        node = grand;
        continue;
      }
      if (node == parent->left) {
        node = parent;
        rotate_right(node);
        parent = node->parent;
      }
      parent->red = 0;
      grand->red = 1;
      rotate_left(grand);
    }
  }
  root_->red = 0;
}

void RbTree::erase(RbNode* node) {
  // y: the node that leaves its place (node itself, or its successor when it
  // has two children); x: the child that takes y's place (maybe the sentinel).
  RbNode* y = node;
  RbNode* x;
  if (node->left == sentinel_) {
    x = node->right;
  } else if (node->right == sentinel_) {
    x = node->left;
  } else {
    y = node->right;
    while (y->left != sentinel_) y = y->left;
    x = y->right;
  }

  if (y == root_) {
    root_ = x;
    x->red = 0;
    x->parent = nullptr;
    node->left = node->right = node->parent = nullptr;
    return;
  }

  const bool y_red = y->red;
  if (y == y->parent->left) {
    y->parent->left = x;
  } else {
    y->parent->right = x;
  }

  if (y == node) {
    x->parent = y->parent;
  } else {
    // The successor takes node's place, color and links.
    x->parent = (y->parent == node) ? y : y->parent;
    y->left = node->left;
    y->right = node->right;
    y->parent = node->parent;
    y->red = node->red;
    if (node == root_) {
      root_ = y;
    } else if (node == node->parent->left) {
      node->parent->left = y;
    } else {
      node->parent->right = y;
    }
    if (y->left != sentinel_) y->left->parent = y;
    if (y->right != sentinel_) y->right->parent = y;
  }
  node->left = node->right = node->parent = nullptr;
  node->key = 0;

  if (y_red) return;

  // A black node left: x carries an extra black until it reaches a red node
  // or the root.
  while (x != root_ && !x->red) {
    RbNode* parent = x->parent;
    if (x == parent->left) {
      RbNode* w = parent->right;
      if (w->red) {
        w->red = 0;
        parent->red = 1;
        rotate_left(parent);
        w = parent->right;
      }
      if (!w->left->red && !w->right->red) {
        w->red = 1;
        x = parent;
        continue;
      }
      if (!w->right->red) {
        w->left->red = 0;
        w->red = 1;
        rotate_right(w);
        w = parent->right;
      }
      w->red = parent->red;
      parent->red = 0;
      w->right->red = 0;
      rotate_left(parent);
      x = root_;
    } else {
      RbNode* w = parent->left;
      if (w->red) {
        w->red = 0;
        parent->red = 1;
        rotate_right(parent);
        w = parent->left;
      }
      if (!w->left->red && !w->right->red) {
        w->red = 1;
        x = parent;
        continue;
      }
      if (!w->left->red) {
        w->right->red = 0;
        w->red = 1;
        rotate_left(w);
        w = parent->left;
      }
      w->red = parent->red;
      parent->red = 0;
      w->left->red = 0;
      rotate_right(parent);
      x = root_;
    }
  }
  x->red = 0;
}

RbNode* RbTree::min() const {
  if (root_ == sentinel_) return nullptr;
  RbNode* n = root_;
  while (n->left != sentinel_) n = n->left;
  return n;
}

RbNode* RbTree::next(RbNode* node) const {
  if (node->right != sentinel_) {
    RbNode* n = node->right;
    while (n->left != sentinel_) n = n->left;
    return n;
  }
  for (;;) {
    RbNode* parent = node->parent;
    if (node == root_ || parent == nullptr) return nullptr;
    if (node == parent->left) return parent;
    node = parent;
  }
}

RbNode* RbTree::find(std::uint64_t key) const {
  RbNode* n = root_;
  RbNode* found = nullptr;
  // Keep descending left after a match: equal keys may sit on both sides of
  // a rotation, and the first in order is wanted.
  while (n != sentinel_) {
    if (key < n->key) {
      n = n->left;
    } else if (key > n->key) {
      n = n->right;
    } else {
      found = n;
      n = n->left;
    }
  }
  return found;
}

void RbTree::insert_value(RbNode* root, RbNode* node, RbNode* sentinel) {
  RbNode* t = root;
  RbNode** link;
  for (;;) {
    link = node->key < t->key ? &t->left : &t->right;
    if (*link == sentinel) break;
    t = *link;
  }
  *link = node;
  node->parent = t;
  node->left = node->right = sentinel;
  node->red = 1;
}

void RbTree::insert_timer_value(RbNode* root, RbNode* node, RbNode* sentinel) {
  RbNode* t = root;
  RbNode** link;
  for (;;) {
    const bool before = static_cast<std::int64_t>(node->key - t->key) < 0;
    link = before ? &t->left : &t->right;
    if (*link == sentinel) break;
    t = *link;
  }
  *link = node;
  node->parent = t;
  node->left = node->right = sentinel;
  node->red = 1;
}

namespace {

// Black height of `n`'s subtree, or -1 when a property fails below it.
long check_node(const RbTree& t, const RbNode* n, const RbNode* parent, bool ordered,
                const RbNode*& prev, long& count) {
  const RbNode* s = t.sentinel();
  if (n == s) return 1;
  if (n == nullptr || n->parent != parent) return -1;
  if (n->red && (n->left->red || n->right->red)) return -1;
  const long lh = check_node(t, n->left, n, ordered, prev, count);
  if (lh < 0) return -1;
  if (ordered && prev != nullptr && n->key < prev->key) return -1;
  prev = n;
  ++count;
  const long rh = check_node(t, n->right, n, ordered, prev, count);
  if (rh < 0 || rh != lh) return -1;
  return lh + (n->red ? 0 : 1);
}

}  // namespace

long RbTree::check(bool ordered_by_key) const {
  if (sentinel_ == nullptr || sentinel_->red) return -1;
  if (root_ == sentinel_) return 0;
  if (root_->red || root_->parent != nullptr) return -1;
  const RbNode* prev = nullptr;
  long count = 0;
  if (check_node(*this, root_, nullptr, ordered_by_key, prev, count) < 0) return -1;
  return count;
}

}  // namespace vigil
