#pragma once
// The index of a cache kept in a shared-memory zone: its entries in a
// red-black tree by key and on a list from the most to the least recently
// used, the head allocated from the zone's slab pool when the zone is first
// mapped (the TLS session cache, the OCSP cache). The caller holds the
// pool's lock around every use. Internal to src/.

#include <new>
#include <string>

#include "core/rbtree.h"
#include "core/shm_zone.h"
#include "core/slab.h"
#include "vigil/core/result.h"

namespace vigil {

struct LruLink {
  LruLink* prev;
  LruLink* next;

  void unlink() {
    prev->next = next;
    next->prev = prev;
  }
};

// An entry type E starts with its RbNode (a cast from the tree's node gets
// it) and has an LruLink; Head types derive from ShmLruIndex.
struct ShmLruIndex {
  RbTree tree;
  RbNode sentinel;
  LruLink lru;  // next: the most recently used, prev: the least

  bool empty() const { return lru.prev == &lru; }
  LruLink* oldest() const { return lru.prev; }
  void push_front(LruLink* l) {
    l->next = lru.next;
    l->prev = &lru;
    lru.next->prev = l;
    lru.next = l;
  }
  void touch(LruLink* l) {
    l->unlink();
    push_front(l);
  }
  // Takes the entry whose node and link these are out of the index (the
  // caller frees its memory).
  void remove(RbNode* node, LruLink* l) {
    tree.erase(node);
    l->unlink();
  }
};

// A zone's init for a cache whose head is Head: a reload that kept the zone
// keeps its entries; otherwise the head is made in the zone's pool. `what`
// names the cache in the error ("the OCSP cache").
template <typename Head>
Status init_shm_lru_zone(ShmZone& zone, void* old_data, RbInsertFn insert, const char* what) {
  if (old_data != nullptr) {
    zone.set_data(old_data);
    return Status::ok();
  }
  SlabPool& pool = zone.pool();
  void* mem = pool.calloc(sizeof(Head));
  if (mem == nullptr) {
    return Status::error(std::string("no room for ") + what + " in zone \"" + zone.name() + "\"");
  }
  auto* head = new (mem) Head();
  head->tree.init(&head->sentinel, insert);
  head->lru.prev = head->lru.next = &head->lru;
  pool.set_data(head);
  zone.set_data(head);
  return Status::ok();
}

}  // namespace vigil
