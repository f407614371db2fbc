// The http module's directives (nginx's ngx_http_core_module, plus the few
// other modules a static server needs: index, log, stub_status, and our
// "metrics"). Defaults are nginx's unless a comment says otherwise.
#include "http/core/conf.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "core/access_log_conf.h"
#include "core/conf/values.h"
#include "core/error_logs.h"
#include "core/syslog.h"
#include "event/listen_conf.h"
#include "event/tls/context.h"
#include "event/tls/ocsp_client.h"
#include "event/tls/stapling.h"
#include "http/core/module.h"
#include "http/core/phases.h"
#include "http/core/request.h"
#include "http/core/servers.h"
#include "http/core/ssl_certificate.h"
#include "upstream/upstream.h"
#include "vigil/event/listening.h"

namespace vigil::http {
namespace {

constexpr ConfContextMask kHttpAny = kHttpMainConf | kHttpSrvConf | kHttpLocConf;
constexpr int kSrvSpec = 0;
constexpr int kLocSpec = 1;
upstream::UpstreamSpecs g_upstream_specs;
int g_final_spec = -1;
IfBlockHandler g_if_block = nullptr;

// ---- listen -----------------------------------------------------------------

Status set_listen(const DirectiveCall& call, HttpSrvConf& srv) {
  return parse_listen(call, srv.listens, /*allow_default_server=*/true);
}

Status set_server_name(const DirectiveCall& call, HttpSrvConf& srv) {
  for (std::size_t i = 0; i < call.arg_count(); ++i) {
    std::string name = call.arg(i);
    if (!name.empty() && name[0] == '~') {
      // Matched caseless against the lower-cased Host, as nginx's.
      auto re = compile_http_regex(std::string_view(name).substr(1), /*caseless=*/true);
      if (!re) return call.error(re.status().message());
      srv.server_regexes.push_back(std::make_shared<const HttpRegex>(std::move(re.value())));
      srv.server_names.push_back(std::move(name));
      continue;
    }
    if (name.find('*') != std::string::npos && !(name.starts_with("*.") && name.size() > 2) &&
        !(name.ends_with(".*") && name.size() > 2)) {
      return call.error("invalid server name or wildcard \"" + name + "\"");
    }
    for (char& ch : name) {
      if (ch >= 'A' && ch <= 'Z') ch = static_cast<char>(ch - 'A' + 'a');
    }
    srv.server_names.push_back(std::move(name));
  }
  return Status::ok();
}

Status set_large_buffers(const DirectiveCall& call, HttpSrvConf& srv) {
  auto n = parse_number(call.arg(0));
  if (!n || *n < 1 || *n > static_cast<std::int64_t>(kMaxLargeBuffers)) {
    return call.invalid_value(0, ", it must be between 1 and " + std::to_string(kMaxLargeBuffers));
  }
  auto size = parse_size(call.arg(1));
  // At most 1m; the lower bound is connection_pool_size (merge_srv), as nginx.
  if (!size || *size == 0 || *size > (1u << 20)) {
    return call.invalid_value(1, ", it must be between 1 and 1m");
  }
  srv.large_buffers_num = static_cast<std::uint32_t>(*n);
  srv.large_buffers_size = static_cast<std::size_t>(*size);
  return Status::ok();
}

// connection_pool_size, request_pool_size: nginx's memory pool sizes. Vigil
// keeps a connection's and a request's memory in its own fixed structures
// and worker buffers, so the sizes change nothing; the values are checked as
// nginx checks them (NGX_MIN_POOL_SIZE and NGX_POOL_ALIGNMENT on 64 bits).
Status check_pool_size(const DirectiveCall& call) {
  constexpr std::uint64_t kMinPool = 112;
  constexpr std::uint64_t kPoolAlignment = 16;
  auto size = parse_size(call.arg(0));
  if (!size) return call.invalid_value(0);
  if (*size < kMinPool) {
    return call.error("the pool size must be no less than " + std::to_string(kMinPool));
  }
  if (*size % kPoolAlignment != 0) {
    return call.error("the pool size must be a multiple of " + std::to_string(kPoolAlignment));
  }
  return Status::ok();
}

// ---- location ---------------------------------------------------------------


// A location's kind and name from its block's arguments: "= /x", "=/x",
// "^~ /x", "~ re", "~re", "~* re", "~*re", "@name", "/x".
struct LocationName {
  enum Kind : std::uint8_t { kPrefix, kExact, kNoRegex, kRegex, kRegexCaseless, kNamed } kind;
  std::string name;
};

Result<LocationName> parse_location_name(const std::vector<std::string>& args) {
  if (args.size() == 2) {
    const std::string& mod = args[0];
    LocationName n{LocationName::kPrefix, args[1]};
    if (mod == "=") {
      n.kind = LocationName::kExact;
    } else if (mod == "^~") {
      n.kind = LocationName::kNoRegex;
    } else if (mod == "~") {
      n.kind = LocationName::kRegex;
    } else if (mod == "~*") {
      n.kind = LocationName::kRegexCaseless;
    } else {
      return Status::error("invalid location modifier \"" + mod + "\"");
    }
    return n;
  }
  const std::string& a = args[0];
  if (a.starts_with("=")) return LocationName{LocationName::kExact, a.substr(1)};
  if (a.starts_with("^~")) return LocationName{LocationName::kNoRegex, a.substr(2)};
  if (a.starts_with("~*")) return LocationName{LocationName::kRegexCaseless, a.substr(2)};
  if (a.starts_with("~")) return LocationName{LocationName::kRegex, a.substr(1)};
  if (a.starts_with("@")) return LocationName{LocationName::kNamed, a};
  return LocationName{LocationName::kPrefix, a};
}

Status check_location(const DirectiveCall& call) {
  if (is_noname_scope(call.env(), call.scope())) {
    return call.error("\"location\" directive is not allowed here");
  }
  std::vector<std::string> args;
  for (std::size_t i = 0; i < call.arg_count(); ++i) args.push_back(call.arg(i));
  auto n = parse_location_name(args);
  if (!n) return call.error(n.status().message());
  const std::string& name = n->name;
  switch (n->kind) {
    case LocationName::kRegex:
    case LocationName::kRegexCaseless: {
      if (name.empty()) return call.error("invalid location \"" + args.back() + "\"");
      // Compiled now as well as when the location is made, so that its
      // named groups are variables the directives inside it can use.
      auto re = compile_http_regex(name, n->kind == LocationName::kRegexCaseless);
      if (!re) return call.error(re.status().message());
      return Status::ok();
    }
    case LocationName::kNamed:
      if (name.size() < 2) return call.error("invalid location \"" + name + "\"");
      if (call.scope().context() != kHttpSrvConf) {
        return call.error("named location \"" + name + "\" can be on the server level only");
      }
      return Status::ok();
    case LocationName::kExact:
    case LocationName::kNoRegex:
    case LocationName::kPrefix:
      break;
  }
  if (name.empty() || name[0] != '/') {
    if (args.size() == 1 && n->kind != LocationName::kPrefix) {
      return call.error("invalid location \"" + args[0] + "\"");
    }
    return call.error("location \"" + name + "\" must start with \"/\"");
  }
  return Status::ok();
}

// Fills the location's kind, name and expression from the block's arguments.
Status name_location(const ConfScope& scope, HttpLocConf& loc) {
  loc.where = scope.where();
  auto n = parse_location_name(scope.args());
  if (!n) return Status::error(n.status().message() + loc.where);
  loc.name = n->name;
  loc.exact = n->kind == LocationName::kExact;
  loc.noregex = n->kind == LocationName::kNoRegex;
  loc.named = n->kind == LocationName::kNamed;
  if (n->kind == LocationName::kRegex || n->kind == LocationName::kRegexCaseless) {
    auto re = compile_http_regex(n->name, n->kind == LocationName::kRegexCaseless);
    if (!re) return Status::error(re.status().message() + loc.where);
    loc.regex = std::make_shared<const HttpRegex>(std::move(re.value()));
  }
  return Status::ok();
}

// ---- loc directives with arguments of their own -------------------------------

// root path; alias path (nginx's ngx_http_core_root): one of the two per level.
Status set_root(const DirectiveCall& call, HttpLocConf& loc) {
  const bool alias = call.name() == "alias";
  const char* other = alias ? "root" : "alias";
  if (call.scope().find_set(other) != nullptr) {
    return call.error("\"" + call.name() + "\" directive is duplicate, \"" + other +
                      "\" directive was specified earlier");
  }
  std::string value = call.arg(0);
  if (alias && is_if_scope(call.scope())) {
    return call.error("\"alias\" directive is not allowed here");
  }
  loc.alias = alias;
  loc.alias_len = 0;
  if (alias) {
    auto n = parse_location_name(call.scope().args());
    if (!n) return call.error(n.status().message());
    if (n->kind == LocationName::kNamed) {
      return call.error("\"alias\" directive cannot be used inside the named location");
    }
    const bool regex = n->kind == LocationName::kRegex || n->kind == LocationName::kRegexCaseless;
    loc.alias_len = regex ? std::string::npos : n->name.size();
    loc.alias_name = regex ? std::string() : n->name;
  }
  loc.root_vars = nullptr;
  if (value.find('$') != std::string::npos) {
    auto t = VarTemplate::compile(value);
    if (!t) return call.error(t.status().message());
    if (!t.value().is_literal()) {
      loc.root_vars = std::make_shared<const VarTemplate>(std::move(t.value()));
    }
  }
  // A trailing slash of root is dropped (the URI brings its own); alias keeps it.
  if (!alias && value.size() > 1 && value.back() == '/') value.pop_back();
  loc.root = std::move(value);
  return Status::ok();
}

Status set_index(const DirectiveCall& call, HttpLocConf& loc) {
  for (std::size_t i = 0; i < call.arg_count(); ++i) {
    const std::string& name = call.arg(i);
    if (name.empty()) return call.error("index \"\" in \"index\" directive is invalid");
    if (name[0] == '/') {
      // An absolute URI, the fallback when no file before it exists (as nginx).
      if (i + 1 != call.arg_count()) {
        return call.error("only the last index in \"index\" directive should be absolute");
      }
    } else if (name.find('/') != std::string::npos) {
      // nginx allows "dir/index.html"; we keep index files inside the
      // directory asked for.
      return call.error("index \"" + name + "\" must be a file name without \"/\"");
    }
    std::shared_ptr<const VarTemplate> vars;
    if (name.find('$') != std::string::npos) {
      auto t = VarTemplate::compile(name);
      if (!t) return call.error(t.status().message());
      if (!t.value().is_literal()) vars = std::make_shared<const VarTemplate>(std::move(t.value()));
    }
    loc.index.push_back(name);
    loc.index_vars.resize(loc.index.size() - 1);
    loc.index_vars.push_back(std::move(vars));
  }
  return Status::ok();
}

Status set_keepalive_timeout(const DirectiveCall& call, HttpLocConf& loc) {
  auto t = parse_msec(call.arg(0));
  if (!t) return call.invalid_value(0);
  loc.keepalive_timeout = *t;
  if (call.arg_count() == 2) {
    auto h = parse_sec(call.arg(1));
    if (!h) return call.invalid_value(1);
    loc.keepalive_header = static_cast<Msec>(*h) * 1000;
  }
  return Status::ok();
}

// keepalive_disable none | browser ...;
Status set_keepalive_disable(const DirectiveCall& call, HttpLocConf& loc) {
  loc.keepalive_disable = 0;
  for (std::size_t i = 0; i < call.arg_count(); ++i) {
    const std::string& a = call.arg(i);
    if (a == "msie6") {
      loc.keepalive_disable |= HttpLocConf::kDisableMsie6;
    } else if (a == "safari") {
      loc.keepalive_disable |= HttpLocConf::kDisableSafari;
    } else if (a != "none") {
      return call.error("invalid value \"" + a + "\"");
    }
  }
  return Status::ok();
}

// "types { text/html html htm; ... }": a block of free-form lines.
class TypesSink : public StatementSink {
 public:
  explicit TypesSink(TypesMap& map) : map_(map) {}
  Status on_statement(ConfParser& parser, const ConfStatement& st) override {
    if (st.end != ConfTerminator::kSemicolon) {
      return Status::error("unexpected \"{\"" + parser.origin().where(st.words[0].line));
    }
    if (st.words.size() == 1 && st.words[0].text == "include") {
      return Status::error("invalid number of arguments in \"include\" directive" +
                           parser.origin().where(st.words[0].line));
    }
    if (st.words.size() < 2) {
      return Status::error("invalid number of arguments in \"types\" block" +
                           parser.origin().where(st.words[0].line));
    }
    for (std::size_t i = 1; i < st.words.size(); ++i) {
      map_.add(st.words[i].text, st.words[0].text);
    }
    return Status::ok();
  }

 private:
  TypesMap& map_;
};

Status set_types(const DirectiveCall& call, HttpLocConf& loc) {
  auto map = std::make_shared<TypesMap>();
  TypesSink sink(*map);
  if (Status s = call.parse_block(sink); !s) return s;
  map->finish();
  loc.types = std::move(map);
  return Status::ok();
}

// access_log off | path [format [buffer=size] [gzip[=level]] [flush=time] [if=condition]];
// Several at one level each get the line; "off" there means none.
Status set_access_log(const DirectiveCall& call, HttpLocConf& loc) {
  if (call.arg(0) == "off") {
    if (call.arg_count() != 1) return call.error("invalid parameter \"" + call.arg(1) + "\"");
    loc.access_log_off = true;
    loc.access_logs.clear();
    return Status::ok();
  }
  auto log = std::make_shared<AccessLogConf>();
  const bool syslog = call.arg(0).starts_with(SyslogPeer::kPrefix);
  log->path = syslog ? call.arg(0) : call.env().prefixed(call.arg(0));
  log->where = call.where();
  if (!syslog && call.arg(0).find('$') != std::string::npos) {
    auto t = VarTemplate::compile(log->path);
    if (!t) return call.error(t.status().message());
    if (!t.value().is_literal()) log->path_var = std::make_shared<const VarTemplate>(std::move(t.value()));
  }
  LogBufferParams params;
  for (std::size_t i = 1; i < call.arg_count(); ++i) {
    const std::string& a = call.arg(i);
    if (i == 1 && a.find('=') == std::string::npos && a != "gzip") {
      log->format_name = a;
      continue;
    }
    std::string error;
    if (parse_log_buffer_param(a, params, error)) {
      if (!error.empty()) return call.error(error);
    } else if (a.starts_with("if=") && a.size() > 3) {
      auto t = VarTemplate::compile(std::string_view(a).substr(3));
      if (!t) return call.error(t.status().message());
      log->condition = std::move(t.value());
    } else {
      return call.error("invalid parameter \"" + a + "\"");
    }
  }
  if (Status s = finish_log_buffer_params(params, call.arg(0), log->path_var != nullptr); !s) {
    return call.error(s.message());
  }
  log->buffer = params.buffer;
  log->flush = params.flush;
  log->gzip = params.gzip;
  if (!loc.access_log_off) loc.access_logs.push_back(std::move(log));
  return Status::ok();
}

// open_log_file_cache max=N [inactive=time] [min_uses=N] [valid=time] | off;
Status set_open_log_file_cache(const DirectiveCall& call, HttpLocConf& loc) {
  if (call.arg(0) == "off") {
    if (call.arg_count() != 1) return call.error("invalid parameter \"" + call.arg(1) + "\"");
    loc.log_file_cache.reset();
    return Status::ok();
  }
  auto c = std::make_shared<LogFileCacheConf>();
  for (std::size_t i = 0; i < call.arg_count(); ++i) {
    const std::string_view a = call.arg(i);
    if (a.starts_with("max=")) {
      auto v = parse_number(a.substr(4));
      if (!v || *v == 0 || *v > 1000000) return call.error("invalid \"max\" value \"" + std::string(a.substr(4)) + "\"");
      c->max = static_cast<std::uint32_t>(*v);
    } else if (a.starts_with("inactive=")) {
      auto v = parse_msec(a.substr(9));
      if (!v) return call.error("invalid \"inactive\" value \"" + std::string(a.substr(9)) + "\"");
      c->inactive = *v;
    } else if (a.starts_with("min_uses=")) {
      auto v = parse_number(a.substr(9));
      if (!v || *v == 0 || *v > 1000000) return call.error("invalid \"min_uses\" value \"" + std::string(a.substr(9)) + "\"");
      c->min_uses = static_cast<std::uint32_t>(*v);
    } else if (a.starts_with("valid=")) {
      auto v = parse_msec(a.substr(6));
      if (!v) return call.error("invalid \"valid\" value \"" + std::string(a.substr(6)) + "\"");
      c->valid = *v;
    } else {
      return call.error("invalid \"open_log_file_cache\" parameter \"" + std::string(a) + "\"");
    }
  }
  if (c->max == 0) return call.error("\"open_log_file_cache\" must have \"max\" parameter");
  loc.log_file_cache = std::move(c);
  return Status::ok();
}

// log_format name [escape=default|json|none] string ...;
Status set_log_format(const DirectiveCall& call, HttpFinalConf& fin) {
  auto f = std::make_shared<LogFormat>();
  f->name = call.arg(0);
  if (f->name == "combined") return call.error("duplicate log_format name \"combined\"");
  for (const auto& other : fin.log_formats) {
    if (other->name == f->name) return call.error("duplicate log_format name \"" + f->name + "\"");
  }
  std::size_t i = 1;
  if (call.arg(i).starts_with("escape=")) {
    std::string_view e = std::string_view(call.arg(i)).substr(7);
    if (e == "default") {
      f->escape = VarEscape::kDefault;
    } else if (e == "json") {
      f->escape = VarEscape::kJson;
    } else if (e == "none") {
      f->escape = VarEscape::kNone;
    } else {
      return call.error("unknown log format escaping \"" + std::string(e) + "\"");
    }
    ++i;
    if (i >= call.arg_count())
      return call.error("invalid number of arguments in \"log_format\" directive");
  }
  std::string text;
  for (; i < call.arg_count(); ++i) text += call.arg(i);
  auto t = VarTemplate::compile(text);
  if (!t) return call.error(t.status().message());
  f->format = std::move(t.value());
  fin.log_formats.push_back(std::move(f));
  return Status::ok();
}

// error_page code ... [=[response]] uri
Status set_error_page(const DirectiveCall& call, HttpLocConf& loc) {
  if (call.arg_count() < 2)
    return call.error("invalid number of arguments in \"error_page\" directive");
  const std::string& uri = call.arg(call.arg_count() - 1);
  // A path, or a URL the client is redirected to.
  const bool url = uri.starts_with("http://") || uri.starts_with("https://") ||
                   uri.starts_with("$scheme");
  if (!url && (uri.empty() || (uri[0] != '/' && uri[0] != '@'))) {
    return call.error("error_page \"" + uri +
                      "\" must be a path starting with \"/\", a named location or an "
                      "http:// or https:// URL");
  }
  std::shared_ptr<const VarTemplate> target;
  if (uri[0] != '@' && uri.find('$') != std::string::npos) {
    auto t = VarTemplate::compile(uri);
    if (!t) return call.error(t.status().message());
    if (!t.value().is_literal()) target = std::make_shared<const VarTemplate>(std::move(t.value()));
  }
  int overwrite = -1;
  std::size_t codes_end = call.arg_count() - 1;
  const std::string& before = call.arg(codes_end - 1);
  if (!before.empty() && before[0] == '=') {
    overwrite = 0;
    if (before.size() > 1) {
      auto v = parse_number(std::string_view(before).substr(1));
      if (!v || *v < 200 || *v > 599) return call.invalid_value(codes_end - 1);
      overwrite = static_cast<int>(*v);
    }
    --codes_end;
  }
  if (codes_end == 0) return call.error("invalid number of arguments in \"error_page\" directive");
  for (std::size_t i = 0; i < codes_end; ++i) {
    auto v = parse_number(call.arg(i));
    if (!v || *v < 300 || *v > 599) {
      return call.error("value \"" + call.arg(i) + "\" must be between 300 and 599");
    }
    loc.error_pages.push_back({static_cast<int>(*v), overwrite, uri, target});
  }
  return Status::ok();
}

Status set_output_buffers(const DirectiveCall& call, HttpLocConf& loc) {
  auto n = parse_number(call.arg(0));
  auto size = parse_size(call.arg(1));
  if (!n || *n < 1) return call.invalid_value(0);
  if (!size || *size < 4096 || *size > (16u << 20)) return call.invalid_value(1);
  loc.output_buffer = static_cast<std::size_t>(*size);  // one buffer is enough: we refill it
  return Status::ok();
}

// client_body_temp_path path [level1 [level2 [level3]]]
Status set_client_body_temp_path(const DirectiveCall& call, HttpLocConf& loc) {
  if (Status st = check_temp_path(call); !st) return st;
  loc.client_body_temp_path = call.env().prefixed(call.arg(0));
  while (loc.client_body_temp_path.size() > 1 && loc.client_body_temp_path.back() == '/') {
    loc.client_body_temp_path.pop_back();
  }
  for (std::size_t i = 0; i < 3; ++i) {
    loc.client_body_temp_levels[i] =
        i + 1 < call.arg_count() ? static_cast<std::uint8_t>(call.arg(i + 1)[0] - '0') : 0;
  }
  return Status::ok();
}

// resolver address ... [valid=time] [ipv4=on|off] [ipv6=on|off] [status_zone=zone]
Status set_resolver(const DirectiveCall& call, HttpLocConf& loc) {
  auto conf = std::make_shared<ResolverConf>();
  std::vector<std::string> args = call.args();
  if (Status s = parse_resolver(args, *conf); !s) return call.error(s.message());
  loc.resolver = std::move(conf);
  return Status::ok();
}

// ---- limit_except -------------------------------------------------------------

// limit_except METHOD ... { ... }: the block's scope is the last child of the
// location's; its conf learns the methods it lets through. Names are as
// nginx's; the WebDAV ones never reach a location (an unknown method is
// answered 501 when the head is read) but are accepted.
Status set_limit_except(const DirectiveCall& call) {
  const ConfScope& scope = call.scope();
  if (is_noname_scope(call.env(), scope) || scope.children().empty()) {
    return call.error("\"limit_except\" directive is not allowed here");
  }
  struct Name {
    const char* name;
    std::uint32_t bits;
  };
  static constexpr Name kNames[] = {
      {"GET", method_bit(Method::kGet) | method_bit(Method::kHead)},
      {"HEAD", method_bit(Method::kHead)},
      {"POST", method_bit(Method::kPost)},
      {"PUT", method_bit(Method::kPut)},
      {"DELETE", method_bit(Method::kDelete)},
      {"OPTIONS", method_bit(Method::kOptions)},
      {"PATCH", method_bit(Method::kPatch)},
      {"MKCOL", 0},
      {"COPY", 0},
      {"MOVE", 0},
      {"PROPFIND", 0},
      {"PROPPATCH", 0},
      {"LOCK", 0},
      {"UNLOCK", 0},
  };
  // A bit no request has, so that a block naming only WebDAV methods is
  // still known as a limit_except block.
  std::uint32_t mask = 1u << 31;
  for (std::size_t i = 0; i < call.arg_count(); ++i) {
    bool known = false;
    for (const Name& n : kNames) {
      if (call.arg(i) == n.name) {
        mask |= n.bits;
        known = true;
      }
    }
    if (!known) return call.error("invalid method \"" + call.arg(i) + "\"");
  }
  const std::size_t at =
      call.env().modules != nullptr ? call.env().modules->index_of(http_module()) : 0;
  auto* loc = static_cast<HttpLocConf*>(scope.children().back()->conf(at, kLocSpec));
  if (loc == nullptr) return call.error("internal error: no location conf for \"limit_except\"");
  loc->limit_except_methods = mask;
  loc->noname = true;
  return Status::ok();
}

// ---- init and merge -------------------------------------------------------------

Status init_loc(const ConfInit& ctx, HttpLocConf& loc) {
  if (!ctx.is_set("index")) loc.index = {"index.html"};
  if (!ctx.is_set("access_log")) {
    auto log = std::make_shared<AccessLogConf>();
    log->path = ctx.env().prefixed("logs/access.log");
    loc.access_logs.push_back(std::move(log));
  }
  loc.root_path = ctx.env().prefixed(loc.root);
  loc.root_prefix = ctx.env().prefix;
  if (!ctx.is_set("client_body_temp_path")) {
    loc.client_body_temp_path = ctx.env().prefixed("client_body_temp");
  }
  return Status::ok();
}

Status merge_loc(const ConfInit& ctx, const HttpLocConf& parent, HttpLocConf& child) {
  if (is_if_scope(ctx.scope()) || child.limit_except_methods != 0) {
    // An if or limit_except block's conf stands for its location (nginx
    // names it so), and makes its content as the location does unless it
    // says otherwise (an if block met at run time keeps the handler of the
    // conf before it, rewrite.cc).
    child.name = parent.name;
    child.where = ctx.scope().where();
    child.noname = true;
    if (child.content == nullptr) child.content = parent.content;
  } else if (ctx.scope().context() == kHttpLocConf) {
    if (Status s = name_location(ctx.scope(), child); !s) return s;
  }
  if (!ctx.is_set("index")) {
    child.index = parent.index;
    child.index_vars = parent.index_vars;
  }
  if (!ctx.is_set("types")) child.types = parent.types;
  if (!ctx.is_set("limit_rate")) {
    child.limit_rate = parent.limit_rate;
    child.limit_rate_var = parent.limit_rate_var;
  }
  if (!ctx.is_set("limit_rate_after")) {
    child.limit_rate_after = parent.limit_rate_after;
    child.limit_rate_after_var = parent.limit_rate_after_var;
  }
  if (!ctx.is_set("open_log_file_cache")) child.log_file_cache = parent.log_file_cache;
  if (!ctx.is_set("access_log")) {
    child.access_logs = parent.access_logs;
    child.access_log_off = parent.access_log_off;
  }
  // A level's error_log replaces the inherited set (nginx's merge).
  if (!ctx.is_set("error_log")) child.error_log = parent.error_log;
  // nginx inherits error_page only when the level sets none.
  if (!ctx.is_set("error_page")) child.error_pages = parent.error_pages;
  if (!ctx.is_set("keepalive_timeout")) {
    child.keepalive_timeout = parent.keepalive_timeout;
    child.keepalive_header = parent.keepalive_header;
  }
  if (!ctx.is_set("output_buffers")) child.output_buffer = parent.output_buffer;
  if (!ctx.is_set("http2_chunk_size")) child.h2_chunk_size = parent.h2_chunk_size;
  if (!ctx.is_set("keepalive_disable")) child.keepalive_disable = parent.keepalive_disable;
  if (!ctx.is_set("client_body_temp_path")) {
    child.client_body_temp_path = parent.client_body_temp_path;
    std::memcpy(child.client_body_temp_levels, parent.client_body_temp_levels,
                sizeof child.client_body_temp_levels);
  }
  if (!ctx.is_set("resolver")) child.resolver = parent.resolver;
  if (!ctx.is_set("root") && !ctx.is_set("alias")) {
    child.root = parent.root;
    child.alias = parent.alias;
    child.alias_len = parent.alias_len;
    child.alias_name = parent.alias_name;
    child.root_vars = parent.root_vars;
  }
  child.root_path = ctx.env().prefixed(child.root);
  child.root_prefix = ctx.env().prefix;
  return Status::ok();
}

Status merge_srv(const ConfInit& ctx, const HttpSrvConf& parent, HttpSrvConf& child) {
  child.where = ctx.scope().where();
  merge_tls_server_conf(ctx, parent.ssl, child.ssl);
  if (!ctx.is_set("large_client_header_buffers")) {
    child.large_buffers_num = parent.large_buffers_num;
    child.large_buffers_size = parent.large_buffers_size;
  }
  if (!ctx.is_set("connection_pool_size")) child.connection_pool_size = parent.connection_pool_size;
  if (!ctx.is_set("http2_body_preread_size")) {
    child.h2_body_preread_size = parent.h2_body_preread_size;
  }
  if (!ctx.is_set("http2_recv_buffer_size")) child.h2_recv_buffer_size = parent.h2_recv_buffer_size;
  if (child.large_buffers_size < child.connection_pool_size) {
    return Status::error(
        "the \"large_client_header_buffers\" size must be equal to or greater than "
        "\"connection_pool_size\"" + ctx.scope().where());
  }
  if (child.large_buffers_size < child.client_header_buffer_size) {
    // nginx needs the large buffers to be at least as large: a line that
    // overflowed the first buffer must fit in one of them.
    child.large_buffers_size = child.client_header_buffer_size;
  }
  return Status::ok();
}

// Collects the locations under `scope` into `parent`'s tables (named ones
// into the server's), checking that nested ones stay inside their parent
// (nginx: 'location "/x" is outside location "/y"').
Status collect_locations(const ConfEnv& env, const ConfScope& scope, std::size_t module,
                         HttpSrvConf& srv, HttpLocConf& parent, std::vector<HttpLocConf*>& all) {
  for (const auto& child : scope.children()) {
    if (child->context() != kHttpLocConf) continue;
    auto* loc = static_cast<HttpLocConf*>(child->conf(module, kLocSpec));
    if (loc == nullptr) continue;
    if (Status s = bind_module_confs(env, *child, *loc); !s) return s;
    if (is_if_scope(*child)) {
      // Not a location to search: the rewrite program of `parent` takes it
      // when the condition holds. Nothing nests in it (the directives refuse).
      parent.if_blocks.push_back({child.get(), loc});
      all.push_back(loc);
      continue;
    }
    if (loc->limit_except_methods != 0) {
      // Not a location to search either: the location's conf for the
      // methods the block does not name (conf_for_method).
      parent.limit_except = loc;
      all.push_back(loc);
      continue;
    }
    if (!parent.name.empty()) {
      if (parent.exact) {
        return Status::error("location \"" + loc->name +
                             "\" cannot be inside the exact location \"" + parent.name + "\"" +
                             loc->where);
      }
      if (parent.named) {
        return Status::error("location \"" + loc->name +
                             "\" cannot be inside the named location \"" + parent.name + "\"" +
                             loc->where);
      }
      if (loc->named) {
        return Status::error("named location \"" + loc->name +
                             "\" can be on the server level only" + loc->where);
      }
      if (loc->regex == nullptr && !std::string_view(loc->name).starts_with(parent.name)) {
        return Status::error("location \"" + loc->name + "\" is outside location \"" + parent.name +
                             "\"" + loc->where);
      }
    }
    std::vector<HttpLocConf*>* list = &parent.prefix_locations;
    if (loc->named) {
      list = &srv.named_locations;
    } else if (loc->regex != nullptr) {
      list = &parent.regex_locations;
    } else if (loc->exact) {
      list = &parent.exact_locations;
    }
    if (loc->regex == nullptr) {
      for (const HttpLocConf* other : *list) {
        if (other->name == loc->name) {
          return Status::error("duplicate location \"" + loc->name + "\"" + loc->where);
        }
      }
    }
    list->push_back(loc);
    all.push_back(loc);
    if (Status s = collect_locations(env, *child, module, srv, *loc, all); !s) return s;
  }
  std::stable_sort(
      parent.prefix_locations.begin(), parent.prefix_locations.end(),
      [](const HttpLocConf* a, const HttpLocConf* b) { return a->name.size() > b->name.size(); });
  return Status::ok();
}

// Every server reachable on a "listen ... ssl" address, and every other
// server with an ssl_certificate (set or inherited), gets its TLS context
// now, at load time, as nginx's ngx_http_ssl_merge_srv_conf loads the
// certificates of each server that has them: -t and a reload report an
// unreadable certificate, a key that does not match or a wrong password,
// and the running workers are not touched.
Status build_tls_context(HttpSrvConf& srv) {
  if (srv.tls) return Status::ok();
  if (srv.ssl.where.empty()) srv.ssl.where = srv.where;
  // ALPN: h2 first where the server has http2 (RFC 9113 §3.2).
  std::vector<std::string> alpn;
  if (srv.http2) alpn.emplace_back("h2");
  alpn.emplace_back("http/1.1");
  alpn.emplace_back("http/1.0");
  auto ctx = TlsContext::server(srv.ssl, std::move(alpn));
  if (!ctx) return ctx.status();
  if (srv.ssl.certificate_variables()) {
    auto names = server_certificate_names(srv.ssl);
    if (!names) return names.status();
    ctx.value()->set_certificate_names(std::move(names.value()));
  }
  // OCSP responders named by a host name are resolved with the server's
  // resolver (nginx's ngx_http_ssl_init hands over clcf->resolver).
  if (srv.loc != nullptr) ctx.value()->set_resolver(srv.loc->resolver, srv.loc->resolver_timeout);
  if (srv.ssl.stapling) {
    if (Status s = tls_stapling_init(*ctx.value(), srv.ssl, srv.ssl.warnings); !s) return s;
  }
  if (srv.ssl.ocsp != TlsServerConf::Ocsp::kOff) {
    if (Status s = tls_ocsp_init(*ctx.value(), srv.ssl); !s) return s;
  }
  srv.tls = std::move(ctx.value());
  return Status::ok();
}

Status build_tls_contexts(HttpServers& servers) {
  // `listen ... http2` turns HTTP/2 on for every server of the address.
  for (const auto& addr : servers.addresses) {
    if (!addr->listen.http2) continue;
    for (HttpSrvConf* srv : addr->servers) srv->http2 = true;
  }
  // On a "listen ... ssl" address the default server needs a certificate
  // (or ssl_reject_handshake); another server without one keeps the
  // default's for its handshakes, as in nginx.
  for (const auto& addr : servers.addresses) {
    if (!addr->listen.ssl) continue;
    for (HttpSrvConf* srv : addr->servers) {
      if (srv != addr->default_server && srv->ssl.certificates.empty() &&
          !srv->ssl.reject_handshake) {
        continue;
      }
      if (Status s = build_tls_context(*srv); !s) return s;
    }
  }
  for (HttpSrvConf* srv : servers.servers) {
    if (srv->ssl.certificates.empty()) continue;
    if (Status s = build_tls_context(*srv); !s) return s;
  }
  return Status::ok();
}

// Runs once the whole http block is merged (see HttpFinalConf).
Status init_final(const ConfInit& ctx, HttpFinalConf& final_conf) {
  const std::size_t module = ctx.module();
  std::vector<HttpSrvConf*> servers;
  std::vector<HttpLocConf*> locations;
  for (const auto& child : ctx.scope().children()) {
    if (child->context() != kHttpSrvConf) continue;
    auto* srv = static_cast<HttpSrvConf*>(child->conf(module, kSrvSpec));
    auto* loc = static_cast<HttpLocConf*>(child->conf(module, kLocSpec));
    if (srv == nullptr || loc == nullptr)
      return Status::error("internal error: server without confs");
    srv->loc = loc;
    if (srv->where.empty()) srv->where = child->where();
    if (srv->listens.empty()) {
      // nginx: "listen *:80 | *:8000" — 80 only when it may bind it.
      ListenConf l;
      Listening probe;
      l.text = ::geteuid() == 0 ? "*:80" : "*:8000";
      (void)probe.set_address(l.text);
      l.addr = probe.addr;
      l.addrlen = probe.addrlen;
      l.addr_text = probe.addr_text;
      l.where = child->where();
      srv->listens.push_back(std::move(l));
    }
    locations.push_back(loc);
    if (Status s = bind_module_confs(ctx.env(), *child, *loc); !s) return s;
    if (Status s = collect_locations(ctx.env(), *child, module, *srv, *loc, locations); !s) {
      return s;
    }
    servers.push_back(srv);
  }
  // The http level's own loc conf too: an access_log there names a format
  // even when no server inherits it (nginx checks it as it parses).
  std::vector<HttpLocConf*> with_main = locations;
  if (auto* main_loc = static_cast<HttpLocConf*>(ctx.scope().conf(module, kLocSpec))) {
    with_main.push_back(main_loc);
  }
  for (HttpLocConf* loc : with_main) {
    for (const auto& log : loc->access_logs) {
      if (log->format_name == "combined" || log->format) continue;
      for (const auto& f : final_conf.log_formats) {
        if (f->name == log->format_name) log->format = f;
      }
      if (!log->format) {
        return Status::error("unknown log format \"" + log->format_name + "\"" + log->where);
      }
    }
  }
  auto built = HttpServers::build(std::move(servers), std::move(locations));
  if (!built) return built.status();
  final_conf.servers = std::move(built.value());
  PhaseEngine& phases = final_conf.servers->phases;
  register_phase_handlers(phases);
  phases.build();
  for (HttpSrvConf* srv : final_conf.servers->servers) srv->phases = &phases;
  const ConfScope* root = &ctx.scope();
  while (root->parent() != nullptr) root = root->parent();
  final_conf.servers->main_scope = root;
  return build_tls_contexts(*final_conf.servers);
}

Status set_stub_status(const DirectiveCall& call, HttpLocConf& loc) {
  // nginx before 1.7.5 took "on"; accept it, as nginx still does.
  if (call.arg_count() == 1 && call.arg(0) != "on") return call.invalid_value(0);
  loc.content = &kStubStatusContent;
  return Status::ok();
}

Module* make_http_module() {
  auto* m = new Module("http");
  // Spec order matters: HttpFinalConf comes last so its init sees every
  // server and location merged.
  auto srv = m->add_conf<HttpSrvConf>(kHttpMainConf | kHttpSrvConf, {}, merge_srv);
  auto loc = m->add_conf<HttpLocConf>(kHttpAny, init_loc, merge_loc);
  // `upstream { }` blocks (the upstream layer's one parser): their GroupSet is
  // finished with the http block, before the confs of the modules registered
  // after "http", so the proxy module's merge can resolve proxy_pass in it.
  g_upstream_specs =
      upstream::add_directives(*m, kHttpMainConf, kHttpUpsConf, upstream::Protocol::kHttp);
  auto fin = m->add_conf<HttpFinalConf>(kHttpMainConf, init_final);
  g_final_spec = fin.index();
  m->add("log_format", kHttpMainConf, Arity::at_least(2), fin.custom(set_log_format)).multiple =
      true;

  m->add_block("http", kMainConf, Arity::none(), kHttpMainConf);
  m->add_block("server", kHttpMainConf, Arity::none(), kHttpSrvConf).multiple = true;
  m->add_block("location", kHttpSrvConf | kHttpLocConf, Arity::between(1, 2), kHttpLocConf,
               DirectiveBody::handler(check_location))
      .multiple = true;
  // `if` opens a location-context scope too; this module alone opens the
  // http contexts, and the rewrite module gives the block its meaning.
  m->add_block("limit_except", kHttpLocConf, Arity::one_or_more(), kHttpLocConf,
               DirectiveBody::handler(set_limit_except));
  m->add_block("if", kHttpSrvConf | kHttpLocConf, Arity::one_or_more(), kHttpLocConf,
               DirectiveBody::handler([](const DirectiveCall& call) {
                 if (g_if_block == nullptr) return call.error("\"if\" is not supported");
                 return g_if_block(call);
               }))
      .multiple = true;

  // server
  m->add("listen", kHttpSrvConf, Arity::one_or_more(), srv.custom(set_listen)).multiple = true;
  m->add("server_name", kHttpSrvConf, Arity::one_or_more(), srv.custom(set_server_name)).multiple =
      true;
  m->add("client_header_timeout", kHttpMainConf | kHttpSrvConf, Arity::exactly(1),
         srv.msec(&HttpSrvConf::client_header_timeout, 60000));
  m->add("client_header_buffer_size", kHttpMainConf | kHttpSrvConf, Arity::exactly(1),
         srv.size(&HttpSrvConf::client_header_buffer_size, 1024, 128));
  m->add("large_client_header_buffers", kHttpMainConf | kHttpSrvConf, Arity::exactly(2),
         srv.custom(set_large_buffers));
  m->add("connection_pool_size", kHttpMainConf | kHttpSrvConf, Arity::exactly(1),
         srv.custom([](const DirectiveCall& call, HttpSrvConf& s) {
           if (Status st = check_pool_size(call); !st) return st;
           s.connection_pool_size = static_cast<std::size_t>(*parse_size(call.arg(0)));
           return Status::ok();
         }));
  m->add("request_pool_size", kHttpMainConf | kHttpSrvConf, Arity::exactly(1),
         DirectiveBody::handler(check_pool_size));
  m->add("merge_slashes", kHttpMainConf | kHttpSrvConf, Arity::on_off(),
         srv.flag(&HttpSrvConf::merge_slashes, true));
  m->add("ignore_invalid_headers", kHttpMainConf | kHttpSrvConf, Arity::on_off(),
         srv.flag(&HttpSrvConf::ignore_invalid_headers, true));
  m->add("underscores_in_headers", kHttpMainConf | kHttpSrvConf, Arity::on_off(),
         srv.flag(&HttpSrvConf::underscores_in_headers, false));
  add_tls_server_directives(*m, kHttpMainConf | kHttpSrvConf, srv.index(), typeid(HttpSrvConf),
                            tls_server_member<HttpSrvConf, &HttpSrvConf::ssl>);
  add_tls_ocsp_directives(*m, kHttpMainConf | kHttpSrvConf, srv.index(), typeid(HttpSrvConf),
                          tls_server_member<HttpSrvConf, &HttpSrvConf::ssl>);
  // HTTP/2 (http/v2).
  m->add("http2", kHttpMainConf | kHttpSrvConf, Arity::on_off(),
         srv.flag(&HttpSrvConf::http2, false));
  m->add("http2_max_concurrent_streams", kHttpMainConf | kHttpSrvConf, Arity::exactly(1),
         srv.number<std::uint32_t>(&HttpSrvConf::h2_max_concurrent_streams, 128));
  m->add("http2_body_preread_size", kHttpMainConf | kHttpSrvConf, Arity::exactly(1),
         srv.custom([](const DirectiveCall& call, HttpSrvConf& s) {
           auto v = parse_size(call.arg(0));
           // A stream's window: RFC 9113 §6.9.2 bounds it by 2^31-1.
           if (!v || *v > 0x7fffffffu) return call.invalid_value(0);
           s.h2_body_preread_size = static_cast<std::size_t>(*v);
           return Status::ok();
         }));
  m->add("http2_recv_buffer_size", kHttpMainConf, Arity::exactly(1),
         srv.custom([](const DirectiveCall& call, HttpSrvConf& s) {
           auto v = parse_size(call.arg(0));
           if (!v || *v < 2 * 9 || *v > (std::size_t{1} << 24)) {
             return call.error("the http2_recv_buffer_size value must be between 18 and 16m");
           }
           s.h2_recv_buffer_size = static_cast<std::size_t>(*v);
           return Status::ok();
         }));
  // nginx 1.22's older HTTP/2 limits: keepalive_timeout, keepalive_requests,
  // client_header_timeout and large_client_header_buffers say them here, as
  // in nginx 1.19.7+, so they are accepted and mean nothing of their own.
  for (const char* old_name : {"http2_idle_timeout", "http2_max_requests", "http2_max_field_size",
                               "http2_max_header_size", "http2_recv_timeout",
                               "http2_streams_index_size", "http2_max_concurrent_pushes"}) {
    m->add(old_name, kHttpMainConf | kHttpSrvConf, Arity::exactly(1),
           DirectiveBody::handler([](const DirectiveCall&) { return Status::ok(); }));
  }
  // Server push (RFC 9113 §8.4) is never done: a server may choose not to
  // push, browsers no longer take it, and nginx 1.25.1 dropped it too.
  // nginx 1.22's directives are accepted and push nothing.
  m->add("http2_push", kHttpAny, Arity::exactly(1),
         DirectiveBody::handler([](const DirectiveCall&) { return Status::ok(); }))
      .multiple = true;
  m->add("http2_push_preload", kHttpAny, Arity::on_off(),
         DirectiveBody::handler([](const DirectiveCall& call) {
           return parse_flag(call.arg(0)) ? Status::ok() : call.invalid_value(0);
         }));
  m->add("ssl_reject_handshake", kHttpMainConf | kHttpSrvConf, Arity::on_off(),
         srv.custom([](const DirectiveCall& call, HttpSrvConf& s) {
           auto v = parse_flag(call.arg(0));
           if (!v) return call.invalid_value(0);
           s.ssl.reject_handshake = *v;
           return Status::ok();
         }));

  // location (and inherited from server and http)
  m->add("root", kHttpAny, Arity::exactly(1), loc.custom(set_root));
  m->add("uninitialized_variable_warn", kHttpAny, Arity::on_off(),
         loc.flag(&HttpLocConf::warn_uninitialized, true));
  m->add("log_not_found", kHttpAny, Arity::on_off(), loc.flag(&HttpLocConf::log_not_found, true));
  m->add("internal", kHttpLocConf, Arity::none(), loc.custom([](const DirectiveCall&, HttpLocConf& l) {
    l.internal = true;
    return Status::ok();
  }));
  m->add("alias", kHttpLocConf, Arity::exactly(1), loc.custom(set_root));
  m->add("index", kHttpAny, Arity::one_or_more(), loc.custom(set_index)).multiple = true;
  m->add("sendfile", kHttpAny, Arity::on_off(), loc.flag(&HttpLocConf::sendfile, false));
  m->add("tcp_nopush", kHttpAny, Arity::on_off(), loc.flag(&HttpLocConf::tcp_nopush, false));
  m->add("tcp_nodelay", kHttpAny, Arity::on_off(), loc.flag(&HttpLocConf::tcp_nodelay, true));
  m->add("chunked_transfer_encoding", kHttpAny, Arity::on_off(),
         loc.flag(&HttpLocConf::chunked_transfer_encoding, true));
  m->add("keepalive_timeout", kHttpAny, Arity::between(1, 2), loc.custom(set_keepalive_timeout));
  m->add("keepalive_requests", kHttpAny, Arity::exactly(1),
         loc.number<std::uint64_t>(&HttpLocConf::keepalive_requests, 1000));
  m->add("keepalive_time", kHttpAny, Arity::exactly(1),
         loc.msec(&HttpLocConf::keepalive_time, 3600000));
  m->add("keepalive_disable", kHttpAny, Arity::one_or_more(), loc.custom(set_keepalive_disable));
  m->add("client_max_body_size", kHttpAny, Arity::exactly(1),
         loc.size(&HttpLocConf::client_max_body_size, std::size_t{1} << 20));
  m->add("client_body_timeout", kHttpAny, Arity::exactly(1),
         loc.msec(&HttpLocConf::client_body_timeout, 60000));
  m->add("send_timeout", kHttpAny, Arity::exactly(1), loc.msec(&HttpLocConf::send_timeout, 60000));
  m->add("http2_chunk_size", kHttpAny, Arity::exactly(1),
         loc.custom([](const DirectiveCall& call, HttpLocConf& l) {
           auto v = parse_size(call.arg(0));
           if (!v || *v == 0) return call.error("the http2 chunk size cannot be zero");
           // nghttp2 never asks for more than the peer's frame size (16 KiB
           // unless it allows more): a larger chunk is the same as that.
           l.h2_chunk_size = static_cast<std::size_t>(*v);
           return Status::ok();
         }));
  m->add_block("types", kHttpAny, Arity::none(), 0, loc.custom(set_types));
  m->add("default_type", kHttpAny, Arity::exactly(1),
         loc.string(&HttpLocConf::default_type, "text/plain"));
  m->add("access_log", kHttpAny, Arity::between(1, 6), loc.custom(set_access_log)).multiple = true;
  m->add("open_log_file_cache", kHttpAny, Arity::between(1, 4), loc.custom(set_open_log_file_cache));
  m->add("error_log", kHttpAny, Arity::between(1, 2),
         loc.custom([](const DirectiveCall& call, HttpLocConf& l) {
           return set_error_log(call, l.error_log);
         }))
      .multiple = true;
  m->add("error_page", kHttpAny, Arity::at_least(2), loc.custom(set_error_page)).multiple = true;
  m->add("lingering_close", kHttpAny, Arity::exactly(1),
         loc.one_of(
             &HttpLocConf::lingering_close, Lingering::kOn,
             {{"off", Lingering::kOff}, {"on", Lingering::kOn}, {"always", Lingering::kAlways}}));
  m->add("lingering_time", kHttpAny, Arity::exactly(1),
         loc.msec(&HttpLocConf::lingering_time, 30000));
  m->add("lingering_timeout", kHttpAny, Arity::exactly(1),
         loc.msec(&HttpLocConf::lingering_timeout, 5000));
  m->add("if_modified_since", kHttpAny, Arity::exactly(1),
         loc.one_of(&HttpLocConf::if_modified_since, IfModifiedSince::kExact,
                    {{"off", IfModifiedSince::kOff},
                     {"exact", IfModifiedSince::kExact},
                     {"before", IfModifiedSince::kBefore}}));
  m->add("output_buffers", kHttpAny, Arity::exactly(2), loc.custom(set_output_buffers));
  m->add("resolver", kHttpAny, Arity::one_or_more(), loc.custom(set_resolver));
  m->add("resolver_timeout", kHttpAny, Arity::exactly(1),
         loc.msec(&HttpLocConf::resolver_timeout, 30000));
  add_limit_rate_directives(*m, loc);
  m->add("absolute_redirect", kHttpAny, Arity::on_off(),
         loc.flag(&HttpLocConf::absolute_redirect, true));
  m->add("server_name_in_redirect", kHttpAny, Arity::on_off(),
         loc.flag(&HttpLocConf::server_name_in_redirect, false));
  m->add("port_in_redirect", kHttpAny, Arity::on_off(),
         loc.flag(&HttpLocConf::port_in_redirect, true));
  // nginx's "build" adds the build name configure was given; Vigil's builds
  // have none, so it is "on".
  m->add("server_tokens", kHttpAny, Arity::exactly(1),
         loc.one_of(&HttpLocConf::server_tokens, true,
                    {{"on", true}, {"off", false}, {"build", true}}));
  // The body is always read into one buffer (client_body_buffer_size), which
  // is what "on" asks for; "off" changes nothing either.
  m->add("client_body_in_single_buffer", kHttpAny, Arity::on_off(),
         loc.flag(&HttpLocConf::client_body_in_single_buffer, false));
  add_hash_size_directives(*m, loc, fin);
  m->add("client_body_temp_path", kHttpAny, Arity::between(1, 4),
         loc.custom(set_client_body_temp_path));
  m->add("client_body_in_file_only", kHttpAny, Arity::exactly(1),
         loc.one_of(&HttpLocConf::client_body_in_file_only, BodyInFile::kOff,
                    {{"off", BodyInFile::kOff}, {"on", BodyInFile::kOn},
                     {"clean", BodyInFile::kClean}}));
  m->add("client_body_buffer_size", kHttpAny, Arity::exactly(1),
         loc.size(&HttpLocConf::client_body_buffer_size, 16384, 1));
  m->add("stub_status", kHttpSrvConf | kHttpLocConf, Arity::between(0, 1),
         loc.custom(set_stub_status));
  m->add("metrics", kHttpSrvConf | kHttpLocConf, Arity::none(),
         loc.custom([](const DirectiveCall&, HttpLocConf& l) {
           l.content = &kMetricsContent;
           return Status::ok();
         }));
  return m;
}

}  // namespace

Status set_location_content(const DirectiveCall& call, const ContentHandler* handler) {
  const std::size_t at =
      call.env().modules != nullptr ? call.env().modules->index_of(http_module()) : 0;
  ConfScope* owner = call.scope().owner_of(at, kLocSpec);
  auto* loc = owner != nullptr ? static_cast<HttpLocConf*>(owner->conf(at, kLocSpec)) : nullptr;
  if (loc == nullptr) return call.error("\"" + call.name() + "\" directive is not allowed here");
  loc->content = handler;
  return Status::ok();
}

Status check_temp_path(const DirectiveCall& call) {
  if (call.arg(0).empty()) return call.invalid_value(0);
  for (std::size_t i = 1; i < call.arg_count(); ++i) {
    if (call.arg(i) != "1" && call.arg(i) != "2") return call.invalid_value(i);
  }
  return Status::ok();
}

const Module& http_module() {
  static const Module* module = make_http_module();  // never destroyed: used until exit
  return *module;
}

upstream::UpstreamSpecs http_upstream_specs() {
  (void)http_module();
  return g_upstream_specs;
}

HttpServers* http_servers(const ConfEnv& env, const ConfScope& scope) {
  const Module& m = http_module();  // sets g_final_spec
  const std::size_t at = env.modules != nullptr ? env.modules->index_of(m) : ModuleRegistry::npos;
  if (at == ModuleRegistry::npos) return nullptr;
  for (const ConfScope* s = &scope; s != nullptr; s = s->parent()) {
    if (auto* f = static_cast<HttpFinalConf*>(s->conf(at, g_final_spec))) return f->servers.get();
  }
  return nullptr;
}

const HttpServers* http_servers(const Configuration& conf) {
  const Module& m = http_module();  // sets g_final_spec
  const auto* f = conf.find<HttpFinalConf>(m, g_final_spec);
  return f != nullptr ? f->servers.get() : nullptr;
}

void set_if_block_handler(IfBlockHandler handler) { g_if_block = handler; }

bool is_noname_scope(const ConfEnv& env, const ConfScope& scope) {
  if (is_if_scope(scope)) return true;
  if (scope.context() != kHttpLocConf) return false;
  const std::size_t at = env.modules != nullptr ? env.modules->index_of(http_module()) : 0;
  const auto* loc = static_cast<const HttpLocConf*>(scope.conf(at, kLocSpec));
  return loc != nullptr && loc->limit_except_methods != 0;
}

bool is_if_scope(const ConfScope& scope) {
  return scope.context() == kHttpLocConf && !scope.args().empty() && !scope.args()[0].empty() &&
         scope.args()[0][0] == '(';
}

}  // namespace vigil::http
