#pragma once
// The upstream TLS sessions a worker keeps for proxy_ssl_session_reuse: the
// newest session per (TLS context, upstream server), offered to the next new
// connection there (nginx keeps one per peer the same way). One per worker
// (HttpWorker owns it), touched only by that worker's loop; the sessions are
// freed with it.

#include <openssl/ssl.h>

#include <cstddef>
#include <functional>
#include <unordered_map>

namespace vigil::http {

class ProxySessions {
 public:
  ProxySessions() = default;
  ~ProxySessions();
  ProxySessions(const ProxySessions&) = delete;
  ProxySessions& operator=(const ProxySessions&) = delete;

  // The session to offer (not consumed: the caller does not free it), or null.
  SSL_SESSION* find(const void* ctx, const void* peer) const;
  // Keeps `session` (takes its reference), replacing the older one.
  void keep(const void* ctx, const void* peer, SSL_SESSION* session);
  // Drops the session of (ctx, peer): a handshake that offered it failed.
  void forget(const void* ctx, const void* peer);
  std::size_t size() const { return sessions_.size(); }

 private:
  struct Key {
    const void* ctx;
    const void* peer;
    bool operator==(const Key& o) const { return ctx == o.ctx && peer == o.peer; }
  };
  struct KeyHash {
    std::size_t operator()(const Key& k) const {
      return std::hash<const void*>()(k.ctx) * 31 + std::hash<const void*>()(k.peer);
    }
  };
  std::unordered_map<Key, SSL_SESSION*, KeyHash> sessions_;
};

}  // namespace vigil::http
