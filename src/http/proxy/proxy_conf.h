#pragma once
// The proxy's per-location configuration (nginx's ngx_http_proxy_loc_conf_t,
// the part Vigil implements), with nginx's defaults. Directives are
// registered by add_proxy_directives (proxy_conf.cc); a level that does not
// set one inherits its parent's value (merge_proxy).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/conf/module.h"
#include "event/tls/tls_conf.h"
#include "http/core/variables.h"
#include "vigil/core/clock.h"

namespace vigil {
class TlsContext;
}  // namespace vigil
namespace vigil::upstream {
class Group;
}

namespace vigil::http {

struct HttpLocConf;

// proxy_next_upstream conditions.
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

struct ProxyHeader {
  std::string name;
  VarTemplate value;  // an empty result drops the field (nginx)
};

struct ProxyConf {
  // proxy_pass http[s]://name_or_address[:port][/uri]
  bool enabled = false;
  bool https = false;                // proxy_pass https://: TLS to the upstream
  std::string pass;                  // as written
  std::string where;                 // " in F:L" of proxy_pass
  std::string target;                // "name" or "host:port"
  upstream::Group* group = nullptr;  // resolved when the http block is finished
  bool has_uri = false;              // a URI part was given (even "/")
  std::string uri;
  std::string proxy_host;  // $proxy_host: host[:port] as written
  VarTemplate hash_key;    // the group's `hash` key, compiled

  int http_version = 1000;               // proxy_http_version 1.0 | 1.1
  std::vector<ProxyHeader> set_headers;  // with the defaults merged in
  bool pass_request_headers = true;
  bool pass_request_body = true;
  std::vector<std::string> hide_headers;  // lower case
  std::vector<std::string> pass_headers;  // lower case
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
  std::size_t busy_buffers_size = 8192;
  bool request_buffering = true;
  bool intercept_errors = false;
  bool redirect_default = true;  // proxy_redirect default | off

  // proxy_ssl_* (inherited like the rest); the context is built when the
  // http block is finished, for the locations whose proxy_pass is https.
  TlsClientConf ssl;
  std::shared_ptr<TlsContext> tls;
  VarTemplate ssl_name;  // proxy_ssl_name, compiled; empty: the proxy_pass host
};

// Registers the proxy_* directives for the loc conf spec `loc`.
void add_proxy_directives(Module& m, ConfSlot<HttpLocConf> loc);
// The inheritance of every proxy_* directive the child level did not set,
// and the checks nginx makes once a level is complete.
Status merge_proxy(const ConfInit& ctx, const ProxyConf& parent, ProxyConf& child);
// The http block's defaults (proxy_set_header Host $proxy_host, Connection close).
Status init_proxy(const ConfInit& ctx, ProxyConf& conf);

}  // namespace vigil::http
