// The proxy module's conf (nginx's ngx_http_proxy_module commands and
// ngx_http_proxy_merge_loc_conf): the proxy_* directives, their defaults and
// inheritance, and proxy_pass resolved to its upstream group.
#include "http/proxy/proxy_conf.h"

#include <functional>
#include <utility>

#include "codec/tokens.h"
#include "core/conf/values.h"
#include "event/tls/context.h"
#include "http/core/conf.h"
#include "http/core/module.h"
#include "http/core/request.h"
#include "http/proxy/proxy.h"
#include "http/upstream/upstream_ssl_certificate.h"
#include "upstream/upstream.h"
#include "vigil/event/peer.h"

namespace vigil::http {
namespace {

constexpr ConfContextMask kLoc = kHttpMainConf | kHttpSrvConf | kHttpLocConf;

// proxy_pass http://host[:port][/uri] | https://host[:port][/uri]
Status set_proxy_pass(const DirectiveCall& call, ProxyConf& p) {
  const std::string& url = call.arg(0);
  if (url.find('$') != std::string::npos) {
    // As nginx: with variables, the scheme and host are checked per request
    // on the evaluated URL.
    auto t = VarTemplate::compile(url);
    if (!t) return call.error(t.status().message());
    if (!t.value().is_literal()) {
      p.url = std::move(t.value());
      p.variables = true;
      p.pass = url;
      p.where = call.where();
      p.enabled = true;
      return set_location_content(call, &proxy::kContent);
    }
  }
  std::size_t scheme = 0;
  if (url.size() >= 7 && conf::iequals(std::string_view(url).substr(0, 7), "http://")) {
    scheme = 7;
    p.https = false;
  } else if (url.size() >= 8 && conf::iequals(std::string_view(url).substr(0, 8), "https://")) {
    scheme = 8;
    p.https = true;
  } else {
    return call.error("invalid URL prefix in \"" + url + "\"");
  }
  std::string rest = url.substr(scheme);
  if (rest.size() >= 5 && conf::iequals(std::string_view(rest).substr(0, 5), "unix:")) {
    // "unix:/path[:/uri]": the socket's path ends at the next ':' (nginx);
    // the Host the backend gets is "localhost", $proxy_port is empty.
    const std::size_t colon = rest.find(':', 5);
    p.target = rest.substr(0, colon);
    if (p.target.size() == 5) return call.error("no path in the unix domain socket");
    if (colon != std::string::npos) {
      p.has_uri = true;
      p.uri = rest.substr(colon + 1);
    }
    p.proxy_host = "localhost";
    p.proxy_port.clear();
    p.pass = url;
    p.where = call.where();
    p.enabled = true;
    return set_location_content(call, &proxy::kContent);
  }
  std::size_t slash = rest.find('/');
  p.target = rest.substr(0, slash);
  if (p.target.empty())
    return call.error("no host in \"" + url + "\" of the \"proxy_pass\" directive");
  if (slash != std::string::npos) {
    p.has_uri = true;
    p.uri = rest.substr(slash);
  }
  // $proxy_host leaves out the scheme's default port, as nginx's does.
  p.proxy_host = p.target;
  const std::string_view default_port = p.https ? ":443" : ":80";
  if (p.proxy_host.ends_with(default_port)) {
    p.proxy_host.resize(p.proxy_host.size() - default_port.size());
  }
  // $proxy_port: the port written after the host, else the scheme's.
  p.proxy_port = p.https ? "443" : "80";
  if (const std::size_t colon = p.target.rfind(':');
      colon != std::string::npos && p.target.find(']', colon) == std::string::npos) {
    p.proxy_port = p.target.substr(colon + 1);
  }
  p.pass = url;
  p.where = call.where();
  p.enabled = true;
  return set_location_content(call, &proxy::kContent);
}

Status set_http_version(const DirectiveCall& call, ProxyConf& p) {
  if (call.arg(0) == "1.0") {
    p.http_version = 1000;
  } else if (call.arg(0) == "1.1") {
    p.http_version = 1001;
  } else {
    return call.invalid_value(0, ", it must be \"1.0\" or \"1.1\"");
  }
  return Status::ok();
}

Status set_header(const DirectiveCall& call, ProxyConf& p) {
  ProxyHeader h;
  h.name = call.arg(0);
  for (char ch : h.name) {
    if (!(ch > 0x20 && ch < 0x7f) || ch == ':') return call.invalid_value(0);
  }
  auto t = VarTemplate::compile(call.arg(1));
  if (!t) return call.error(t.status().message());
  h.value = std::move(t.value());
  p.set_headers.push_back(std::move(h));
  return Status::ok();
}

// A directive whose one argument is a string with variables.
Status set_template(const DirectiveCall& call, VarTemplate& out) {
  auto t = VarTemplate::compile(call.arg(0));
  if (!t) return call.error(t.status().message());
  out = std::move(t.value());
  return Status::ok();
}

Status set_buffers(const DirectiveCall& call, ProxyConf& p) {
  auto n = parse_number(call.arg(0));
  auto size = parse_size(call.arg(1));
  if (!n || *n < 2 || *n > 64) return call.invalid_value(0, ", it must be between 2 and 64");
  if (!size || *size < 1 || *size > (16u << 20)) return call.invalid_value(1);
  p.buffers_num = static_cast<std::uint32_t>(*n);
  p.buffers_size = static_cast<std::size_t>(*size);
  return Status::ok();
}

Status set_size(const DirectiveCall& call, std::size_t& out) {
  auto v = parse_size(call.arg(0));
  if (!v || *v < 1 || *v > (16u << 20)) return call.invalid_value(0);
  out = static_cast<std::size_t>(*v);
  return Status::ok();
}

Status set_flag(const DirectiveCall& call, bool& out) {
  auto v = parse_flag(call.arg(0));
  if (!v) return call.invalid_value(0, ", it must be \"on\" or \"off\"");
  out = *v;
  return Status::ok();
}

// Adds the fields nginx sets unless the list names them: "Host: $proxy_host"
// and "Connection: close".
void add_default_headers(std::vector<ProxyHeader>& list) {
  auto has = [&](std::string_view name) {
    for (const auto& h : list) {
      if (iequals(h.name, name)) return true;
    }
    return false;
  };
  if (!has("Host")) {
    ProxyHeader h{"Host", VarTemplate::compile("$proxy_host").value()};
    list.push_back(std::move(h));
  }
  if (!has("Connection")) {
    ProxyHeader h{"Connection", VarTemplate::compile("close").value()};
    list.push_back(std::move(h));
  }
}

using Copy = std::function<void(const ProxyConf&, ProxyConf&)>;
#define VIGIL_COPY(field) [](const ProxyConf& a, ProxyConf& b) { b.field = a.field; }

struct Inherit {
  const char* directive;
  Copy copy;
};

const std::vector<Inherit>& inherited() {
  static const std::vector<Inherit> kList = {
      {"proxy_http_version", VIGIL_COPY(http_version)},
      {"proxy_set_header", VIGIL_COPY(set_headers)},
      {"proxy_pass_request_headers", VIGIL_COPY(pass_request_headers)},
      {"proxy_pass_request_body", VIGIL_COPY(pass_request_body)},
      {"proxy_buffering", VIGIL_COPY(buffering)},
      {"proxy_buffers",
       [](const ProxyConf& a, ProxyConf& b) {
         b.buffers_num = a.buffers_num;
         b.buffers_size = a.buffers_size;
       }},
      {"proxy_busy_buffers_size", VIGIL_COPY(busy_buffers_size)},
      {"proxy_max_temp_file_size", VIGIL_COPY(max_temp_file_size)},
      {"proxy_temp_file_write_size", VIGIL_COPY(temp_file_write_size)},
      {"proxy_request_buffering", VIGIL_COPY(request_buffering)},
      {"proxy_redirect",
       [](const ProxyConf& a, ProxyConf& b) {
         b.redirect_off = a.redirect_off;
         b.redirects = a.redirects;
       }},
      {"proxy_method", VIGIL_COPY(method)},
      {"proxy_limit_rate", VIGIL_COPY(limit_rate)},
      {"proxy_cookie_domain", VIGIL_COPY(cookie_domains)},
      {"proxy_cookie_path", VIGIL_COPY(cookie_paths)},
      {"proxy_cookie_flags", VIGIL_COPY(cookie_flags)},
      {"proxy_set_body",
       [](const ProxyConf& a, ProxyConf& b) {
         b.body_set = a.body_set;
         b.set_body = a.set_body;
       }},
  };
  return kList;
}
#undef VIGIL_COPY

Status check(const ConfInit& ctx, ProxyConf& p) {
  // nginx's checks in ngx_http_proxy_merge_loc_conf; unset, the busy size
  // is twice the larger of the two buffer sizes.
  const std::size_t larger = p.buffer_size > p.buffers_size ? p.buffer_size : p.buffers_size;
  const std::size_t busy = p.busy_buffers_size != 0 ? p.busy_buffers_size : 2 * larger;
  if (busy < larger) {
    return Status::error(
        "\"proxy_busy_buffers_size\" must be equal to or greater than the "
        "maximum of the value of \"proxy_buffer_size\" and one of the "
        "\"proxy_buffers\"" +
        ctx.scope().where());
  }
  if (p.max_temp_file_size != 0 && p.max_temp_file_size < larger) {
    return Status::error(
        "\"proxy_max_temp_file_size\" must be equal to zero to disable temporary files usage or "
        "must be equal to or greater than the maximum of the value of \"proxy_buffer_size\" and "
        "one of the \"proxy_buffers\"" +
        ctx.scope().where());
  }
  const std::size_t write_size = p.temp_file_write_size != 0 ? p.temp_file_write_size : 2 * larger;
  if (write_size < larger) {
    return Status::error(
        "\"proxy_temp_file_write_size\" must be equal to or greater than the maximum of the value "
        "of \"proxy_buffer_size\" and one of the \"proxy_buffers\"" +
        ctx.scope().where());
  }
  if (busy > (p.buffers_num - 1) * p.buffers_size) {
    return Status::error(
        "\"proxy_busy_buffers_size\" must be less than the size of all "
        "\"proxy_buffers\" minus one buffer" +
        ctx.scope().where());
  }
  return Status::ok();
}

TlsClientConf& proxy_ssl_conf(void* conf) {
  return static_cast<ProxyConf*>(conf)->ssl;
}

UpstreamConf& proxy_upstream_conf(void* conf) {
  return *static_cast<ProxyConf*>(conf);
}

// proxy_pass names an upstream block or an address (an implicit group). The
// http module's upstream blocks are finished when this runs: modules finish
// their confs in the order they are registered, "http" first.
Status resolve(const ConfInit& ctx, ProxyConf& p) {
  const ModuleRegistry* modules = ctx.env().modules;
  const std::size_t http =
      modules != nullptr ? modules->index_of(http_module()) : ModuleRegistry::npos;
  upstream::GroupSet* set = http != ModuleRegistry::npos
                                ? upstream::find_group_set(ctx.scope(), http, http_upstream_specs())
                                : nullptr;
  if (set == nullptr) return Status::error("internal error: no upstream groups" + p.where);
  if (p.variables) {
    // The scheme is known per request: a TLS context for https in case.
    p.groups = set;
    if (p.ssl.where.empty()) p.ssl.where = p.where;
    auto tls = TlsContext::client(p.ssl);
    if (!tls) return tls.status();
    p.tls = std::move(tls.value());
    if (Status s = upstream_core::set_client_certificate_names(*p.tls, p.ssl); !s) return s;
    if (!p.ssl.name.empty()) {
      auto t = VarTemplate::compile(p.ssl.name);
      if (!t) return Status::error(t.status().message() + p.ssl.where);
      p.ssl_name = std::move(t.value());
    }
    return Status::ok();
  }
  auto g = set->find_or_add(p.target, p.https ? 443 : 80, p.where);
  if (!g) return g.status();
  p.group = g.value();
  if (p.https) {
    // The TLS context now, at load time: -t and a reload check the trusted
    // CAs and the client certificate (nginx's ngx_http_proxy_set_ssl).
    if (p.ssl.where.empty()) p.ssl.where = p.where;
    auto tls = TlsContext::client(p.ssl);
    if (!tls) return tls.status();
    p.tls = std::move(tls.value());
    if (Status s = upstream_core::set_client_certificate_names(*p.tls, p.ssl); !s) return s;
    if (!p.ssl.name.empty()) {
      auto t = VarTemplate::compile(p.ssl.name);
      if (!t) return Status::error(t.status().message() + p.ssl.where);
      p.ssl_name = std::move(t.value());
    }
  }
  if (!p.group->hash_key.empty()) {
    auto t = VarTemplate::compile(p.group->hash_key);
    if (!t) return Status::error(t.status().message() + p.group->where);
    p.hash_key = std::move(t.value());
  }
  return Status::ok();
}

// The http block's defaults (proxy_set_header Host $proxy_host, Connection close).
Status init_proxy(const ConfInit& ctx, ProxyConf& conf) {
  add_default_headers(conf.set_headers);
  return check(ctx, conf);
}

// The inheritance of every proxy_* directive the child level did not set,
// the checks nginx makes once a level is complete, and the level's own
// proxy_pass resolved.
Status merge_proxy(const ConfInit& ctx, const ProxyConf& parent, ProxyConf& child) {
  for (const auto& i : inherited()) {
    if (!ctx.is_set(i.directive)) i.copy(parent, child);
  }
  merge_upstream_conf(ctx, "proxy", parent, child);
  merge_tls_client_conf(ctx, parent.ssl, child.ssl, "proxy");
  if (ctx.is_set("proxy_set_header")) add_default_headers(child.set_headers);
  if (Status st = check(ctx, child); !st) return st;
  if (child.enabled && child.variables) {
    for (const RedirectRule& rule : child.redirects) {
      if (rule.is_default) {
        return Status::error(
            "\"proxy_redirect default\" cannot be used with \"proxy_pass\" directive with "
            "variables" +
            ctx.where("proxy_redirect"));
      }
    }
  }
  if (!ctx.is_set("proxy_pass") && parent.enabled && is_noname_scope(ctx.env(), ctx.scope())) {
    // An if or limit_except block proxies as its location does (nginx's
    // merge for "noname" locations), with the location's resolved group.
    child.enabled = true;
    child.pass = parent.pass;
    child.where = parent.where;
    child.has_uri = parent.has_uri;
    child.uri = parent.uri;
    child.proxy_host = parent.proxy_host;
    child.proxy_port = parent.proxy_port;
    child.variables = parent.variables;
    child.url = parent.url;
    child.groups = parent.groups;
    child.https = parent.https;
    child.target = parent.target;
    child.group = parent.group;
    child.hash_key = parent.hash_key;
    child.tls = parent.tls;
    child.ssl_name = parent.ssl_name;
    return Status::ok();
  }
  return child.enabled ? resolve(ctx, child) : Status::ok();
}

void add_proxy_directives(Module& m, ConfSlot<ProxyConf> conf) {
  using F = std::function<Status(const DirectiveCall&, ProxyConf&)>;
  auto add = [&](const char* name, ConfContextMask ctx, Arity arity, F fn) -> Directive& {
    return m.add(name, ctx, arity, conf.custom(std::move(fn)));
  };
  add("proxy_pass", kHttpLocConf, Arity::exactly(1), set_proxy_pass);
  add("proxy_http_version", kLoc, Arity::exactly(1), set_http_version);
  add("proxy_set_header", kLoc, Arity::exactly(2), set_header).multiple = true;
  add("proxy_pass_request_headers", kLoc, Arity::on_off(),
      [](const DirectiveCall& c, ProxyConf& p) { return set_flag(c, p.pass_request_headers); });
  add("proxy_pass_request_body", kLoc, Arity::on_off(),
      [](const DirectiveCall& c, ProxyConf& p) { return set_flag(c, p.pass_request_body); });
  add("proxy_buffering", kLoc, Arity::on_off(),
      [](const DirectiveCall& c, ProxyConf& p) { return set_flag(c, p.buffering); });
  add("proxy_buffers", kLoc, Arity::exactly(2), set_buffers);
  add("proxy_temp_path", kLoc, Arity::between(1, 4),
      [](const DirectiveCall& c, ProxyConf&) { return check_temp_path(c); });
  // The response is never written to a temporary file (the backend is not
  // read while the buffers are full): any size behaves as nginx's 0. Both
  // are checked as nginx checks them.
  add("proxy_max_temp_file_size", kLoc, Arity::exactly(1),
      [](const DirectiveCall& c, ProxyConf& p) {
        auto v = parse_size(c.arg(0));
        if (!v) return c.invalid_value(0);
        p.max_temp_file_size = static_cast<std::size_t>(*v);
        return Status::ok();
      });
  add("proxy_temp_file_write_size", kLoc, Arity::exactly(1),
      [](const DirectiveCall& c, ProxyConf& p) { return set_size(c, p.temp_file_write_size); });
  add("proxy_busy_buffers_size", kLoc, Arity::exactly(1),
      [](const DirectiveCall& c, ProxyConf& p) { return set_size(c, p.busy_buffers_size); });
  add("proxy_request_buffering", kLoc, Arity::on_off(),
      [](const DirectiveCall& c, ProxyConf& p) { return set_flag(c, p.request_buffering); });
  add("proxy_redirect", kLoc, Arity::between(1, 2), proxy::set_redirect).multiple = true;
  add("proxy_cookie_domain", kLoc, Arity::between(1, 2), proxy::set_cookie_domain).multiple = true;
  add("proxy_cookie_path", kLoc, Arity::between(1, 2), proxy::set_cookie_path).multiple = true;
  add("proxy_cookie_flags", kLoc, Arity::between(1, 4), proxy::set_cookie_flags).multiple = true;
  add("proxy_limit_rate", kLoc, Arity::exactly(1), [](const DirectiveCall& c, ProxyConf& p) {
    auto v = parse_size(c.arg(0));
    if (!v) return c.invalid_value(0);
    p.limit_rate = static_cast<std::size_t>(*v);
    return Status::ok();
  });
  add("proxy_method", kLoc, Arity::exactly(1),
      [](const DirectiveCall& c, ProxyConf& p) { return set_template(c, p.method); });
  add("proxy_set_body", kLoc, Arity::exactly(1),
      [](const DirectiveCall& c, ProxyConf& p) {
        p.body_set = true;
        return set_template(c, p.set_body);
      });
  // proxy_ssl_* (the event layer's one parser, shared with stream); TLS is
  // switched on by "proxy_pass https://", so no "proxy_ssl on" here.
  add_tls_client_directives(m, kLoc, conf.index(), typeid(ProxyConf), proxy_ssl_conf,
                            /*with_enable_flag=*/false, "proxy");
  add_upstream_directives(m, kLoc, conf.index(), typeid(ProxyConf), proxy_upstream_conf, "proxy");
}

// proxy_pass's host[:port]: the default Host of a proxied request.
bool var_proxy_host(const Request& r, std::string_view, VarSink& s) {
  if (r.loc == nullptr || !proxy_conf(*r.loc).enabled) return false;
  if (proxy_conf(*r.loc).variables) {
    // The URL of this request, once evaluated.
    if (r.upstream == nullptr) return false;
    s.put(static_cast<const proxy::ProxyState*>(r.upstream)->host_header);
    return true;
  }
  s.put(proxy_conf(*r.loc).proxy_host);
  return true;
}

// The client's X-Forwarded-For fields with its address appended.
bool var_proxy_port(const Request& r, std::string_view, VarSink& s) {
  if (r.loc == nullptr || !proxy_conf(*r.loc).enabled) return false;
  if (proxy_conf(*r.loc).variables) {
    if (r.upstream == nullptr) return false;
    s.put(static_cast<const proxy::ProxyState*>(r.upstream)->port);
    return true;
  }
  s.put(proxy_conf(*r.loc).proxy_port);
  return true;
}

bool var_proxy_add_x_forwarded_for(const Request& r, std::string_view, VarSink& s) {
  bool found = false;
  s.advance(request_header_value(r, "x-forwarded-for", s.at(), found));
  if (found) s.put(", ");
  if (r.c != nullptr) s.put(r.c->addr_text);
  return true;
}

// $upstream_http_NAME: the response fields of the backend named NAME
// (the last attempt's), joined with ", " as nginx's.
bool var_upstream_http(const Request& r, std::string_view name, VarSink& s) {
  const upstream_core::Upstream* u = r.upstream;
  if (u == nullptr) return false;
  bool found = false;
  for (std::uint32_t i = 0; i < u->nfields; ++i) {
    const HeaderField& f = u->fields[i];
    if (!iequals(f.name, name)) continue;
    if (found) s.put(", ");
    s.put(f.value);
    found = true;
  }
  return found;
}

// $upstream_trailer_NAME: the backend's trailer field NAME (grpc's trailing
// HEADERS; nginx 1.22.1 keeps no HTTP/1.1 trailers), joined with ", " as
// nginx's. Known once the response has ended: in the log, not in its head.
bool var_upstream_trailer(const Request& r, std::string_view name, VarSink& s) {
  const upstream_core::Upstream* u = r.upstream;
  if (u == nullptr) return false;
  bool found = false;
  for (std::uint32_t i = 0; i < u->nresp_trailers; ++i) {
    const HeaderField& f = u->resp_trailers[i];
    if (!iequals(f.name, name)) continue;
    if (found) s.put(", ");
    s.put(f.value);
    found = true;
  }
  return found;
}

// $upstream_cookie_NAME: the value of cookie NAME in the first Set-Cookie
// field of the backend's response that sets it: "NAME[ ]=[ ]value[;...]"
// (nginx's ngx_http_parse_set_cookie_lines).
bool var_upstream_cookie(const Request& r, std::string_view name, VarSink& s) {
  const upstream_core::Upstream* u = r.upstream;
  if (u == nullptr) return false;
  for (std::uint32_t i = 0; i < u->nfields; ++i) {
    const HeaderField& f = u->fields[i];
    if (!iequals(f.name, "set-cookie")) continue;
    std::string_view v = f.value;
    if (v.size() < name.size() || !iequals(v.substr(0, name.size()), name)) continue;
    std::size_t k = name.size();
    while (k < v.size() && v[k] == ' ') ++k;
    if (k == v.size() || v[k] != '=') continue;
    ++k;
    while (k < v.size() && v[k] == ' ') ++k;
    std::size_t end = v.find(';', k);
    if (end == std::string_view::npos) end = v.size();
    s.put(v.substr(k, end - k));
    return true;
  }
  return false;
}

constexpr VarSpec kProxyVariables[] = {
    {"proxy_host", var_proxy_host},
    {"proxy_port", var_proxy_port},
    {"proxy_add_x_forwarded_for", var_proxy_add_x_forwarded_for},
    {"upstream_http_", var_upstream_http, true},
    {"upstream_cookie_", var_upstream_cookie, true},
    {"upstream_trailer_", var_upstream_trailer, true},
};

}  // namespace

const HttpModule& proxy_module() {
  static const HttpModule* module = [] {
    auto* m = new HttpModule("http_proxy");  // never destroyed: used until exit
    add_proxy_directives(m->conf(), m->add_loc_conf<ProxyConf>(init_proxy, merge_proxy));
    m->set_variables(kProxyVariables);
    return m;
  }();
  return *module;
}

const ProxyConf& proxy_conf(const HttpLocConf& loc) {
  return loc_conf<ProxyConf>(loc, proxy_module());
}

}  // namespace vigil::http
