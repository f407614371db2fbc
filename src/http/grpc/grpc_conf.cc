// The grpc module's conf (nginx's ngx_http_grpc_module commands and
// ngx_http_grpc_merge_loc_conf): grpc_pass resolved to its upstream group,
// grpc_set_header with nginx's defaults, and the core's shared directives
// and grpc_ssl_* under the "grpc" prefix.
#include "http/grpc/grpc_conf.h"

#include <openssl/ssl.h>

#include <utility>

#include "core/conf/values.h"
#include "event/tls/context.h"
#include "http/core/conf.h"
#include "http/core/module.h"
#include "http/core/request.h"
#include "http/grpc/grpc.h"
#include "http/upstream/upstream_ssl_certificate.h"
#include "upstream/upstream.h"

namespace vigil::http {
namespace {

constexpr ConfContextMask kLoc = kHttpMainConf | kHttpSrvConf | kHttpLocConf;

// grpc_pass [grpc://|grpcs://]address|upstream-name
Status set_grpc_pass(const DirectiveCall& call, GrpcConf& g) {
  const std::string& url = call.arg(0);
  if (url.find('$') != std::string::npos) {
    // As nginx: with variables, the scheme and host are taken per request.
    auto t = VarTemplate::compile(url);
    if (!t) return call.error(t.status().message());
    if (!t.value().is_literal()) {
      g.url = std::move(t.value());
      g.variables = true;
      g.pass = url;
      g.where = call.where();
      g.enabled = true;
      return set_location_content(call, &grpc::kContent);
    }
  }
  std::string rest = url;
  g.https = false;
  if (url.size() > 7 && conf::iequals(std::string_view(url).substr(0, 7), "grpc://")) {
    rest = url.substr(7);
  } else if (url.size() > 8 && conf::iequals(std::string_view(url).substr(0, 8), "grpcs://")) {
    rest = url.substr(8);
    g.https = true;
  }
  if (rest.empty() || rest.find('/') != std::string::npos) {
    return call.error("invalid host in upstream \"" + rest + "\"");
  }
  g.target = rest;
  if (rest.size() >= 5 && conf::iequals(std::string_view(rest).substr(0, 5), "unix:")) {
    g.host = "localhost";
  } else {
    g.host = rest;
  }
  g.pass = url;
  g.where = call.where();
  g.enabled = true;
  return set_location_content(call, &grpc::kContent);
}

Status set_header(const DirectiveCall& call, GrpcConf& g) {
  ProxyHeader h;
  h.name = call.arg(0);
  for (char ch : h.name) {
    if (!(ch > 0x20 && ch < 0x7f) || ch == ':') return call.invalid_value(0);
  }
  auto t = VarTemplate::compile(call.arg(1));
  if (!t) return call.error(t.status().message());
  h.value = std::move(t.value());
  g.set_headers.push_back(std::move(h));
  return Status::ok();
}

// nginx's defaults unless the list names the field: the length of the
// body, TE when the client said "trailers", and the fields HTTP/2 has no
// room for (an empty value: the client's is not passed).
void add_default_headers(std::vector<ProxyHeader>& list) {
  static constexpr const char* kDefaults[][2] = {
      {"Content-Length", "$content_length"}, {"TE", "$grpc_internal_trailers"},
      {"Host", ""},         {"Connection", ""}, {"Proxy-Connection", ""},
      {"Transfer-Encoding", ""}, {"Keep-Alive", ""}, {"Expect", ""},
      {"Upgrade", ""},
  };
  for (const auto& d : kDefaults) {
    bool has = false;
    for (const auto& h : list) has = has || iequals(h.name, d[0]);
    if (has) continue;
    list.push_back(ProxyHeader{d[0], VarTemplate::compile(d[1]).value()});
  }
}

// A Host entry of grpc_set_header, even an empty one, replaces the
// :authority: it goes as a "host" field with the others (nginx's host_set;
// the defaults' empty Host does not count).
void take_host(GrpcConf& g) {
  g.host_set = false;
  for (const auto& h : g.set_headers) {
    if (iequals(h.name, "host")) g.host_set = true;
  }
}

TlsClientConf& grpc_ssl_conf(void* conf) {
  return static_cast<GrpcConf*>(conf)->ssl;
}

UpstreamConf& grpc_upstream_conf(void* conf) {
  return *static_cast<GrpcConf*>(conf);
}

Status resolve(const ConfInit& ctx, GrpcConf& g) {
  const ModuleRegistry* modules = ctx.env().modules;
  const std::size_t http =
      modules != nullptr ? modules->index_of(http_module()) : ModuleRegistry::npos;
  upstream::GroupSet* set = http != ModuleRegistry::npos
                                ? upstream::find_group_set(ctx.scope(), http, http_upstream_specs())
                                : nullptr;
  if (set == nullptr) return Status::error("internal error: no upstream groups" + g.where);
  if (g.variables) {
    g.groups = set;  // the scheme is known per request: a TLS context in case
  } else {
    auto group = set->find_or_add(g.target, 0, g.where);
    if (!group) return group.status();
    g.group = group.value();
  }
  if (g.https || g.variables) {
    if (g.ssl.where.empty()) g.ssl.where = g.where;
    auto tls = TlsContext::client(g.ssl);
    if (!tls) return tls.status();
    g.tls = std::move(tls.value());
    if (Status s = upstream_core::set_client_certificate_names(*g.tls, g.ssl); !s) return s;
    // gRPC servers speak HTTP/2 over TLS only when ALPN says "h2" (RFC 9113 §3.2).
    static const unsigned char kH2[] = {2, 'h', '2'};
    if (SSL_CTX_set_alpn_protos(g.tls->native(), kH2, sizeof kH2) != 0) {
      return Status::error("SSL_CTX_set_alpn_protos() failed" + g.where);
    }
    if (!g.ssl.name.empty()) {
      auto t = VarTemplate::compile(g.ssl.name);
      if (!t) return Status::error(t.status().message() + g.ssl.where);
      g.ssl_name = std::move(t.value());
    }
  }
  if (g.group != nullptr && !g.group->hash_key.empty()) {
    auto t = VarTemplate::compile(g.group->hash_key);
    if (!t) return Status::error(t.status().message() + g.group->where);
    g.hash_key = std::move(t.value());
  }
  return Status::ok();
}

Status init_grpc(const ConfInit&, GrpcConf& g) {
  take_host(g);  // before the defaults, which have a Host of their own
  add_default_headers(g.set_headers);
  return Status::ok();
}

Status merge_grpc(const ConfInit& ctx, const GrpcConf& parent, GrpcConf& child) {
  merge_upstream_conf(ctx, "grpc", parent, child);
  merge_tls_client_conf(ctx, parent.ssl, child.ssl, "grpc");
  if (!ctx.is_set("grpc_set_header")) {
    child.set_headers = parent.set_headers;
    child.host_set = parent.host_set;
  } else {
    take_host(child);
    add_default_headers(child.set_headers);
  }
  if (!ctx.is_set("grpc_pass") && parent.enabled && is_noname_scope(ctx.env(), ctx.scope())) {
    // An if block passes as its location does, to the location's group.
    child.enabled = true;
    child.pass = parent.pass;
    child.where = parent.where;
    child.host = parent.host;
    child.https = parent.https;
    child.target = parent.target;
    child.group = parent.group;
    child.variables = parent.variables;
    child.url = parent.url;
    child.groups = parent.groups;
    child.hash_key = parent.hash_key;
    child.tls = parent.tls;
    child.ssl_name = parent.ssl_name;
    return Status::ok();
  }
  return child.enabled ? resolve(ctx, child) : Status::ok();
}

// $grpc_internal_trailers: "trailers" when the client's TE says so (nginx's
// default TE field to the backend).
bool var_grpc_internal_trailers(const Request& r, std::string_view, VarSink& s) {
  bool found = false;
  for (std::uint32_t i = 0; i < r.nfields; ++i) {
    const HeaderField& f = r.fields[i];
    if (!iequals(f.name, "te")) continue;
    const std::string_view v = f.value;
    for (std::size_t k = 0; k + 8 <= v.size(); ++k) {
      if (iequals(v.substr(k, 8), "trailers")) found = true;
    }
  }
  if (!found) return false;
  s.put("trailers");
  return true;
}

constexpr VarSpec kGrpcVariables[] = {
    {"grpc_internal_trailers", var_grpc_internal_trailers},
};

void add_grpc_directives(Module& m, ConfSlot<GrpcConf> conf) {
  using F = std::function<Status(const DirectiveCall&, GrpcConf&)>;
  auto add = [&](const char* name, ConfContextMask ctx, Arity arity, F fn) -> Directive& {
    return m.add(name, ctx, arity, conf.custom(std::move(fn)));
  };
  add("grpc_pass", kHttpLocConf, Arity::exactly(1), set_grpc_pass);
  add("grpc_set_header", kLoc, Arity::exactly(2), set_header).multiple = true;
  add_upstream_directives(m, kLoc, conf.index(), typeid(GrpcConf), grpc_upstream_conf, "grpc");
  // grpc_ssl_*; TLS is switched on by "grpc_pass grpcs://".
  add_tls_client_directives(m, kLoc, conf.index(), typeid(GrpcConf), grpc_ssl_conf,
                            /*with_enable_flag=*/false, "grpc");
}

}  // namespace

const HttpModule& grpc_module() {
  static const HttpModule* module = [] {
    auto* m = new HttpModule("http_grpc");  // never destroyed: used until exit
    add_grpc_directives(m->conf(), m->add_loc_conf<GrpcConf>(init_grpc, merge_grpc));
    m->set_variables(kGrpcVariables);
    return m;
  }();
  return *module;
}

const GrpcConf& grpc_conf(const HttpLocConf& loc) {
  return loc_conf<GrpcConf>(loc, grpc_module());
}

}  // namespace vigil::http
