#pragma once
// The "stream { }" block (nginx's ngx_stream_core_module, ngx_stream_proxy_module
// and ngx_stream_upstream_module, the part a TCP proxy needs):
//
//   stream {
//       upstream backend { server 127.0.0.1:9001; server 127.0.0.1:9002; }  (upstream/upstream.h)
//       server {
//           listen 127.0.0.1:9000 [reuseport] [deferred] [backlog=N];
//           listen 127.0.0.1:53 udp [reuseport];  proxy_responses 1;  proxy_requests 0;
//           proxy_pass backend;               # or an address, or with variables:
//                                             # `proxy_pass $name;` (a group, an address,
//                                             # or a name: resolver 127.0.0.1:53;)
//           hash-keyed groups: `hash $remote_addr;` (variables: stream/variables.h)
//           proxy_connect_timeout 60s;  proxy_timeout 10m;  proxy_buffer_size 16k;
//           proxy_next_upstream on;     proxy_next_upstream_tries 0;
//           ssl_certificate c.pem; ssl_certificate_key k.pem;   # with "listen ... ssl"
//           proxy_ssl on; proxy_ssl_verify on; proxy_ssl_trusted_certificate ca.pem;
//           access_log path format;  return "text $var";  ssl_alpn proto ...;
//           ssl_preread on;  preread_buffer_size 16k;  preread_timeout 30s;  (ssl_preread.h)
//       }
//       log_format name string;  map $src $var { ... }      (stream/log.h, stream/map.h)
//       set $var value;  (server; stream/set.h)
//       geo [$addr] $var { ... }  split_clients $src $var { ... }  (stream/geo.h, split_clients.h)
//       allow / deny address|CIDR|unix:|all;                   (stream/access.h)
//       limit_conn_zone key zone=name:size;  limit_conn name N; (stream/limit_conn.h)
//   }

#include <sys/socket.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "core/access_rule.h"
#include "core/cidr.h"
#include "core/conf/loader.h"
#include "core/conf/module.h"
#include "event/listen_conf.h"
#include "event/resolver.h"
#include "event/tls/context.h"
#include "event/tls/tls_conf.h"
#include "stream/limit_conn.h"
#include "stream/log.h"
#include "stream/set.h"
#include "stream/variables.h"
#include "upstream/upstream.h"
#include "vigil/core/clock.h"
#include "vigil/core/log.h"

namespace vigil {
// The stream block's contexts (core knows only the main context).
inline constexpr ConfContextMask kStreamMainConf = 1u << 8;
inline constexpr ConfContextMask kStreamSrvConf = 1u << 9;
inline constexpr ConfContextMask kStreamUpsConf = 1u << 10;
}  // namespace vigil

namespace vigil::stream {

using StreamListen = ListenArgs;  // event/listen_conf.h: the same listen syntax as http

struct StreamFinalConf;

// proxy_responses not set: a UDP session ends only by proxy_timeout.
inline constexpr unsigned kNoResponseLimit = ~0u;

struct StreamSrvConf {
  std::vector<StreamListen> listens;
  std::string proxy_pass;  // as written
  // proxy_pass with variables: evaluated per session to a group's name or an
  // address (null: `upstream` is the group).
  std::shared_ptr<const VarTemplate> proxy_pass_var;
  // resolver / resolver_timeout: names proxy_pass with variables gives
  // (proxy_target.h); null: none.
  std::shared_ptr<const ResolverConf> resolver;
  Msec resolver_timeout = 30000;
  // proxy_ssl_name with variables (null: proxy_ssl.name as written).
  std::shared_ptr<const VarTemplate> proxy_ssl_name_var;
  AccessLogs access_logs;              // access_log (log.h)
  std::vector<std::string> ssl_alpn;   // ssl_alpn: the protocols offered, preferred first
  const StreamFinalConf* fin = nullptr;  // the stream block's, set when it is read
  Msec proxy_connect_timeout = 60000;
  Msec proxy_timeout = 600000;
  std::size_t proxy_buffer_size = 16384;
  // proxy_upload_rate / proxy_download_rate: bytes per second read from the
  // client / from the upstream, per session; 0: no limit.
  std::size_t proxy_upload_rate = 0;
  std::size_t proxy_download_rate = 0;
  // The same with variables (`proxy_download_rate $rate;`): evaluated when
  // the upstream is connected, as nginx; null: the number above.
  std::shared_ptr<const VarTemplate> proxy_upload_rate_var;
  std::shared_ptr<const VarTemplate> proxy_download_rate_var;
  // UDP: proxy_requests (client datagrams after which the session stops
  // taking the client's datagrams, 0: no limit) and proxy_responses
  // (datagrams expected back per client datagram; kNoResponseLimit: unset).
  unsigned proxy_requests = 0;
  unsigned proxy_responses = kNoResponseLimit;
  bool proxy_next_upstream = true;
  bool tcp_nodelay = true;
  // proxy_bind: the local address of connections to the upstream (bind_len
  // 0: none), IP_TRANSPARENT with `transparent`.
  sockaddr_storage bind_addr{};
  socklen_t bind_len = 0;
  bool bind_transparent = false;  // TCP_NODELAY on the client's and the upstream's sockets
  bool proxy_half_close = false;  // off: the first side's EOF ends the session (nginx)
  // proxy_protocol: a PROXY protocol v1 header to the upstream first.
  bool proxy_protocol = false;
  // proxy_protocol_timeout: for reading the header on "listen ... proxy_protocol".
  Msec proxy_protocol_timeout = 30000;
  // ssl_preread: the client's first bytes are read (at most
  // preread_buffer_size, for preread_timeout) and its ClientHello parsed
  // for the $ssl_preread_* variables before the session goes on.
  bool ssl_preread = false;
  std::size_t preread_buffer_size = 16384;
  Msec preread_timeout = 30000;
  // set_real_ip_from: peers whose PROXY protocol header names the client.
  std::vector<Cidr> realip_from;
  // allow / deny, in order (a server with none has the stream block's).
  std::vector<AccessRule> access_rules;
  // limit_conn (a server with none has the stream block's), and how a
  // refusal is logged / whether it only is.
  std::vector<LimitConnRef> limit_conns;
  LogLevel limit_conn_log_level = LogLevel::kError;
  bool limit_conn_dry_run = false;
  // set (set.h), in order; a server's own.
  std::vector<SetOp> sets;
  // return: the text (with variables) sent instead of proxying.
  VarTemplate return_value;
  bool has_return = false;
  unsigned proxy_next_upstream_tries = 0;  // 0: as many as the group has servers
  upstream::Group* upstream = nullptr;     // resolved once the block is read
  std::string where;
  // error_log of the server or the stream block (core/error_logs.h); null:
  // the main level's. A session writes to its server's.
  Log* error_log = nullptr;
  TlsServerConf ssl;                         // ssl_*: TLS termination on "listen ... ssl"
  TlsClientConf proxy_ssl;                   // proxy_ssl_*: TLS to the upstream
  std::shared_ptr<TlsContext> tls;           // built when a listen says "ssl"
  std::shared_ptr<TlsContext> upstream_tls;  // built when proxy_ssl is on
  bool ssl_listen = false;
  // The last upstream session of this worker, for proxy_ssl_session_reuse
  // (per process, like Upstream::next); freed with the configuration.
  struct SessionSlot {
    SSL_SESSION* session = nullptr;
    SessionSlot() = default;
    SessionSlot(const SessionSlot&) = delete;
    SessionSlot& operator=(const SessionSlot&) = delete;
    ~SessionSlot() {
      if (session != nullptr) SSL_SESSION_free(session);
    }
  };
  SessionSlot upstream_session;
};

// Built when the stream block closes: every server, every upstream group.
struct StreamFinalConf {
  // Made when a stream block opens: the variables declared so far belong to
  // other configurations (a reload declares its own).
  StreamFinalConf() { open_declarations(); }
  // Slots of a session's `set` values (variables.h), known once the block is read.
  std::uint32_t nvariables = 0;
  std::vector<StreamSrvConf*> servers;
  upstream::GroupSet* upstreams = nullptr;  // named groups and proxy_pass addresses
  std::vector<std::shared_ptr<LogFormat>> log_formats;
  std::vector<AccessLogConf*> access_logs;  // the files a worker opens (AccessLogConf::index)
  std::vector<std::shared_ptr<void>> limit_conn_zones;  // limit_conn_zone's (limit_conn.cc)
  // The `hash` key of each group that has one, compiled.
  std::vector<std::pair<const upstream::Group*, VarTemplate>> hash_keys;
  const VarTemplate* hash_key(const upstream::Group& g) const {
    for (const auto& [group, key] : hash_keys) {
      if (group == &g) return &key;
    }
    return nullptr;
  }
};

const Module& stream_module();
// Null when the configuration has no stream block.
const StreamFinalConf* stream_final(const Configuration& conf);

}  // namespace vigil::stream
