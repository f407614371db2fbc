#pragma once
// The upstream layer: server groups shared by http and stream (nginx's
// ngx_http_upstream_module / ngx_stream_upstream_module, the round-robin,
// least_conn, hash and ip_hash balancers and the keepalive module), behind the
// peer connection's get/free hooks (seed 000, ngx_peer_connection_t).
//
// Configuration (one parser for both protocols):
//
//   upstream name {
//       server address [weight=N] [max_fails=N] [fail_timeout=T] [backup] [down];
//       least_conn; | hash key [consistent]; | ip_hash;     (ip_hash: http only)
//       keepalive N; keepalive_requests N; keepalive_timeout T;
//       keepalive_time T;  (http only)
//       zone name [size];
//   }
//
// A protocol module registers the directives in its contexts:
//
//   UpstreamSpecs ups = upstream::add_directives(*module, kStreamMainConf,
//                                                kStreamUpsConf, Protocol::kStream);
//   ... then, in the init of a conf created in the same main context and added
//   to the module AFTER add_directives (so it runs later):
//   GroupSet& set = upstream::group_set(ctx, ups);    // every `upstream` block, built
//   Result<Group*> g = set.find_or_add(name_or_address, default_port, where);
//
// Per request (the caller owns a PeerRequest, e.g. in its request arena):
//
//   PeerRequest& pr = ...;
//   pr.init(*group, loop, next_upstream_tries /*0: no limit*/, hash_key, client_addr);
//   pr.attach(pc);                     // pc.get/free/data/tries
//   int rc = event_connect_peer(loop, pc);
//   // kPeerDone: a cached keepalive connection was handed out (pc.cached,
//   //            pc.connection set, already connected): send on it at once.
//   // kPeerOk / kPeerAgain: a fresh connection (connected / connecting).
//   // kPeerDeclined: refused at once: pc.free(pc, pc.data, kPeerFailed), then
//   //            retry while pc.tries > 0.   kPeerBusy: no live peer ("no live upstreams").
//   ... when the attempt ends:
//   pc.free(pc, pc.data, state);       // kPeerFailed | kPeerKeepalive (reusable) | 0
//   if (pc.connection) close it;       // free() took it into the cache otherwise
//   if the attempt failed and pc.tries > 0: connect again (the tried peers are skipped).
//
// pc.tries starts at the number of servers not marked `down` (primaries +
// backups), or the caller's next_upstream_tries when smaller, and free()
// decrements it.
//
// Ownership: groups belong to the Configuration that loaded them and live as
// long as it. Per-worker state (round-robin weights, the keepalive cache) is
// private to each process after fork(); with `zone`, health state (fails,
// last failure) lives in the named shared zone (core/shm_zone.h), mapped by
// the runtime before fork(), so every worker sees one worker's failures. Counters are always in shared memory, so
// /metrics shows the sum over workers.

#include <sys/socket.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/conf/module.h"
#include "core/conf/scope.h"
#include "core/shm.h"
#include "vigil/core/clock.h"
#include "vigil/core/result.h"
#include "vigil/event/peer.h"

namespace vigil {
class Configuration;
class EventLoop;
}  // namespace vigil

namespace vigil::upstream {

enum class Protocol : std::uint8_t { kHttp, kStream };

enum class Method : std::uint8_t {
  kRoundRobin,      // nginx's smooth weighted round-robin (the default)
  kLeastConn,       // least_conn: fewest active connections / weight, then round-robin
  kHash,            // hash key: nginx's (Cache::Memcached's) CRC-32 walk over the weights
  kConsistentHash,  // hash key consistent: nginx's ring of 160 points per weight unit
  kIpHash,          // ip_hash: first three octets of IPv4, the whole IPv6 address
};

// Health of one server, as nginx keeps it in ngx_http_upstream_rr_peer_t.
// In shared memory with `zone` (all workers), else in the worker's own memory.
struct PeerHealth {
  std::atomic<std::uint32_t> fails{0};     // failures within the current fail_timeout window
  std::atomic<std::uint64_t> accessed{0};  // msec (monotonic) of the last failure
  std::atomic<std::uint64_t> checked{0};   // msec of the last probe / window start
  std::atomic<std::int64_t> conns{0};      // active connections (least_conn with zone)
};

// Counters of one server for /metrics, always in shared memory (summed over workers).
struct alignas(64) PeerStats {
  std::atomic<std::uint64_t> requests{0};    // attempts (connections or cache hits) made
  std::atomic<std::uint64_t> failures{0};    // attempts that ended with kPeerFailed
  std::atomic<std::int64_t> active{0};       // connections in use now
  std::atomic<std::uint64_t> cache_hits{0};  // attempts served by a cached keepalive connection
  std::atomic<std::uint64_t> down_until{0};  // msec until which some worker skips it (0: up)
};

// One address of one `server` line (a name with several addresses gives several peers).
struct Peer {
  sockaddr_storage addr{};
  socklen_t addrlen = 0;
  std::string name;    // "127.0.0.1:9001"
  std::string server;  // the server line's address as written: "localhost:9001"
  int weight = 1;
  unsigned max_fails = 1;      // 0: never marked failed
  Msec fail_timeout = 10000;
  std::int64_t max_conns = 0;  // `max_conns=`: the most connections at once (0: no limit)
  bool backup = false;
  bool down = false;           // `down`: never used
  std::size_t index = 0;       // position in Group::peers

  // Balancing state, per worker (nginx keeps these in the peer too).
  int current_weight = 0;
  int effective_weight = 1;
  std::int64_t conns = 0;  // this worker's active connections (least_conn without zone)

  PeerHealth* health = nullptr;  // never null once the group is built
  PeerStats* stats = nullptr;    // never null once the group is built
};

// A point of the consistent-hash ring.
struct RingPoint {
  std::uint32_t hash = 0;
  std::uint32_t peer = 0;  // index into Group::peers
};

class Group {
 public:
  Group() = default;
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  std::string name;   // the upstream's name, or the address for an implicit group
  std::string where;  // " in F:L" of the `upstream` block (or of proxy_pass)
  bool implicit = false;
  Protocol protocol = Protocol::kHttp;

  Method method = Method::kRoundRobin;
  std::string hash_key;  // `hash KEY` as written; the caller evaluates it per request

  std::vector<Peer> peers;        // primaries [0, primaries), then backups
  std::size_t primaries = 0;
  std::vector<RingPoint> ring;    // consistent hash only, sorted by hash

  unsigned keepalive = 0;               // 0: no cache
  std::uint64_t keepalive_requests = 1000;
  Msec keepalive_timeout = 60000;
  Msec keepalive_time = 3600000;  // a connection older than this is not kept

  std::string zone;            // "" without `zone`
  std::size_t zone_size = 0;   // as configured (0: size not given)

  std::size_t backups() const { return peers.size() - primaries; }
  // One server and no backup: as nginx, its failures are not counted and it is
  // never taken out (there is nothing to fall back to); only `down` stops it.
  bool single() const { return peers.size() == 1; }

  // Internal: the storage of health and stats (see shared_state.cc).
  SharedMemory stats_mem;
  std::unique_ptr<PeerHealth[]> local_health;  // until (or without) a zone
};

// The groups of one protocol block (http { } or stream { }).
class GroupSet {
 public:
  GroupSet();
  ~GroupSet();
  GroupSet(const GroupSet&) = delete;
  GroupSet& operator=(const GroupSet&) = delete;

  Protocol protocol = Protocol::kHttp;
  std::vector<std::unique_ptr<Group>> groups;

  // The explicit group `name`, or null.
  Group* find(std::string_view name) const;
  // The explicit group `target` names, else an implicit group for the address
  // "host[:port]" (port `default_port` when absent, 0: a port is required),
  // resolved now; the same address twice gives the same group. `where` is the
  // " in F:L" of the directive, for errors.
  Result<Group*> find_or_add(std::string_view target, unsigned default_port,
                             std::string_view where);

  // Internal.
  const void* root = nullptr;  // the Configuration's main scope, for metrics lookup
};

// What add_directives registered in a module: the conf spec that holds the
// module's GroupSet (in the main context).
struct UpstreamSpecs {
  int set_spec = -1;
  int block_spec = -1;
};

// Registers the `upstream` block and its directives in `module`: the block in
// `main_context`, its directives in `ups_context`. The protocol selects the
// directives nginx has there (keepalive* and ip_hash: http only).
UpstreamSpecs add_directives(Module& module, ConfContextMask main_context,
                             ConfContextMask ups_context, Protocol protocol);

// The GroupSet of the main scope `ctx` is finishing (or of the nearest
// enclosing main scope): every `upstream` block already built.
GroupSet& group_set(const ConfInit& ctx, UpstreamSpecs specs);
// The same from any scope inside the protocol block (a location's merge).
GroupSet* find_group_set(const ConfScope& scope, std::size_t module, UpstreamSpecs specs);

// Per-request balancer state (nginx's ngx_http_upstream_rr_peer_data_t plus
// the hash/keepalive data): what get/free work on. No allocation unless the
// group has more than kInlinePeers servers.
class PeerRequest {
 public:
  static constexpr std::size_t kInlinePeers = 256;

  PeerRequest() = default;
  PeerRequest(const PeerRequest&) = delete;
  PeerRequest& operator=(const PeerRequest&) = delete;

  // max_tries: the caller's next_upstream_tries (0: as many as there are
  // peers). hash_key: the evaluated `hash` key (hash methods only). client:
  // the client's address (ip_hash only; may be null, then round-robin).
  void init(Group& group, EventLoop& loop, unsigned max_tries, std::string_view hash_key = {},
            const sockaddr* client = nullptr);
  // Points pc's get/free/data at this request and sets pc.tries.
  void attach(PeerConnection& pc);
  // What a cached keepalive connection must have been made for to be handed
  // to this request (e.g. the TLS context of an https location; null for
  // plain connections). A connection is cached under the key of the request
  // that used it. Set after init (which clears it).
  void set_reuse_key(const void* key) { reuse_key_ = key; }
  const void* reuse_key() const { return reuse_key_; }

  Group* group() const { return group_; }
  // The peer of the current attempt (null before the first get or after a busy one).
  Peer* peer() const { return current_; }
  // The current connection came from the keepalive cache.
  bool cached() const { return cached_; }
  // A cached connection failed before any byte of the response (the backend
  // closed it as we sent): instead of free(), call this, close pc.connection,
  // and connect again: the next get() returns the same peer on a fresh
  // connection, without counting a failure or using up a try (nginx's
  // "u->peer.tries++" for cached connections, done as a rule of the layer).
  void retry_fresh(PeerConnection& pc);

  // The hooks (pc.data is the PeerRequest).
  static int get(PeerConnection& pc, void* data);
  static void free(PeerConnection& pc, void* data, unsigned state);

  // Internal to the balancers.
  bool tried(std::size_t i) const { return (tried_[i / 64] >> (i % 64)) & 1u; }
  void set_tried(std::size_t i) { tried_[i / 64] |= std::uint64_t{1} << (i % 64); }
  EventLoop* loop() const { return loop_; }
  std::string_view hash_key() const { return hash_key_; }
  const sockaddr* client() const { return client_; }
  unsigned hash_tries = 0;      // servers the hash led to that could not be used
  unsigned hash_rounds = 0;     // hashes computed (hash: the next rehash number)
  std::uint32_t hash_value = 0; // hash state carried between attempts
  bool hash_started = false;

 private:
  Group* group_ = nullptr;
  EventLoop* loop_ = nullptr;
  Peer* current_ = nullptr;
  unsigned tries_ = 0;
  bool cached_ = false;
  Msec born_ = 0;  // when the current attempt's connection was made
  Peer* fresh_ = nullptr;  // retry_fresh(): the peer the next get() must reconnect to
  const void* reuse_key_ = nullptr;
  std::string_view hash_key_;
  const sockaddr* client_ = nullptr;
  std::uint64_t inline_tried_[kInlinePeers / 64] = {};
  std::unique_ptr<std::uint64_t[]> big_tried_;
  std::uint64_t* tried_ = inline_tried_;
};

// The peer a balancer picks for `pr` without connecting (what get() does
// before the connection): null when no peer is available. Tests use it to
// check sequences; get() uses it.
Peer* select_peer(PeerRequest& pr);

// A peer is skipped while max_fails failures were seen within fail_timeout
// and its fail_timeout since the last probe has not passed.
bool peer_available(const Peer& p, Msec now);

// Keepalive: closes every cached connection of this loop and frees the
// loop's cache (worker exit). Safe to call when there is none.
void close_keepalive(EventLoop& loop);
// Cached connections of `group` in this loop (tests, metrics).
std::size_t keepalive_cached(EventLoop& loop, const Group& group);

// Appends every server's counters of the groups loaded with `conf` to `out`
// (Prometheus text format, vigil_upstream_* families). Returns the bytes
// written; stops before overflowing `cap` (check metrics_bytes_max).
std::size_t append_metrics(const Configuration& conf, char* out, std::size_t cap);
// An upper bound of what append_metrics writes for `conf`.
std::size_t metrics_bytes_max(const Configuration& conf);
// The same by the configuration's main scope (Configuration::main_scope(),
// or the root of any scope of it), for code that keeps no Configuration.
std::size_t append_metrics(const ConfScope& main_scope, char* out, std::size_t cap);
std::size_t metrics_bytes_max(const ConfScope& main_scope);

}  // namespace vigil::upstream
