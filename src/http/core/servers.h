#pragma once
// The server tables of a loaded http block (nginx's ngx_http_optimize_servers):
// one HttpAddress per distinct listen address with the servers on it, the
// default one, and the names to choose among them by Host; and the location
// lookup. Built once at load time and only read afterwards, so every worker
// shares them.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "http/core/conf.h"
#include "http/core/filters.h"
#include "http/core/phases.h"
#include "http/static/open_file_cache_conf.h"
#include "vigil/core/result.h"

namespace vigil::http {

struct Request;

struct ServerName {
  std::string name;  // lower case; wildcards without their '*'
  HttpSrvConf* srv = nullptr;
};

class HttpAddress {
 public:
  ListenConf listen;  // the address and the socket options one listen set
  std::vector<HttpSrvConf*> servers;
  HttpSrvConf* default_server = nullptr;

  // The server for a request naming `host` (RFC 9110 §7.2; nginx's
  // ngx_http_find_virtual_server): an exact name, then the longest
  // "*.example.com" (or ".example.com"), then the longest "www.example.*",
  // then the regular expressions in configuration order (with `r`, the one
  // that matches keeps its groups in r), else the default server.
  // Case-insensitive; no allocation.
  const HttpSrvConf& find_server(std::string_view host, Request* r = nullptr) const;

  std::vector<ServerName> exact;           // sorted
  std::vector<ServerName> head_wildcards;  // ".example.com": suffix match, longest first
  std::vector<ServerName> tail_wildcards;  // "www.example.": prefix match, longest first
  std::vector<ServerName> dot_names;       // ".example.com" also matches "example.com"
  struct RegexName {
    const HttpRegex* re;
    HttpSrvConf* srv;
  };
  std::vector<RegexName> regex_names;  // in configuration order
  // The first server named "" (or naming none, whose name is "" as in
  // nginx): a request without a Host goes there (null: the default server).
  const HttpSrvConf* empty_name = nullptr;
};

class HttpServers {
 public:
  std::vector<std::unique_ptr<HttpAddress>> addresses;
  std::vector<HttpSrvConf*> servers;    // every server, in configuration order
  std::vector<HttpLocConf*> locations;  // every loc conf, server level included
  // Distinct access log files (by path; the first directive naming a path
  // sets its buffer and flush), for the workers to open.
  std::vector<const AccessLogConf*> access_logs;
  // The open_file_cache directives in use (OpenFileCacheConf::index): each
  // worker makes one table per entry.
  std::vector<const OpenFileCacheConf*> file_caches;
  std::size_t max_large_buffer = 0;  // largest large_client_header_buffers size
  std::size_t max_header_buffer = 0;
  // The configuration's main scope (upstream::append_metrics finds the
  // configuration's upstream groups by it).
  const ConfScope* main_scope = nullptr;
  // Every module's phase handlers, laid out once (phases.h).
  PhaseEngine phases;
  // Every module's header and body filters this configuration uses (filters.h).
  FilterChains filters;

  // Groups the servers by address, checks default_server and listen options,
  // and builds the name tables.
  static Result<std::shared_ptr<HttpServers>> build(std::vector<HttpSrvConf*> servers,
                                                    std::vector<HttpLocConf*> locations);
};

// The location for r's normalised path `path` in r's server (nginx's
// ngx_http_core_find_location): at each level an exact "= /x" match wins;
// then a prefix of the very name; then a location named path + "/" whose
// handler asks for auto_redirect (proxy_pass): `redirect` is set and that
// location returned, for a 301 to its name; else the longest prefix,
// searched again among its nested locations; then, unless that prefix is
// "^~", the level's regular expressions in order (the one that matches
// keeps its groups in r, request_vars.h); else the server level.
struct LocationMatch {
  const HttpLocConf* loc = nullptr;
  bool redirect = false;
  bool error = false;  // matching an expression failed: answer 500
};
LocationMatch match_location(Request& r, std::string_view path);
// The location by the same rules, without auto_redirect and keeping nothing.
const HttpLocConf& find_location(const HttpSrvConf& srv, std::string_view path);
// "location @name" of the server, or null.
const HttpLocConf* find_named_location(const HttpSrvConf& srv, std::string_view name);

}  // namespace vigil::http
