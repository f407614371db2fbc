// The peer connection's get/free hooks for a group (nginx's
// ngx_http_upstream_get_round_robin_peer / free_round_robin_peer and the
// keepalive module's get/free around them).
#include <cstring>

#include "upstream/group.h"
#include "upstream/peer_connected.h"
#include "upstream/keepalive.h"
#include "vigil/core/log.h"
#include "vigil/event/loop.h"

namespace vigil::upstream {

namespace {
constexpr auto kRelaxed = std::memory_order_relaxed;

void count_start(Group& g, Peer& p) {
  p.stats->requests.fetch_add(1, kRelaxed);
  p.stats->active.fetch_add(1, kRelaxed);
  ++p.conns;
  if (!g.zone.empty()) p.health->conns.fetch_add(1, kRelaxed);
}

void count_end(Group& g, Peer& p) {
  p.stats->active.fetch_sub(1, kRelaxed);
  --p.conns;
  if (!g.zone.empty()) p.health->conns.fetch_sub(1, kRelaxed);
}
}  // namespace

void PeerRequest::init(Group& group, EventLoop& loop, unsigned max_tries, std::string_view hash_key,
                       const sockaddr* client) {
  group_ = &group;
  loop_ = &loop;
  current_ = nullptr;
  fresh_ = nullptr;
  cached_ = false;
  reuse_key_ = nullptr;
  hash_key_ = hash_key;
  client_ = client;
  hash_tries = 0;
  hash_rounds = 0;
  hash_value = 0;
  hash_started = false;
  const std::size_t n = group.peers.size();
  // A server marked `down` is no try (nginx's peers->tries leaves it out):
  // once every other server was tried, the last answer stands instead of a
  // search for one more ending in "no live upstreams".
  tries_ = 0;
  for (const Peer& p : group.peers) tries_ += p.down ? 0 : 1;
  if (max_tries != 0 && max_tries < tries_) tries_ = max_tries;
  const std::size_t words = (n + 63) / 64;
  if (n <= kInlinePeers) {
    tried_ = inline_tried_;
  } else {
    // Only groups of more than kInlinePeers servers allocate per request.
    big_tried_ = std::make_unique<std::uint64_t[]>(words);
    tried_ = big_tried_.get();
  }
  std::memset(tried_, 0, words * sizeof(std::uint64_t));
}

void PeerRequest::attach(PeerConnection& pc) {
  pc.get = &PeerRequest::get;
  pc.free = &PeerRequest::free;
  pc.data = this;
  pc.tries = tries_;
}

int PeerRequest::get(PeerConnection& pc, void* data) {
  auto& pr = *static_cast<PeerRequest*>(data);
  Group& g = *pr.group_;
  pr.cached_ = false;
  pc.cached = false;
  Peer* p = pr.fresh_;
  pr.fresh_ = nullptr;
  const bool fresh_only = p != nullptr;
  if (p == nullptr) p = select_peer(pr);
  if (p == nullptr) {
    pr.current_ = nullptr;
    pc.name = g.name;
    return kPeerBusy;
  }
  pr.current_ = p;
  std::memcpy(&pc.addr, &p->addr, p->addrlen);
  pc.addrlen = p->addrlen;
  pc.name = p->name;
  count_start(g, *p);
  if (g.keepalive != 0 && !fresh_only) {
    if (Connection* c = keepalive_take(*pr.loop_, g, *p, pr.reuse_key_, pr.born_)) {
      p->stats->cache_hits.fetch_add(1, kRelaxed);
      c->log = pc.log != nullptr ? pc.log : &pr.loop_->log();
      pc.connection = c;
      pc.cached = true;
      pr.cached_ = true;
      return kPeerDone;
    }
  }
  pr.born_ = clock::current_msec();  // a new connection is made now
  return kPeerOk;
}

void peer_connected(const PeerRequest& pr) {
  Peer* p = pr.peer();
  if (p == nullptr) return;
  PeerHealth& h = *p->health;
  // As free() after a success: only a probe made after the last failure counts.
  if (h.accessed.load(kRelaxed) < h.checked.load(kRelaxed)) {
    h.fails.store(0, kRelaxed);
    p->stats->down_until.store(0, kRelaxed);
  }
}

void PeerRequest::free(PeerConnection& pc, void* data, unsigned state) {
  auto& pr = *static_cast<PeerRequest*>(data);
  Peer* p = pr.current_;
  if (pc.tries > 0) --pc.tries;
  if (p == nullptr) return;
  pr.current_ = nullptr;
  Group& g = *pr.group_;
  count_end(g, *p);
  // kPeerNext alone: the attempt neither failed nor succeeded (a local error,
  // or a response the caller passes on to the next server).
  if ((state & (kPeerNext | kPeerFailed)) == kPeerNext) return;
  PeerHealth& h = *p->health;
  const Msec now = clock::current_msec();
  if (state & kPeerFailed) {
    p->stats->failures.fetch_add(1, kRelaxed);
    if (g.single()) return;  // never taken out (nginx's peers->single)
    const std::uint32_t fails = h.fails.fetch_add(1, kRelaxed) + 1;
    h.accessed.store(now, kRelaxed);
    h.checked.store(now, kRelaxed);
    if (p->max_fails != 0) {
      // A failing server gets less traffic until it recovers (nginx's effective_weight).
      p->effective_weight -= p->weight / static_cast<int>(p->max_fails);
      if (p->effective_weight < 0) p->effective_weight = 0;
      if (fails >= p->max_fails) {
        p->stats->down_until.store(now + p->fail_timeout, kRelaxed);
        Log& log = pc.log != nullptr ? *pc.log : pr.loop_->log();
        VIGIL_LOG(log, kWarn, 0, "upstream server temporarily disabled, upstream: %s",
                  p->name.c_str());
      }
    }
    return;  // the caller closes pc.connection
  }
  // A success after the window's first probe clears the failures (nginx:
  // "if (peer->accessed < peer->checked) peer->fails = 0").
  if (h.accessed.load(kRelaxed) < h.checked.load(kRelaxed)) {
    h.fails.store(0, kRelaxed);
    p->stats->down_until.store(0, kRelaxed);
  }
  Connection* c = pc.connection;
  if (c == nullptr || g.keepalive == 0 || !(state & kPeerKeepalive)) return;
  ++c->requests;
  if (c->requests >= g.keepalive_requests || c->close || c->error) return;
  // keepalive_time: a connection that has lived that long is not kept.
  if (msec_diff(clock::current_msec(), pr.born_) > static_cast<MsecDiff>(g.keepalive_time)) return;
  if (keepalive_put(*pr.loop_, g, *p, *c, pr.reuse_key_, pr.born_)) pc.connection = nullptr;
}

void PeerRequest::retry_fresh(PeerConnection& pc) {
  Peer* p = current_;
  if (p == nullptr) return;
  current_ = nullptr;
  count_end(*group_, *p);
  // The attempt did not happen: the next get() reconnects to the same peer
  // and pc.tries stays as it is.
  p->stats->requests.fetch_sub(1, kRelaxed);
  fresh_ = p;
  cached_ = false;
  pc.cached = false;
}

}  // namespace vigil::upstream
