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
#include "http/core/variables.h"
#include "http/upstream/upstream_conf.h"

namespace vigil::http {

struct HttpLocConf;

struct ProxyHeader {
  std::string name;
  VarTemplate value;  // an empty result drops the field (nginx)
};

// The generic part (timeouts, next upstream, buffers, TLS) is the base: the
// upstream core reads it; the rest is the HTTP/1 protocol's.
struct ProxyConf : UpstreamConf {
  // proxy_pass http[s]://name_or_address[:port][/uri]
  bool enabled = false;
  std::string pass;      // as written
  std::string where;     // " in F:L" of proxy_pass
  bool has_uri = false;  // a URI part was given (even "/")
  std::string uri;
  std::string proxy_host;  // $proxy_host: host[:port] as written

  int http_version = 1000;               // proxy_http_version 1.0 | 1.1
  std::vector<ProxyHeader> set_headers;  // with the defaults merged in
  bool pass_request_headers = true;
  bool redirect_default = true;  // proxy_redirect default | off
};

// Registers the proxy_* directives for the loc conf spec `loc`.
void add_proxy_directives(Module& m, ConfSlot<HttpLocConf> loc);
// The inheritance of every proxy_* directive the child level did not set,
// and the checks nginx makes once a level is complete.
Status merge_proxy(const ConfInit& ctx, const ProxyConf& parent, ProxyConf& child);
// The http block's defaults (proxy_set_header Host $proxy_host, Connection close).
Status init_proxy(const ConfInit& ctx, ProxyConf& conf);

}  // namespace vigil::http
