// The proxy_* directives (nginx's ngx_http_proxy_module commands), their
// defaults and inheritance.
#include "http/proxy/proxy_conf.h"

#include <functional>
#include <utility>

#include "core/conf/values.h"
#include "http/core/conf.h"
#include "http/proxy/proxy.h"
#include "codec/tokens.h"

namespace vigil::http {
namespace {

constexpr ConfContextMask kLoc = kHttpMainConf | kHttpSrvConf | kHttpLocConf;

std::string lower(std::string s) {
  for (char& ch : s) {
    if (ch >= 'A' && ch <= 'Z') ch = static_cast<char>(ch - 'A' + 'a');
  }
  return s;
}

// proxy_pass http://host[:port][/uri] | https://host[:port][/uri]
Status set_proxy_pass(const DirectiveCall& call, HttpLocConf& loc) {
  ProxyConf& p = loc.proxy;
  const std::string& url = call.arg(0);
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
  if (url.find('$') != std::string::npos) {
    return call.error("variables in \"proxy_pass\" are not supported");
  }
  std::string rest = url.substr(scheme);
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
  p.pass = url;
  p.where = call.where();
  p.enabled = true;
  loc.content = &proxy::kContent;
  return Status::ok();
}

Status set_http_version(const DirectiveCall& call, HttpLocConf& loc) {
  if (call.arg(0) == "1.0") {
    loc.proxy.http_version = 1000;
  } else if (call.arg(0) == "1.1") {
    loc.proxy.http_version = 1001;
  } else {
    return call.invalid_value(0, ", it must be \"1.0\" or \"1.1\"");
  }
  return Status::ok();
}

Status set_header(const DirectiveCall& call, HttpLocConf& loc) {
  ProxyHeader h;
  h.name = call.arg(0);
  for (char ch : h.name) {
    if (!(ch > 0x20 && ch < 0x7f) || ch == ':') return call.invalid_value(0);
  }
  auto t = VarTemplate::compile(call.arg(1));
  if (!t) return call.error(t.status().message());
  h.value = std::move(t.value());
  loc.proxy.set_headers.push_back(std::move(h));
  return Status::ok();
}

Status set_name_list(const DirectiveCall& call, std::vector<std::string>& list) {
  list.push_back(lower(call.arg(0)));
  return Status::ok();
}

Status set_next_upstream(const DirectiveCall& call, HttpLocConf& loc) {
  struct Name {
    const char* name;
    unsigned bit;
  };
  static constexpr Name kNames[] = {
      {"error", kNextError},
      {"timeout", kNextTimeout},
      {"invalid_header", kNextInvalidHeader},
      {"http_500", kNextHttp500},
      {"http_502", kNextHttp502},
      {"http_503", kNextHttp503},
      {"http_504", kNextHttp504},
      {"http_403", kNextHttp403},
      {"http_404", kNextHttp404},
      {"http_429", kNextHttp429},
      {"non_idempotent", kNextNonIdempotent},
  };
  unsigned mask = 0;
  for (std::size_t i = 0; i < call.arg_count(); ++i) {
    const std::string& a = call.arg(i);
    if (a == "off") {
      if (call.arg_count() != 1) return call.error("invalid value \"off\" with other values");
      mask = 0;
      continue;
    }
    bool known = false;
    for (const auto& n : kNames) {
      if (a == n.name) {
        mask |= n.bit;
        known = true;
      }
    }
    if (!known) return call.invalid_value(i);
  }
  loc.proxy.next_upstream = mask;
  return Status::ok();
}

Status set_buffers(const DirectiveCall& call, HttpLocConf& loc) {
  auto n = parse_number(call.arg(0));
  auto size = parse_size(call.arg(1));
  if (!n || *n < 2 || *n > 64) return call.invalid_value(0, ", it must be between 2 and 64");
  if (!size || *size < 1024 || *size > (16u << 20)) return call.invalid_value(1);
  loc.proxy.buffers_num = static_cast<std::uint32_t>(*n);
  loc.proxy.buffers_size = static_cast<std::size_t>(*size);
  return Status::ok();
}

Status set_size(const DirectiveCall& call, std::size_t& out) {
  auto v = parse_size(call.arg(0));
  if (!v || *v < 512 || *v > (16u << 20)) return call.invalid_value(0);
  out = static_cast<std::size_t>(*v);
  return Status::ok();
}

Status set_msec(const DirectiveCall& call, Msec& out) {
  auto v = parse_msec(call.arg(0));
  if (!v) return call.invalid_value(0);
  out = *v;
  return Status::ok();
}

Status set_flag(const DirectiveCall& call, bool& out) {
  auto v = parse_flag(call.arg(0));
  if (!v) return call.invalid_value(0, ", it must be \"on\" or \"off\"");
  out = *v;
  return Status::ok();
}

Status set_redirect(const DirectiveCall& call, HttpLocConf& loc) {
  if (call.arg_count() != 1 || (call.arg(0) != "default" && call.arg(0) != "off")) {
    return call.error("only \"proxy_redirect default\" and \"proxy_redirect off\" are supported");
  }
  loc.proxy.redirect_default = call.arg(0) == "default";
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
      {"proxy_hide_header", VIGIL_COPY(hide_headers)},
      {"proxy_pass_header", VIGIL_COPY(pass_headers)},
      {"proxy_connect_timeout", VIGIL_COPY(connect_timeout)},
      {"proxy_send_timeout", VIGIL_COPY(send_timeout)},
      {"proxy_read_timeout", VIGIL_COPY(read_timeout)},
      {"proxy_next_upstream", VIGIL_COPY(next_upstream)},
      {"proxy_next_upstream_tries", VIGIL_COPY(next_upstream_tries)},
      {"proxy_next_upstream_timeout", VIGIL_COPY(next_upstream_timeout)},
      {"proxy_buffering", VIGIL_COPY(buffering)},
      {"proxy_buffer_size", VIGIL_COPY(buffer_size)},
      {"proxy_buffers",
       [](const ProxyConf& a, ProxyConf& b) {
         b.buffers_num = a.buffers_num;
         b.buffers_size = a.buffers_size;
       }},
      {"proxy_busy_buffers_size", VIGIL_COPY(busy_buffers_size)},
      {"proxy_request_buffering", VIGIL_COPY(request_buffering)},
      {"proxy_intercept_errors", VIGIL_COPY(intercept_errors)},
      {"proxy_redirect", VIGIL_COPY(redirect_default)},
  };
  return kList;
}
#undef VIGIL_COPY

Status check(const ConfInit& ctx, ProxyConf& p) {
  // nginx's checks in ngx_http_proxy_merge_loc_conf.
  if (p.busy_buffers_size < p.buffer_size || p.busy_buffers_size < p.buffers_size) {
    return Status::error(
        "\"proxy_busy_buffers_size\" must be equal to or greater than the "
        "maximum of the value of \"proxy_buffer_size\" and one of the "
        "\"proxy_buffers\"" +
        ctx.scope().where());
  }
  if (p.busy_buffers_size > (p.buffers_num - 1) * p.buffers_size) {
    return Status::error(
        "\"proxy_busy_buffers_size\" must be less than the size of all "
        "\"proxy_buffers\" minus one buffer" +
        ctx.scope().where());
  }
  return Status::ok();
}

TlsClientConf& proxy_ssl_conf(void* conf) {
  return static_cast<HttpLocConf*>(conf)->proxy.ssl;
}

}  // namespace

unsigned next_upstream_bit(int status) {
  switch (status) {
    case 500:
      return kNextHttp500;
    case 502:
      return kNextHttp502;
    case 503:
      return kNextHttp503;
    case 504:
      return kNextHttp504;
    case 403:
      return kNextHttp403;
    case 404:
      return kNextHttp404;
    case 429:
      return kNextHttp429;
    default:
      return 0;
  }
}

Status init_proxy(const ConfInit& ctx, ProxyConf& conf) {
  add_default_headers(conf.set_headers);
  return check(ctx, conf);
}

Status merge_proxy(const ConfInit& ctx, const ProxyConf& parent, ProxyConf& child) {
  for (const auto& i : inherited()) {
    if (!ctx.is_set(i.directive)) i.copy(parent, child);
  }
  merge_tls_client_conf(ctx, parent.ssl, child.ssl);
  if (ctx.is_set("proxy_set_header")) add_default_headers(child.set_headers);
  return check(ctx, child);
}

void add_proxy_directives(Module& m, ConfSlot<HttpLocConf> loc) {
  using F = std::function<Status(const DirectiveCall&, HttpLocConf&)>;
  auto add = [&](const char* name, ConfContextMask ctx, Arity arity, F fn) -> Directive& {
    return m.add(name, ctx, arity, loc.custom(std::move(fn)));
  };
  add("proxy_pass", kHttpLocConf, Arity::exactly(1), set_proxy_pass);
  add("proxy_http_version", kLoc, Arity::exactly(1), set_http_version);
  add("proxy_set_header", kLoc, Arity::exactly(2), set_header).multiple = true;
  add("proxy_pass_request_headers", kLoc, Arity::on_off(),
      [](const DirectiveCall& c, HttpLocConf& l) {
        return set_flag(c, l.proxy.pass_request_headers);
      });
  add("proxy_pass_request_body", kLoc, Arity::on_off(), [](const DirectiveCall& c, HttpLocConf& l) {
    return set_flag(c, l.proxy.pass_request_body);
  });
  add("proxy_hide_header", kLoc, Arity::exactly(1), [](const DirectiveCall& c, HttpLocConf& l) {
    return set_name_list(c, l.proxy.hide_headers);
  }).multiple = true;
  add("proxy_pass_header", kLoc, Arity::exactly(1), [](const DirectiveCall& c, HttpLocConf& l) {
    return set_name_list(c, l.proxy.pass_headers);
  }).multiple = true;
  add("proxy_connect_timeout", kLoc, Arity::exactly(1),
      [](const DirectiveCall& c, HttpLocConf& l) { return set_msec(c, l.proxy.connect_timeout); });
  add("proxy_send_timeout", kLoc, Arity::exactly(1),
      [](const DirectiveCall& c, HttpLocConf& l) { return set_msec(c, l.proxy.send_timeout); });
  add("proxy_read_timeout", kLoc, Arity::exactly(1),
      [](const DirectiveCall& c, HttpLocConf& l) { return set_msec(c, l.proxy.read_timeout); });
  add("proxy_next_upstream", kLoc, Arity::one_or_more(), set_next_upstream);
  add("proxy_next_upstream_tries", kLoc, Arity::exactly(1),
      [](const DirectiveCall& c, HttpLocConf& l) {
        auto v = parse_number(c.arg(0));
        if (!v || *v < 0 || *v > 1000) return c.invalid_value(0);
        l.proxy.next_upstream_tries = static_cast<unsigned>(*v);
        return Status::ok();
      });
  add("proxy_next_upstream_timeout", kLoc, Arity::exactly(1),
      [](const DirectiveCall& c, HttpLocConf& l) {
        return set_msec(c, l.proxy.next_upstream_timeout);
      });
  add("proxy_buffering", kLoc, Arity::on_off(),
      [](const DirectiveCall& c, HttpLocConf& l) { return set_flag(c, l.proxy.buffering); });
  add("proxy_buffer_size", kLoc, Arity::exactly(1),
      [](const DirectiveCall& c, HttpLocConf& l) { return set_size(c, l.proxy.buffer_size); });
  add("proxy_buffers", kLoc, Arity::exactly(2), set_buffers);
  add("proxy_busy_buffers_size", kLoc, Arity::exactly(1),
      [](const DirectiveCall& c, HttpLocConf& l) {
        return set_size(c, l.proxy.busy_buffers_size);
      });
  add("proxy_request_buffering", kLoc, Arity::on_off(), [](const DirectiveCall& c, HttpLocConf& l) {
    return set_flag(c, l.proxy.request_buffering);
  });
  add("proxy_intercept_errors", kLoc, Arity::on_off(),
      [](const DirectiveCall& c, HttpLocConf& l) { return set_flag(c, l.proxy.intercept_errors); });
  add("proxy_redirect", kLoc, Arity::between(1, 2), set_redirect);
  // proxy_ssl_* (the event layer's one parser, shared with stream); TLS is
  // switched on by "proxy_pass https://", so no "proxy_ssl on" here.
  add_tls_client_directives(m, kLoc, loc.index(), typeid(HttpLocConf), proxy_ssl_conf,
                            /*with_enable_flag=*/false);
}

}  // namespace vigil::http
