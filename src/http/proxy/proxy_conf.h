#pragma once
// The proxy module (nginx's ngx_http_proxy_module) and its configuration
// (ngx_http_proxy_loc_conf_t, the part Vigil implements), with nginx's
// defaults. The module keeps a ProxyConf at every http level: a level that
// does not set a proxy_* directive inherits its parent's value, except
// proxy_pass, which is the location's own (proxy_conf.cc).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "http/core/request_vars.h"
#include "http/core/variables.h"
#include "http/upstream/upstream_conf.h"

namespace vigil::http {

class HttpModule;
struct HttpLocConf;

struct ProxyHeader {
  std::string name;
  VarTemplate value;  // an empty result drops the field (nginx)
};

// proxy_redirect: a Location (or a Refresh's url=) starting with `pattern`
// has that prefix replaced; one matching `regex` ("~re", "~*re") is
// replaced as a whole, the replacement reading its groups ($1...);
// `is_default`: the proxy_pass URL is replaced with the location's name
// (proxy_redirect.cc).
struct RedirectRule {
  bool is_default = false;
  VarTemplate pattern;
  std::shared_ptr<const HttpRegex> regex;
  VarTemplate replacement;
};

// proxy_cookie_domain / proxy_cookie_path: a Set-Cookie attribute value
// matching `pattern` (or `regex`, which then matches the whole value) is
// replaced (proxy_cookie.cc).
struct CookieRewrite {
  VarTemplate pattern;
  std::shared_ptr<const HttpRegex> regex;
  VarTemplate replacement;
};

// proxy_cookie_flags: the flags of the cookies named `name`.
struct CookieFlags {
  VarTemplate name;
  std::shared_ptr<const HttpRegex> name_regex;  // "~re": names matching re (any case)
  std::vector<VarTemplate> flags;  // secure, httponly, samesite=..., nosecure, ...
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
  std::string proxy_port;  // $proxy_port: the port, or the scheme's
  // proxy_pass with variables: the URL is evaluated per request (proxy.cc)
  // and names an upstream block, an address, or a name to resolve.
  bool variables = false;
  VarTemplate url;
  upstream::GroupSet* groups = nullptr;  // the http block's upstream blocks

  int http_version = 1000;               // proxy_http_version 1.0 | 1.1
  std::vector<ProxyHeader> set_headers;  // with the defaults merged in
  bool pass_request_headers = true;
  // proxy_redirect: the rules in order, the first that matches applies;
  // none and not off: "default" (for a proxy_pass without variables).
  bool redirect_off = false;
  std::vector<RedirectRule> redirects;
  // proxy_method: the request's method to the backend (empty: the client's).
  VarTemplate method;
  // proxy_cookie_domain, proxy_cookie_path, proxy_cookie_flags (empty: off).
  std::vector<CookieRewrite> cookie_domains;
  std::vector<CookieRewrite> cookie_paths;
  std::vector<CookieFlags> cookie_flags;
  // proxy_max_temp_file_size, proxy_temp_file_write_size: checked, without
  // effect (no response goes to a temporary file). 0: not set for the
  // write size (twice the larger buffer size).
  std::size_t max_temp_file_size = 1024u * 1024 * 1024;
  std::size_t temp_file_write_size = 0;
  // proxy_set_body: the body sent instead of the client's.
  bool body_set = false;
  VarTemplate set_body;
};

// The proxy_* directives and the ProxyConf of every level. A location's
// proxy_pass is resolved to its upstream group (and its TLS context built)
// when the location's conf is merged, once the http block is parsed.
const HttpModule& proxy_module();
// The proxy conf of a location (or of a server's level).
const ProxyConf& proxy_conf(const HttpLocConf& loc);

}  // namespace vigil::http
