#include "event/tls/session_cache.h"

#include <openssl/err.h>

#include <cstring>
#include <ctime>
#include <new>
#include <type_traits>

#include "core/rbtree.h"
#include "core/shm_lru.h"
#include "core/slab.h"
#include "event/tls/context.h"
#include "event/tls/tls.h"
#include "vigil/core/clock.h"

namespace vigil {
namespace {

const int kZoneTag = 0;  // our key among the zones' owners

// A session longer than this is not cached (a client certificate chain makes
// sessions big; nginx caps them the same way, at 4k).
constexpr std::size_t kMaxSession = 4096;
constexpr unsigned kMaxId = SSL_MAX_SSL_SESSION_ID_LENGTH;  // 32

// One session in the zone: the node, the LRU link, then the DER bytes.
struct Entry {
  RbNode node;  // first: a cast from the tree's node gets the entry
  LruLink lru;
  std::time_t expires;
  std::uint32_t der_len;
  std::uint8_t id_len;
  unsigned char id[kMaxId];
  unsigned char* der() { return reinterpret_cast<unsigned char*>(this + 1); }
};

// The zone's shared part, allocated from its pool at first map.
struct Shared : ShmLruIndex {
  TlsSessionCacheStats stats;
};

Entry* entry_of_lru(LruLink* l) {
  return reinterpret_cast<Entry*>(reinterpret_cast<char*>(l) - offsetof(Entry, lru));
}

std::uint64_t hash_id(const unsigned char* id, unsigned len) {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned i = 0; i < len; ++i) {
    h ^= id[i];
    h *= 1099511628211ull;
  }
  return h;
}

void drop(SlabPool& pool, Shared& s, Entry* e) {
  s.remove(&e->node, &e->lru);
  pool.free_locked(e);
  --s.stats.entries;
}

Entry* find(Shared& s, const unsigned char* id, unsigned len) {
  RbNode* n = s.tree.find_by(hash_id(id, len), [&](const RbNode* node) {
    const auto* e = reinterpret_cast<const Entry*>(node);
    if (len != e->id_len) return len < e->id_len ? -1 : 1;
    return std::memcmp(id, e->id, len);
  });
  return reinterpret_cast<Entry*>(n);
}

bool entry_less(const RbNode* a, const RbNode* b) {
  const auto* x = reinterpret_cast<const Entry*>(a);
  const auto* y = reinterpret_cast<const Entry*>(b);
  if (x->id_len != y->id_len) return x->id_len < y->id_len;
  return std::memcmp(x->id, y->id, x->id_len) < 0;
}

// Up to `n` expired sessions from the cold end of the LRU list; with
// `force`, the coldest one even if it is still valid (eviction).
void expire(SlabPool& pool, Shared& s, int n, bool force) {
  const std::time_t now = clock::now_sec();
  while (n-- > 0 && !s.empty()) {
    Entry* e = entry_of_lru(s.oldest());
    if (e->expires > now) {
      if (!force) return;
      ++s.stats.evicted;
    } else {
      ++s.stats.expired;
    }
    force = false;
    drop(pool, s, e);
  }
}

ShmZone* zone_of(const TlsContext* tc) {
  if (tc == nullptr || tc->server_conf() == nullptr) return nullptr;
  ShmZone* z = tc->server_conf()->shared_zone;
  return z != nullptr && z->mapped() && z->data() != nullptr ? z : nullptr;
}

int new_session_cb(SSL* ssl, SSL_SESSION* sess) {
  // TLS 1.3 with tickets: the ticket carries the whole session and
  // resumption never looks it up by id, yet OpenSSL 3 reports every ticket
  // it sends here (two per handshake). Storing them would cost two DER
  // encodings and two trips through the zone's lock per handshake and push
  // TLS 1.2 sessions, which do need the cache, out of it. Stateful TLS 1.3
  // tickets (ssl_session_tickets off) are looked up by id: those are kept.
  if (SSL_version(ssl) == TLS1_3_VERSION && (SSL_get_options(ssl) & SSL_OP_NO_TICKET) == 0) {
    return 0;
  }
  ShmZone* z = zone_of(tls_session_context(ssl));
  if (z == nullptr) return 0;
  unsigned id_len = 0;
  const unsigned char* id = SSL_SESSION_get_id(sess, &id_len);
  const int der_len = i2d_SSL_SESSION(sess, nullptr);
  if (id_len == 0 || id_len > kMaxId || der_len <= 0 ||
      static_cast<std::size_t>(der_len) > kMaxSession) {
    return 0;
  }
  unsigned char der[kMaxSession];
  unsigned char* p = der;
  if (i2d_SSL_SESSION(sess, &p) != der_len) {
    ERR_clear_error();
    return 0;
  }
  SlabPool& pool = z->pool();
  auto& s = *static_cast<Shared*>(z->data());
  SlabLock lock(pool);
  expire(pool, s, 2, false);
  if (Entry* old = find(s, id, id_len); old != nullptr) drop(pool, s, old);
  const std::size_t need = sizeof(Entry) + static_cast<std::size_t>(der_len);
  void* mem = pool.alloc_locked(need);
  if (mem == nullptr) {
    // Full: the least recently used session makes room (nginx evicts one and
    // tries again once).
    expire(pool, s, 1, true);
    mem = pool.alloc_locked(need);
  }
  if (mem == nullptr) {
    ++s.stats.alloc_failed;
    return 0;
  }
  // Entries go back to the slab pool without a destructor call.
  static_assert(std::is_trivially_destructible_v<Entry>);
  auto* e = new (mem) Entry();
  e->node.key = hash_id(id, id_len);
  e->id_len = static_cast<std::uint8_t>(id_len);
  std::memcpy(e->id, id, id_len);
  e->der_len = static_cast<std::uint32_t>(der_len);
  std::memcpy(e->der(), der, static_cast<std::size_t>(der_len));
  e->expires = clock::now_sec() + static_cast<std::time_t>(SSL_SESSION_get_timeout(sess));
  s.tree.insert(&e->node);
  s.push_front(&e->lru);
  ++s.stats.stored;
  ++s.stats.entries;
  return 0;  // we keep a copy, not OpenSSL's object
}

SSL_SESSION* get_session_cb(SSL* ssl, const unsigned char* id, int len, int* copy) {
  *copy = 0;  // the session returned is ours to give: OpenSSL takes the reference
  ShmZone* z = zone_of(tls_session_context(ssl));
  if (z == nullptr || len <= 0 || static_cast<unsigned>(len) > kMaxId) return nullptr;
  unsigned char der[kMaxSession];
  std::uint32_t der_len = 0;
  {
    SlabPool& pool = z->pool();
    auto& s = *static_cast<Shared*>(z->data());
    SlabLock lock(pool);
    Entry* e = find(s, id, static_cast<unsigned>(len));
    if (e == nullptr) {
      ++s.stats.misses;
      return nullptr;
    }
    if (e->expires <= clock::now_sec()) {
      ++s.stats.expired;
      ++s.stats.misses;
      drop(pool, s, e);
      return nullptr;
    }
    der_len = e->der_len;
    std::memcpy(der, e->der(), der_len);
    s.touch(&e->lru);
    ++s.stats.hits;
  }
  const unsigned char* p = der;
  SSL_SESSION* sess = d2i_SSL_SESSION(nullptr, &p, static_cast<long>(der_len));
  if (sess == nullptr) ERR_clear_error();
  return sess;
}

void remove_session_cb(SSL_CTX* ctx, SSL_SESSION* sess) {
  ShmZone* z = zone_of(TlsContext::of(ctx));  // OpenSSL's session_ctx
  if (z == nullptr) return;
  unsigned id_len = 0;
  const unsigned char* id = SSL_SESSION_get_id(sess, &id_len);
  if (id_len == 0 || id_len > kMaxId) return;
  SlabPool& pool = z->pool();
  auto& s = *static_cast<Shared*>(z->data());
  SlabLock lock(pool);
  if (Entry* e = find(s, id, id_len); e != nullptr) drop(pool, s, e);
}

Status init_zone(ShmZone& zone, void* old_data) {  // a reload keeps the sessions
  return init_shm_lru_zone<Shared>(zone, old_data, &RbTree::insert_by<entry_less>,
                                   "the session cache");
}

}  // namespace

Result<ShmZone*> tls_session_zone(const DirectiveCall& call, const std::string& name,
                                  std::size_t size) {
  auto z = call.zones().add(name, size, &kZoneTag, call.where());
  if (!z) return z.status();
  z.value()->set_init(init_zone);
  return z.value();
}

void tls_session_cache_install(SSL_CTX* ctx) {
  SSL_CTX_sess_set_new_cb(ctx, new_session_cb);
  SSL_CTX_sess_set_get_cb(ctx, get_session_cb);
  SSL_CTX_sess_set_remove_cb(ctx, remove_session_cb);
}

TlsSessionCacheStats tls_session_cache_stats(ShmZone& zone) {
  if (!zone.mapped() || zone.data() == nullptr) return {};
  SlabLock lock(zone.pool());
  return static_cast<Shared*>(zone.data())->stats;
}

}  // namespace vigil
