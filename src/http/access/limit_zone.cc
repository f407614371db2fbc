// The shared tree + LRU queue of the limit zones (see limit_zone.h).
#include "http/access/limit_zone.h"

#include <cstddef>
#include <cstring>
#include <new>
#include <type_traits>

#include "http/core/request.h"
#include "http/core/variables.h"
#include "vigil/core/log.h"

namespace vigil::http {
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

std::string_view limit_key(Request& r, const VarTemplate& key, char* buf) {
  if (key.length(r) > kMaxLimitKey) {
    const Connection& c = *r.c;
    VIGIL_LOG(*c.log, kError, 0, "*%llu the value of the \"%s\" key is more than %zu bytes",
              static_cast<unsigned long long>(c.number), key.source().c_str(), kMaxLimitKey);
    return {};
  }
  return std::string_view(buf, static_cast<std::size_t>(key.write(r, buf) - buf));
}

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

bool put_limit_status(LimitStatus status, VarSink& out) {
  // Indexed by LimitStatus.
  static constexpr std::string_view kNames[] = {
      "", "PASSED", "DELAYED", "REJECTED", "DELAYED_DRY_RUN", "REJECTED_DRY_RUN",
  };
  if (status == LimitStatus::kNone) return false;
  out.put(kNames[static_cast<std::size_t>(status)]);
  return true;
}

}  // namespace vigil::http
