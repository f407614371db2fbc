#pragma once
// The http { server { location { } } } configuration (nginx's
// ngx_http_core_module main/srv/loc confs): what each level keeps, with
// nginx's defaults. After a successful load every loc conf has its final,
// merged values; HttpServers (servers.h), built once the whole http block is
// merged, is the read-only view the workers use.

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "codec/tokens.h"
#include "core/conf/loader.h"
#include "core/conf/module.h"
#include "event/listen_conf.h"
#include "event/resolver.h"
#include "event/tls/tls_conf.h"
#include "http/access/access.h"
#include "http/core/request_vars.h"
#include "http/core/types.h"
#include "http/core/variables.h"
#include "upstream/upstream.h"
#include "vigil/core/clock.h"
#include "vigil/core/log.h"

namespace vigil {
class ShmZone;
// The http block's contexts (core knows only the main context).
inline constexpr ConfContextMask kHttpMainConf = 1u << 2;
inline constexpr ConfContextMask kHttpSrvConf = 1u << 3;
inline constexpr ConfContextMask kHttpLocConf = 1u << 4;
inline constexpr ConfContextMask kHttpUpsConf = 1u << 5;
}  // namespace vigil

namespace vigil::http {

class HttpServers;
class PhaseEngine;
struct FilterChains;
struct Request;
struct TryFiles;
}  // namespace vigil::http
namespace vigil {
class TlsContext;
}  // namespace vigil
namespace vigil::http {

// One "listen" directive.
using ListenConf = ListenArgs;  // event/listen_conf.h

// A location's content handler (nginx's clcf->handler): set by the directive
// that makes the location answer (proxy_pass, stub_status, metrics); a
// location without one is served by the content phase's handlers (static
// files). `run` is a phase handler (phases.h).
struct ContentHandler {
  const char* name;
  int (*run)(Request& r);
  bool any_method;  // takes every method: its 405 names no Allow list
  // nginx's clcf->auto_redirect (proxy_pass sets it): a location named with
  // a final "/" answers a request for the name without it, which no
  // location names, with a 301 to the name (servers.h, match_location).
  bool auto_redirect = false;
};

// lingering_close off | on | always
enum class Lingering : std::uint8_t { kOff, kOn, kAlways };

// if_modified_since off | exact | before
enum class IfModifiedSince : std::uint8_t { kOff, kExact, kBefore };

// log_format name [escape=default|json|none] string ...;
struct LogFormat {
  std::string name;
  VarEscape escape = VarEscape::kDefault;
  VarTemplate format;
};

// open_log_file_cache max=N [inactive=time] [min_uses=N] [valid=time];
struct LogFileCacheConf {
  std::uint32_t max = 0;
  Msec inactive = 10000;
  std::uint32_t min_uses = 1;
  Msec valid = 60000;
};

struct AccessLogConf {
  // The format's name; "combined" is written by the fixed fast writer
  // (access_log.cc), others through `format`, resolved when the http block
  // is finished (so, unlike nginx, a log_format may follow its access_log).
  std::string format_name = "combined";
  std::shared_ptr<const LogFormat> format;
  std::string where;  // " in F:L" of the access_log directive
  std::string path;        // resolved against the prefix
  std::size_t buffer = 0;  // bytes gathered before a write(2); 0: every line at once
  Msec flush = 0;          // longest a line waits in the buffer; 0: until it is full
  int gzip = 0;            // gzip=level: each write a gzip member; 0: plain
  // A path with variables: worked out per line, the file opened for the
  // line (or taken from open_log_file_cache); never buffered.
  std::shared_ptr<const VarTemplate> path_var;
  // if=condition: the line is written only when this is neither empty nor "0".
  std::optional<VarTemplate> condition;
  int index = -1;  // into HttpServers::access_logs (the worker's open files)
};

struct ReturnConf;  // return.h

struct ErrorPage {
  int status = 0;
  // "=code": answer with this status instead; "=" alone (0): with the status
  // the page's location answers; none (-1): with the error's status.
  int overwrite = -1;
  std::string uri;  // "/path[?args]", "@name", or a URL; may hold variables
  std::shared_ptr<const VarTemplate> target;  // `uri` when it has variables
};

// client_body_in_file_only.
enum class BodyInFile : std::uint8_t {
  kOff,    // a body is written to a file only when it outgrows its buffer (and removed)
  kOn,     // always to a file, kept after the request
  kClean,  // always to a file, removed after the request
};

struct HttpLocConf {
  // The location itself (empty name for the server level).
  std::string name;
  bool exact = false;    // "location = /x"
  bool noregex = false;  // "location ^~ /x": no regular expression is tried after it
  bool named = false;    // "location @x": reached only by try_files and error_page
  bool internal = false;  // `internal`: a client's request for it is a 404
  // "location ~ re" / "~* re" (name is the expression's text).
  std::shared_ptr<const HttpRegex> regex;
  std::string where;

  std::string root = "html";  // relative to the prefix; resolved in `root_path`
  std::string root_path;
  // alias: root_path takes the place of the URI's first alias_len bytes
  // (the name of the location that set it) instead of going before them;
  // npos (a regular expression location): of the whole URI.
  bool alias = false;
  std::size_t alias_len = 0;
  std::string alias_name;  // the name of the location that set the alias
  // root or alias with variables: evaluated per request, relative to
  // root_prefix when relative (static/map_path.h).
  std::shared_ptr<const VarTemplate> root_vars;
  std::string root_prefix;
  std::vector<std::string> index;  // default {"index.html"}
  // The index names with variables (null for a literal one), beside `index`.
  std::vector<std::shared_ptr<const VarTemplate>> index_vars;
  bool sendfile = false;
  bool tcp_nopush = false;
  bool tcp_nodelay = true;
  bool chunked_transfer_encoding = true;  // a body of unknown length to HTTP/1.1: chunked
  Msec keepalive_timeout = 75000;
  Msec keepalive_header = 0;  // "Keep-Alive: timeout=N" when set (second argument)
  std::uint64_t keepalive_requests = 1000;
  Msec keepalive_time = 3600000;  // a connection older than this is not kept alive
  // keepalive_disable: the browsers whose requests close the connection.
  static constexpr std::uint8_t kDisableMsie6 = 1;
  static constexpr std::uint8_t kDisableSafari = 2;
  std::uint8_t keepalive_disable = kDisableMsie6;
  std::size_t client_max_body_size = 1024 * 1024;  // 0: no limit
  Msec client_body_timeout = 60000;
  Msec send_timeout = 60000;
  std::size_t h2_chunk_size = 8192;  // http2_chunk_size: the most DATA one frame carries
  std::shared_ptr<const TypesMap> types;  // null: the built-in map
  std::string default_type = "text/plain";
  // open_log_file_cache: descriptors of access_log paths with variables
  // kept open by each worker (null: off).
  std::shared_ptr<const LogFileCacheConf> log_file_cache;
  // Every access_log of the level (nginx writes a line to each); empty: off.
  std::vector<std::shared_ptr<AccessLogConf>> access_logs;
  bool access_log_off = false;  // "access_log off" at this level
  // error_log of this level, or inherited (core/error_logs.h); null: the
  // main level's, the loop's own log.
  Log* error_log = nullptr;
  bool client_body_in_single_buffer = false;  // accepted: the body is in one buffer anyway
  std::vector<ErrorPage> error_pages;
  const ContentHandler* content = nullptr;  // null: the content phase (static files)
  Lingering lingering_close = Lingering::kOn;
  Msec lingering_time = 30000;
  Msec lingering_timeout = 5000;
  IfModifiedSince if_modified_since = IfModifiedSince::kExact;
  std::size_t output_buffer = 32768;  // read/write chunk when sendfile is off
  std::size_t client_body_buffer_size = 16384;  // the proxy reads a request body into this
  // Where a request body that is read ahead goes when it outgrows its buffer
  // (request_body_file.cc): client_body_temp_path (resolved against the
  // prefix) with up to three directory levels of 1 or 2 digits.
  BodyInFile client_body_in_file_only = BodyInFile::kOff;
  std::string client_body_temp_path;
  std::uint8_t client_body_temp_levels[3] = {};
  bool warn_uninitialized = true;  // uninitialized_variable_warn (variables.cc)
  bool log_not_found = true;       // a missing file is logged at [error] (static_file.cc)
  bool server_tokens = true;  // off: "Server: vigil", and error pages without the version
  // A Location that is a path is sent as a URL (HTTP/1's head writer).
  bool absolute_redirect = true;
  bool server_name_in_redirect = false;  // its host: the server's first name, not the request's
  bool port_in_redirect = true;

  // resolver / resolver_timeout: names known only per request (proxy_pass
  // with variables) are resolved with these (event/resolver.h).
  std::shared_ptr<const ResolverConf> resolver;  // null: no resolver defined
  Msec resolver_timeout = 30000;

  // limit_rate (filters/limit_rate.cc; applied by HTTP/1's writer).
  std::size_t limit_rate = 0;  // bytes per second of a response; 0: no limit
  std::size_t limit_rate_after = 0;
  // Either written with variables: the size is worked out per response.
  std::shared_ptr<const VarTemplate> limit_rate_var;
  std::shared_ptr<const VarTemplate> limit_rate_after_var;

  // Each HttpModule's conf at this level (module.h: loc_conf), by its index.
  std::vector<const void*> module_confs;

  // Nested locations, filled when the http block is finished.
  std::vector<HttpLocConf*> exact_locations;
  std::vector<HttpLocConf*> prefix_locations;  // longest name first
  std::vector<HttpLocConf*> regex_locations;   // in configuration order
  // limit_except METHOD ... { }: the block's conf answers every request whose
  // method it does not name (GET names HEAD too). In the block's own conf,
  // `limit_except_methods` holds the methods named (method_bit); in its
  // location's, `limit_except` points to the block.
  std::uint32_t limit_except_methods = 0;
  const HttpLocConf* limit_except = nullptr;
  // An `if` or `limit_except` block's conf: it stands for its location and
  // inherits what the location uses to make its content (nginx's "noname").
  bool noname = false;
  // The confs of this level's `if` blocks, by the block's scope (rewrite.h).
  struct IfBlock {
    const ConfScope* scope;
    const HttpLocConf* loc;
  };
  std::vector<IfBlock> if_blocks;

  const ErrorPage* find_error_page(int status) const {
    for (const auto& p : error_pages) {
      if (p.status == status) return &p;
    }
    return nullptr;
  }
};

struct HttpSrvConf {
  std::vector<ListenConf> listens;
  std::vector<std::string> server_names;  // lower case; "~re" as written
  std::vector<std::shared_ptr<const HttpRegex>> server_regexes;  // the "~re" names, in order
  Msec client_header_timeout = 60000;
  std::size_t client_header_buffer_size = 1024;
  std::uint32_t large_buffers_num = 4;
  std::size_t large_buffers_size = 8192;
  // nginx's pool size: sizes nothing here, but bounds the large buffers.
  std::size_t connection_pool_size = 512;
  bool merge_slashes = true;
  // A field whose name has more than letters, digits and '-' (and '_' with
  // underscores_in_headers) is dropped as the head is read, unless off.
  bool ignore_invalid_headers = true;
  bool underscores_in_headers = false;
  std::string where;
  // HTTP/2 (http/v2): `http2 on`, or a `listen ... http2` of an address the
  // server is on (set when the servers are built).
  bool http2 = false;
  std::uint32_t h2_max_concurrent_streams = 128;  // http2_max_concurrent_streams
  std::size_t h2_body_preread_size = 65536;       // http2_body_preread_size: a stream's window
  std::size_t h2_recv_buffer_size = 16384;        // http2_recv_buffer_size: the read buffer
  TlsServerConf ssl;                // ssl_* directives
  std::shared_ptr<TlsContext> tls;  // built when a listen of the server says "ssl"

  HttpLocConf* loc = nullptr;  // the server-level loc conf
  std::vector<HttpLocConf*> named_locations;  // "location @x", filled with the locations
  const PhaseEngine* phases = nullptr;  // the configuration's (HttpServers::phases)
  const FilterChains* filters = nullptr;  // the configuration's (HttpServers::filters)
};

// The last conf spec of the module, kept in the http scope only: its init
// runs after the main, srv and loc confs of the whole block are merged (the
// loader finishes specs in order), which is where nginx's
// ngx_http_optimize_servers would run. It owns the built server tables.
struct HttpFinalConf {
  std::shared_ptr<HttpServers> servers;
  std::vector<std::shared_ptr<const LogFormat>> log_formats;  // log_format, in order
};

const Module& http_module();
// Whether a location-context scope is an `if` block's (its arguments start
// with "(", which no location's can): its conf is not a location to search.
bool is_if_scope(const ConfScope& scope);
// limit_except's bit for a method.
constexpr std::uint32_t method_bit(Method m) { return 1u << static_cast<unsigned>(m); }
// The conf that answers a request with method `m` in location `loc`: the
// location's, or its limit_except block's when that does not name `m`.
inline const HttpLocConf* conf_for_method(const HttpLocConf* loc, Method m) {
  if (loc == nullptr || loc->limit_except == nullptr) return loc;
  return (loc->limit_except->limit_except_methods & method_bit(m)) != 0 ? loc : loc->limit_except;
}
// Whether a location-context scope is an `if` or a `limit_except` block's
// (the http module's loc conf there says so once the block is open).
bool is_noname_scope(const ConfEnv& env, const ConfScope& scope);

// What an `if` block means (the rewrite module's: it reads the condition
// when the block opens; call.scope() is the enclosing level's, and the
// block's own scope its last child).
using IfBlockHandler = Status (*)(const DirectiveCall& call);
void set_if_block_handler(IfBlockHandler handler);
// For a directive of another module that makes the current location answer
// (as nginx's modules set clcf->handler): sets the location's (or server
// level's) content handler.
Status set_location_content(const DirectiveCall& call, const ContentHandler* handler);

// nginx's *_temp_path syntax: "path [level1 [level2 [level3]]]", each level
// 1 or 2. The proxy keeps no temporary files for responses (a body larger
// than its buffers is streamed, paced by the slower side), so
// proxy_temp_path is checked and has no effect; client_body_temp_path is
// used (request_body_file.cc).
Status check_temp_path(const DirectiveCall& call);
// Where http_module() keeps its upstream groups: upstream::group_set(ctx,
// http_upstream_specs()) in an init of the http module, or
// upstream::find_group_set(scope, module, http_upstream_specs()).
upstream::UpstreamSpecs http_upstream_specs();

// limit_rate's directives, added to the http module (limit_rate.cc).
void add_limit_rate_directives(Module& m, ConfSlot<HttpLocConf> loc);
void add_hash_size_directives(Module& m, ConfSlot<HttpLocConf> loc, ConfSlot<HttpFinalConf> fin);

// The built tables of a loaded configuration, or null when it has no http block.
const HttpServers* http_servers(const Configuration& conf);
// The same while the configuration loads, for a module registered after
// "http" (its confs are finished after the http module's, so the tables are
// built): `scope` is the http block's, or one inside it.
HttpServers* http_servers(const ConfEnv& env, const ConfScope& scope);

// Largest number of large_client_header_buffers a request may use.
inline constexpr std::uint32_t kMaxLargeBuffers = 64;

}  // namespace vigil::http
