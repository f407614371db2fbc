#pragma once
// One stream session (nginx's ngx_stream_session_t): what a connection
// accepted by a stream server carries from the accept to its end, whether it
// is proxied (proxy.cc) or answered by `return`. It lives in the client
// connection's arena; finalize_session() (proxy.cc) writes the access log
// lines, then closes both connections. The variables (variables.h) read it.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "event/resolver.h"
#include "stream/client_hello.h"
#include "stream/limit_conn.h"
#include "upstream/upstream.h"
#include "vigil/core/buffer.h"
#include "vigil/core/clock.h"
#include "vigil/event/connection.h"
#include "vigil/event/peer.h"

namespace vigil {
struct LimitNode;
class ShmZone;
}  // namespace vigil

namespace vigil::stream {

struct StreamSrvConf;

// A time not measured (nginx's (ngx_msec_t) -1): "-" in the variables.
inline constexpr Msec kNoTime = ~Msec{0};

// One attempt at an upstream server (nginx's ngx_stream_upstream_state_t).
struct UpstreamTry {
  std::string_view addr;  // "127.0.0.1:8080", or the group's name when none was live
  Msec start = 0;
  Msec connect_time = kNoTime;     // until connected (and the TLS handshake done)
  Msec first_byte_time = kNoTime;  // until the first byte from the server
  Msec session_time = kNoTime;     // until the attempt ended
  std::uint64_t bytes_sent = 0;
  std::uint64_t bytes_received = 0;
};

// The most attempts the upstream variables list; later ones are not recorded.
inline constexpr std::uint32_t kMaxUpstreamTries = 16;

// A group of addresses proxy_pass with variables named (upstream/run_time_group.h),
// and while its name is being resolved, the query (proxy_target.h).
struct SessionGroup {
  upstream::Group group;
  std::unique_ptr<upstream::PeerHealth[]> health;
  std::unique_ptr<upstream::PeerStats[]> stats;
  ResolveRequest query;
  Resolver* resolver = nullptr;  // set while the query waits
  std::string_view host;         // the name asked for
  std::uint16_t port = 0;
  Session* session = nullptr;
  void (*then)(Session& s, int status) = nullptr;
};

// The groups of the expression a `map` entry matched, while its value is
// evaluated ($1..$9 and named groups, variables.h).
struct Captures {
  std::string_view subject;
  const int* offsets = nullptr;  // pairs of offsets into subject (-1: unset)
  int pairs = 0;
};

struct Session {
  Connection* client = nullptr;
  Connection* upstream = nullptr;
  const StreamSrvConf* conf = nullptr;
  Msec accepted = 0;  // $session_time counts from here
  // $status: 200 (done), 400 (bad request), 403, 500 (internal error, a
  // failed TLS handshake), 502 (no upstream could be reached), 503.
  int status = 200;
  // The connection's own address before set_real_ip_from replaced it
  // ($realip_remote_addr, $realip_remote_port); empty: not replaced.
  std::string_view realip_addr;
  std::string_view realip_port;
  // limit_conn: the zones' entries this session holds (given back at its
  // end), and $limit_conn_status.
  ShmZone* limit_conn_zone[kMaxSessionLimits] = {};
  LimitNode* limit_conn_node[kMaxSessionLimits] = {};
  std::uint8_t nlimit_conn = 0;
  LimitConnStatus limit_conn_status = LimitConnStatus::kNone;

  // Proxying.
  upstream::Group* group = nullptr;  // where proxy_pass leads for this session
  // An address proxy_pass with variables named, in the client connection's
  // arena: a worker that terminates while the name is resolved closes the
  // connection without ending the session, and the arena still frees it.
  SessionGroup* run_time = nullptr;
  std::string_view target;  // proxy_pass evaluated (the default TLS name)
  PeerConnection peer;
  upstream::PeerRequest balancer;  // pick the server, count, health (peer.get/free)
  Buf up;                          // client -> upstream
  Buf down;                        // upstream -> client
  bool client_eof = false;
  bool upstream_eof = false;
  bool upstream_shut = false;  // we sent FIN to the upstream
  bool client_shut = false;    // we sent FIN to the client
  bool done = false;
  bool connected = false;  // the upstream connect completed
  std::uint64_t from_client = 0;
  std::uint64_t from_upstream = 0;
  Msec start_msec = 0;  // the relay began: proxy_upload_rate / proxy_download_rate count from here
  std::size_t upload_rate = 0;    // proxy_upload_rate of this session (0: no limit)
  std::size_t download_rate = 0;  // proxy_download_rate of this session
  // A UDP session ("listen ... udp", udp_proxy.h): the datagrams from the
  // client and from the upstream (proxy_requests, proxy_responses), and
  // whether the upstream's socket reported an error (an ICMP unreachable:
  // the server counts as failed, max_fails).
  std::uint64_t requests = 0;
  std::uint64_t responses = 0;
  bool upstream_failed = false;
  bool udp = false;
  UpstreamTry tries[kMaxUpstreamTries];
  std::uint32_t ntries = 0;

  // `return`: what is left to send.
  const char* ret_pos = nullptr;
  std::size_t ret_left = 0;

  // ssl_preread (ssl_preread.h): what was read from the client before the
  // session went on (sent to the upstream first), and the ClientHello
  // parsed from it (null: ssl_preread is off, or the session is UDP).
  Buf preread;
  ClientHelloParser* hello = nullptr;
  void (*after_preread)(Session& s) = nullptr;

  // The values `set` gave (variables.h, DeclaredVariable::index): null
  // until the first; nvalues slots in the arena, data null when unset.
  std::string_view* values = nullptr;
  std::uint32_t nvalues = 0;

  // Set by a `map` while the value of the expression it matched is evaluated.
  mutable const Captures* captures = nullptr;

  // The current attempt (null before the first).
  UpstreamTry* current_try() { return ntries > 0 ? &tries[ntries - 1] : nullptr; }
};

}  // namespace vigil::stream
