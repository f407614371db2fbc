// The shared tree + LRU queue of the limit zones (see limit_table.h).
#include "core/limit_table.h"

#include <cstddef>
#include <cstring>
#include <new>
#include <type_traits>

namespace vigil {
namespace {

int compare_keys(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return a.size() < b.size() ? -1 : 1;
  return std::memcmp(a.data(), b.data(), a.size());
}

bool key_less(const RbNode* a, const RbNode* b) {
  return compare_keys(reinterpret_cast<const LimitNode*>(a)->key_view(),
                      reinterpret_cast<const LimitNode*>(b)->key_view()) < 0;
}

}  // namespace

std::uint64_t limit_key_hash(std::string_view key) {
  // FNV-1a: the keys are short (4 or 16 bytes of an address, mostly).
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char ch : key) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  return h;
}

LimitTable::LimitTable(ShmZone& zone)
    : pool_(&zone.pool()), sh_(static_cast<LimitShared*>(zone.pool().data())) {}

Status LimitTable::init_zone(ShmZone& zone) {
  SlabPool& pool = zone.pool();
  if (pool.data() != nullptr) return Status::ok();  // kept across a reload
  void* mem = pool.calloc(sizeof(LimitShared));
  if (mem == nullptr) return Status::error("zone \"" + zone.name() + "\" is too small");
  // Shared memory is unmapped or given back to the slab pool, never destroyed.
  static_assert(std::is_trivially_destructible_v<LimitShared>);
  auto* sh = new (mem) LimitShared();
  sh->tree.init(&sh->sentinel, &RbTree::insert_by<key_less>);
  sh->queue.next = &sh->queue;
  sh->queue.prev = &sh->queue;
  pool.set_data(sh);
  return Status::ok();
}

LimitNode* LimitTable::find(std::uint64_t hash, std::string_view key) const {
  RbNode* n = sh_->tree.find_by(hash, [key](const RbNode* node) {
    return compare_keys(key, reinterpret_cast<const LimitNode*>(node)->key_view());
  });
  return reinterpret_cast<LimitNode*>(n);
}

LimitNode* LimitTable::insert(std::uint64_t hash, std::string_view key) {
  if (key.size() > kMaxLimitKey) return nullptr;
  void* mem = pool_->calloc_locked(offsetof(LimitNode, key) + key.size());
  if (mem == nullptr) return nullptr;
  static_assert(std::is_trivially_destructible_v<LimitNode>);  // freed to the slab pool as is
  auto* n = new (mem) LimitNode();
  n->len = static_cast<std::uint16_t>(key.size());
  std::memcpy(n->key, key.data(), key.size());
  n->rb.key = hash;
  sh_->tree.insert(&n->rb);
  LimitNode& q = sh_->queue;
  n->prev = &q;
  n->next = q.next;
  q.next->prev = n;
  q.next = n;
  return n;
}

void LimitTable::remove(LimitNode* n) {
  sh_->tree.erase(&n->rb);
  n->prev->next = n->next;
  n->next->prev = n->prev;
  pool_->free_locked(n);
}

void LimitTable::touch(LimitNode* n) {
  LimitNode& q = sh_->queue;
  if (q.next == n) return;
  n->prev->next = n->next;
  n->next->prev = n->prev;
  n->prev = &q;
  n->next = q.next;
  q.next->prev = n;
  q.next = n;
}

LimitNode* LimitTable::oldest() const {
  LimitNode& q = sh_->queue;
  return q.prev == &q ? nullptr : q.prev;
}

std::size_t LimitTable::size() const {
  std::size_t n = 0;
  for (const LimitNode* p = sh_->queue.next; p != &sh_->queue; p = p->next) ++n;
  return n;
}

bool limit_conn_acquire(LimitTable& t, std::uint64_t hash, std::string_view key, std::uint32_t max,
                        LimitNode** node) {
  LimitNode* n = t.find(hash, key);
  if (n == nullptr) {
    n = t.insert(hash, key);
    if (n == nullptr) return false;
  } else if (n->count >= max) {
    return false;
  }
  ++n->count;
  *node = n;
  return true;
}

void limit_conn_release(LimitTable& t, LimitNode* n) {
  if (n->count > 0) --n->count;
  if (n->count == 0) t.remove(n);
}

}  // namespace vigil
