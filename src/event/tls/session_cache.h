#pragma once
// The shared TLS session cache (nginx's ngx_ssl_session_cache_t,
// "ssl_session_cache shared:name:size"): sessions serialized (DER) into a
// named shared zone, found through a red-black tree keyed by a hash of the
// session id, kept in LRU order, expired by their timeout, and the least
// recently used evicted when the slab allocator has no room. Every worker
// maps the zone, so a session made on one worker resumes on another; the
// zone survives a reload with its sessions.

#include <openssl/ssl.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/conf/module.h"
#include "core/shm_zone.h"

namespace vigil {

// Registers the zone for "shared:name:size" while the directive is parsed.
Result<ShmZone*> tls_session_zone(const DirectiveCall& call, const std::string& name,
                                  std::size_t size);

// Installs the new/get/remove callbacks on a server context.
void tls_session_cache_install(SSL_CTX* ctx);

// Counters of one zone (tests, /metrics).
struct TlsSessionCacheStats {
  std::uint64_t stored = 0;
  std::uint64_t hits = 0;
  std::uint64_t misses = 0;
  std::uint64_t expired = 0;
  std::uint64_t evicted = 0;       // LRU entries dropped to make room
  std::uint64_t alloc_failed = 0;  // sessions not stored (no room even after eviction)
  std::uint64_t entries = 0;
};
TlsSessionCacheStats tls_session_cache_stats(ShmZone& zone);

}  // namespace vigil
