// The balancers: nginx's smooth weighted round-robin
// (ngx_http_upstream_get_peer), weighted least_conn, hash (nginx's rehashing
// walk, or its consistent ring) and ip_hash, over the same health rules. The
// hash methods choose what nginx chooses for the same key and servers, so
// keys keep their server when nginx is replaced.
#include <netinet/in.h>

#include <algorithm>
#include <charconv>

#include "upstream/group.h"

namespace vigil::upstream {

namespace {

// After more than this many unusable servers a hash method falls back to
// round-robin, as nginx.
constexpr unsigned kHashTries = 20;

std::uint64_t load(const std::atomic<std::uint64_t>& a) { return a.load(std::memory_order_relaxed); }

// The peer is chosen: start a new fail_timeout window when the last one has
// passed. While the peer is failed, only the worker that moves `checked` on
// gets to probe it (the others still see it as unavailable).
bool take(Peer& p, Msec now) {
  PeerHealth& h = *p.health;
  std::uint64_t checked = load(h.checked);
  if (msec_diff(now, checked) <= static_cast<MsecDiff>(p.fail_timeout)) return true;
  return h.checked.compare_exchange_strong(checked, now, std::memory_order_relaxed) ||
         p.max_fails == 0 || h.fails.load(std::memory_order_relaxed) < p.max_fails;
}

std::int64_t conns_of(const Group& g, const Peer& p) {
  return g.zone.empty() ? p.conns : p.health->conns.load(std::memory_order_relaxed);
}

// max_conns: the server holds as many connections as it may (counted per
// worker, or across workers with a zone, as nginx).
bool full(const Group& g, const Peer& p) {
  return p.max_conns != 0 && conns_of(g, p) >= p.max_conns;
}

bool usable(const PeerRequest& pr, const Peer& p, Msec now) {
  return !pr.tried(p.index) && peer_available(p, now) && !full(*pr.group(), p);
}

// Smooth weighted round-robin over peers [from, to) (nginx's algorithm: every
// candidate gains its effective weight, the largest wins and pays the total).
Peer* round_robin(PeerRequest& pr, std::size_t from, std::size_t to, Msec now) {
  Group& g = *pr.group();
  for (int attempt = 0; attempt < 2; ++attempt) {
    Peer* best = nullptr;
    int total = 0;
    for (std::size_t i = from; i < to; ++i) {
      Peer& p = g.peers[i];
      if (!usable(pr, p, now)) continue;
      p.current_weight += p.effective_weight;
      total += p.effective_weight;
      if (p.effective_weight < p.weight) ++p.effective_weight;
      if (best == nullptr || p.current_weight > best->current_weight) best = &p;
    }
    if (best == nullptr) return nullptr;
    best->current_weight -= total;
    if (take(*best, now)) return best;
    pr.set_tried(best->index);  // another worker is probing it: not ours
  }
  return nullptr;
}

// Fewest connections relative to weight; ties broken by round-robin among them.
Peer* least_conn(PeerRequest& pr, Msec now) {
  Group& g = *pr.group();
  Peer* best = nullptr;
  std::size_t ties = 0;
  for (std::size_t i = 0; i < g.primaries; ++i) {
    Peer& p = g.peers[i];
    if (!usable(pr, p, now)) continue;
    // conns/weight < best_conns/best_weight, without division.
    if (best == nullptr ||
        conns_of(g, p) * best->weight < conns_of(g, *best) * p.weight) {
      best = &p;
      ties = 1;
    } else if (conns_of(g, p) * best->weight == conns_of(g, *best) * p.weight) {
      ++ties;
    }
  }
  if (best == nullptr) return nullptr;
  if (ties > 1) {
    Peer* chosen = nullptr;
    int total = 0;
    for (std::size_t i = best->index; i < g.primaries; ++i) {
      Peer& p = g.peers[i];
      if (!usable(pr, p, now) || conns_of(g, p) * best->weight != conns_of(g, *best) * p.weight) {
        continue;
      }
      p.current_weight += p.effective_weight;
      total += p.effective_weight;
      if (p.effective_weight < p.weight) ++p.effective_weight;
      if (chosen == nullptr || p.current_weight > chosen->current_weight) chosen = &p;
    }
    chosen->current_weight -= total;
    best = chosen;
  }
  if (!take(*best, now)) return nullptr;
  return best;
}

// The peer owning weight point w of the primaries.
Peer* by_weight(Group& g, std::uint64_t w) {
  for (std::size_t i = 0; i < g.primaries; ++i) {
    auto weight = static_cast<std::uint64_t>(g.peers[i].weight);
    if (w < weight) return &g.peers[i];
    w -= weight;
  }
  return &g.peers[0];
}

std::uint64_t total_weight(const Group& g) {
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < g.primaries; ++i) total += static_cast<std::uint64_t>(g.peers[i].weight);
  return total;
}

// nginx's `hash` (ngx_http_upstream_get_hash_peer, compatible with
// Cache::Memcached): each round adds (crc32([round] key) >> 16) & 0x7fff to
// the running value, the round number written in decimal and left out of the
// first round, and the value modulo the total weight picks a server by its
// weight. Rounds and failures carry over to the request's next attempt.
Peer* modulo_hash(PeerRequest& pr, Msec now) {
  Group& g = *pr.group();
  if (pr.hash_key().empty() || pr.hash_tries > kHashTries) {
    return round_robin(pr, 0, g.primaries, now);
  }
  const std::uint64_t total = total_weight(g);
  for (;;) {
    std::uint32_t crc = 0;
    if (pr.hash_rounds > 0) {
      char digits[16];
      const auto end = std::to_chars(digits, digits + sizeof digits, pr.hash_rounds).ptr;
      crc = crc32(std::string_view(digits, static_cast<std::size_t>(end - digits)));
    }
    crc = crc32(pr.hash_key(), crc);
    pr.hash_value += (crc >> 16) & 0x7fff;
    ++pr.hash_rounds;
    Peer* p = by_weight(g, pr.hash_value % total);
    if (usable(pr, *p, now) && take(*p, now)) return p;
    if (++pr.hash_tries > kHashTries) return round_robin(pr, 0, g.primaries, now);
  }
}

Peer* ip_hash(PeerRequest& pr, Msec now) {
  Group& g = *pr.group();
  const sockaddr* sa = pr.client();
  const unsigned char* bytes = nullptr;
  std::size_t len = 0;
  if (sa != nullptr && sa->sa_family == AF_INET) {
    bytes = reinterpret_cast<const unsigned char*>(&reinterpret_cast<const sockaddr_in*>(sa)->sin_addr);
    len = 3;  // the first three octets: a /24 sticks to one server
  } else if (sa != nullptr && sa->sa_family == AF_INET6) {
    bytes = reinterpret_cast<const unsigned char*>(&reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr);
    len = 16;
  } else {
    // A unix-domain client (or none): one pseudo address, as nginx's, so
    // every such client sticks to the same server.
    static constexpr unsigned char kPseudo[3] = {0, 0, 0};
    bytes = kPseudo;
    len = sizeof kPseudo;
  }
  const std::uint64_t total = total_weight(g);
  if (!pr.hash_started) {
    std::uint32_t h = 89;
    for (std::size_t i = 0; i < len; ++i) h = (h * 113 + bytes[i]) % 6271;
    pr.hash_value = h;
    pr.hash_started = true;
  }
  while (pr.hash_tries < kHashTries) {
    Peer* p = by_weight(g, pr.hash_value % total);
    if (usable(pr, *p, now) && take(*p, now)) return p;
    ++pr.hash_tries;
    std::uint32_t h = pr.hash_value;
    for (std::size_t i = 0; i < len; ++i) h = (h * 113 + bytes[i]) % 6271;
    pr.hash_value = h;
  }
  return round_robin(pr, 0, g.primaries, now);
}

// nginx's `hash ... consistent` (ngx_http_upstream_get_chash_peer): the
// first ring point at or after crc32(key), wrapping; the point names a
// server line, and of that line's usable addresses the smooth weighted
// round-robin picks one. No usable address: the next point.
Peer* consistent_hash(PeerRequest& pr, Msec now) {
  Group& g = *pr.group();
  if (pr.hash_key().empty() || pr.hash_tries > kHashTries || g.ring.empty()) {
    return round_robin(pr, 0, g.primaries, now);
  }
  if (!pr.hash_started) {
    const std::uint32_t h = crc32(pr.hash_key());
    auto it = std::lower_bound(g.ring.begin(), g.ring.end(), h,
                               [](const RingPoint& p, std::uint32_t v) { return p.hash < v; });
    pr.hash_value = static_cast<std::uint32_t>(it - g.ring.begin());  // may be ring.size(): wraps
    pr.hash_started = true;
  }
  for (;;) {
    const std::string& server = g.peers[g.ring[pr.hash_value % g.ring.size()].peer].server;
    for (;;) {
      Peer* best = nullptr;
      int total = 0;
      for (std::size_t i = 0; i < g.primaries; ++i) {
        Peer& p = g.peers[i];
        if (!usable(pr, p, now) || p.server != server) continue;
        p.current_weight += p.effective_weight;
        total += p.effective_weight;
        if (p.effective_weight < p.weight) ++p.effective_weight;
        if (best == nullptr || p.current_weight > best->current_weight) best = &p;
      }
      if (best == nullptr) break;
      best->current_weight -= total;
      if (take(*best, now)) return best;
      pr.set_tried(best->index);  // another worker is probing it: not ours
    }
    ++pr.hash_value;
    if (++pr.hash_tries > kHashTries) return round_robin(pr, 0, g.primaries, now);
  }
}

}  // namespace

bool peer_available(const Peer& p, Msec now) {
  if (p.down) return false;
  if (p.max_fails == 0) return true;
  const PeerHealth& h = *p.health;
  if (h.fails.load(std::memory_order_relaxed) < p.max_fails) return true;
  return msec_diff(now, load(h.checked)) > static_cast<MsecDiff>(p.fail_timeout);
}

Peer* select_peer(PeerRequest& pr) {
  Group& g = *pr.group();
  const Msec now = clock::current_msec();
  Peer* p = nullptr;
  if (g.single()) {
    p = &g.peers[0];
    if (p->down || pr.tried(0) || full(g, *p)) return nullptr;
    pr.set_tried(0);
    return p;
  }
  switch (g.method) {
    case Method::kRoundRobin:
      p = round_robin(pr, 0, g.primaries, now);
      break;
    case Method::kLeastConn:
      p = least_conn(pr, now);
      break;
    case Method::kHash:
      p = modulo_hash(pr, now);
      break;
    case Method::kConsistentHash:
      p = consistent_hash(pr, now);
      break;
    case Method::kIpHash:
      p = ip_hash(pr, now);
      break;
  }
  // Backups only when no primary is left (never with the hash methods: the
  // configuration refuses `backup` there).
  if (p == nullptr && g.backups() > 0) p = round_robin(pr, g.primaries, g.peers.size(), now);
  if (p != nullptr) pr.set_tried(p->index);
  return p;
}

}  // namespace vigil::upstream
