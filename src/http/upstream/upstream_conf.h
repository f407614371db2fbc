#pragma once
// The generic part of an HTTP upstream module's per-location configuration
// (nginx's ngx_http_upstream_conf_t): where to connect, the timeouts, the
// next-upstream rules, the response buffers, TLS to the backend. A protocol's
// conf derives from it (ProxyConf; later FastcgiConf, GrpcConf) and fills it
// from its own directives (proxy_connect_timeout, fastcgi_connect_timeout...);
// the upstream core (upstream.h) reads only this part.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <typeinfo>
#include <vector>

#include "event/tls/tls_conf.h"
#include "http/core/variables.h"
#include "vigil/core/clock.h"

namespace vigil {
class Module;
class ConfInit;
class TlsContext;
}  // namespace vigil
namespace vigil::upstream {
class Group;
class GroupSet;
}

namespace vigil::http {

// *_next_upstream conditions.
inline constexpr unsigned kNextError = 1u << 0;
inline constexpr unsigned kNextTimeout = 1u << 1;
inline constexpr unsigned kNextInvalidHeader = 1u << 2;
inline constexpr unsigned kNextHttp500 = 1u << 3;
inline constexpr unsigned kNextHttp502 = 1u << 4;
inline constexpr unsigned kNextHttp503 = 1u << 5;
inline constexpr unsigned kNextHttp504 = 1u << 6;
inline constexpr unsigned kNextHttp403 = 1u << 7;
inline constexpr unsigned kNextHttp404 = 1u << 8;
inline constexpr unsigned kNextHttp429 = 1u << 9;
inline constexpr unsigned kNextNonIdempotent = 1u << 10;

// The kNextHttp* bit for a status, 0 when it has none.
unsigned next_upstream_bit(int status);

struct UpstreamConf {
  bool https = false;                // TLS to the upstream
  std::string target;                // "name" or "host:port" (logs, TLS name)
  upstream::Group* group = nullptr;  // resolved when the http block is finished
  VarTemplate hash_key;              // the group's `hash` key, compiled

  bool pass_request_body = true;
  bool request_buffering = true;
  std::vector<std::string> hide_headers;  // lower case
  std::vector<std::string> pass_headers;  // lower case
  // *_ignore_headers X-Accel-Redirect: the field is not acted on.
  bool ignore_accel_redirect = false;
  bool ignore_accel_limit_rate = false;  // X-Accel-Limit-Rate
  Msec connect_timeout = 60000;
  Msec send_timeout = 60000;
  Msec read_timeout = 60000;
  unsigned next_upstream = kNextError | kNextTimeout;
  unsigned next_upstream_tries = 0;  // 0: no limit
  Msec next_upstream_timeout = 0;    // 0: no limit
  bool buffering = true;
  std::size_t buffer_size = 4096;  // the response header buffer (one page, as nginx)
  std::uint32_t buffers_num = 8;
  std::size_t buffers_size = 4096;
  std::size_t busy_buffers_size = 0;  // 0: not set (twice the larger buffer size)
  bool intercept_errors = false;
  std::size_t limit_rate = 0;
  // proxy_bind: the local address of connections to the backend, with
  // variables ("" : none), IP_TRANSPARENT with `transparent`.
  VarTemplate local;
  bool local_transparent = false;
  bool socket_keepalive = false;  // *_socket_keepalive: SO_KEEPALIVE on connections to the backend

  // TLS to the backend; the context is built when the http block is finished.
  TlsClientConf ssl;
  std::shared_ptr<TlsContext> tls;
  VarTemplate ssl_name;  // compiled; empty: the host of `target`
};

// The directives every protocol has under its own prefix ("proxy",
// "grpc"...), with nginx's syntax and defaults: <prefix>_connect_timeout,
// _send_timeout, _read_timeout, _next_upstream, _next_upstream_tries,
// _next_upstream_timeout, _buffer_size, _hide_header, _pass_header,
// _ignore_headers, _intercept_errors, _bind, _socket_keepalive
// (upstream_directives.cc). `get` finds the UpstreamConf in the module's
// conf of spec `spec` (of type `conf_type`).
void add_upstream_directives(Module& m, std::uint32_t contexts, int spec,
                             const std::type_info& conf_type, UpstreamConf& (*get)(void*),
                             std::string_view prefix);
// Copies what the child level did not set of those from its parent.
void merge_upstream_conf(const ConfInit& ctx, std::string_view prefix, const UpstreamConf& parent,
                         UpstreamConf& child);

}  // namespace vigil::http
