#include "event/tls/ocsp_cache.h"

#include <openssl/evp.h>

#include <cstring>
#include <new>
#include <type_traits>

#include "core/rbtree.h"
#include "core/shm_lru.h"
#include "core/slab.h"
#include "event/tls/ocsp.h"
#include "vigil/core/clock.h"
#include "vigil/core/log.h"

namespace vigil {
namespace {

const int kZoneTag = 0;

struct Entry {
  RbNode node;  // first: a cast from the tree's node gets the entry
  LruLink lru;
  std::time_t valid;
  int status;
  unsigned char key[kOcspKeySize];
};

struct Shared : ShmLruIndex {};

Entry* entry_of_lru(LruLink* l) {
  return reinterpret_cast<Entry*>(reinterpret_cast<char*>(l) - offsetof(Entry, lru));
}

std::uint64_t hash_key(const unsigned char* key) {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (std::size_t i = 0; i < kOcspKeySize; ++i) {
    h ^= key[i];
    h *= 1099511628211ull;
  }
  return h;
}

bool entry_less(const RbNode* a, const RbNode* b) {
  return std::memcmp(reinterpret_cast<const Entry*>(a)->key, reinterpret_cast<const Entry*>(b)->key,
                     kOcspKeySize) < 0;
}

Entry* find(Shared& s, const unsigned char* key) {
  RbNode* n = s.tree.find_by(hash_key(key), [&](const RbNode* node) {
    return std::memcmp(key, reinterpret_cast<const Entry*>(node)->key, kOcspKeySize);
  });
  return reinterpret_cast<Entry*>(n);
}

void drop(SlabPool& pool, Shared& s, Entry* e) {
  s.remove(&e->node, &e->lru);
  pool.free_locked(e);
}

Status init_zone(ShmZone& zone, void* old_data) {
  return init_shm_lru_zone<Shared>(zone, old_data, &RbTree::insert_by<entry_less>,
                                   "the OCSP cache");
}

}  // namespace

Result<ShmZone*> tls_ocsp_zone(const DirectiveCall& call, const std::string& name,
                               std::size_t size) {
  auto z = call.zones().add(name, size, &kZoneTag, call.where());
  if (!z) return z.status();
  z.value()->set_init(init_zone);
  return z.value();
}

bool ocsp_cache_key(X509* cert, X509* issuer, unsigned char key[kOcspKeySize]) {
  unsigned int len = 0;
  if (X509_NAME_digest(X509_get_subject_name(issuer), EVP_sha1(), key, &len) != 1 || len != 20) {
    return false;
  }
  if (X509_pubkey_digest(issuer, EVP_sha1(), key + 20, &len) != 1 || len != 20) return false;
  const ASN1_INTEGER* serial = X509_get0_serialNumber(cert);
  const int n = ASN1_STRING_length(serial);
  if (n < 0 || n > 20) return false;
  std::memset(key + 40, 0, 20);
  std::memcpy(key + 40, ASN1_STRING_get0_data(serial), static_cast<std::size_t>(n));
  return true;
}

bool ocsp_cache_lookup(ShmZone& zone, const unsigned char key[kOcspKeySize], int& status) {
  if (!zone.mapped() || zone.data() == nullptr) return false;
  SlabPool& pool = zone.pool();
  auto& s = *static_cast<Shared*>(zone.data());
  SlabLock lock(pool);
  Entry* e = find(s, key);
  if (e == nullptr) return false;
  if (e->valid > clock::now_sec()) {
    status = e->status;
    return true;
  }
  drop(pool, s, e);
  return false;
}

bool ocsp_cache_store(ShmZone& zone, const unsigned char key[kOcspKeySize], int status,
                      std::time_t valid, Log& log) {
  if (!zone.mapped() || zone.data() == nullptr) return true;
  const std::time_t now = clock::now_sec();
  if (valid < now) return true;
  if (valid == kOcspForever) valid = now + 3600;
  SlabPool& pool = zone.pool();
  auto& s = *static_cast<Shared*>(zone.data());
  SlabLock lock(pool);
  if (Entry* old = find(s, key); old != nullptr) drop(pool, s, old);
  void* mem = pool.alloc_locked(sizeof(Entry));
  if (mem == nullptr && !s.empty()) {
    drop(pool, s, entry_of_lru(s.oldest()));
    mem = pool.alloc_locked(sizeof(Entry));
  }
  if (mem == nullptr) {
    VIGIL_LOG(log, kAlert, 0, "could not allocate new entry in OCSP cache \"%s\"",
              zone.name().c_str());
    return false;
  }
  static_assert(std::is_trivially_destructible_v<Entry>);
  auto* e = new (mem) Entry();
  std::memcpy(e->key, key, kOcspKeySize);
  e->node.key = hash_key(key);
  e->status = status;
  e->valid = valid;
  s.tree.insert(&e->node);
  s.push_front(&e->lru);
  return true;
}

}  // namespace vigil
