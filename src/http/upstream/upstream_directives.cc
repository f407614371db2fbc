// The directives every upstream protocol has under its own prefix (nginx's
// proxy_*, grpc_*, fastcgi_* copies of one ngx_http_upstream_conf_t's
// settings): registered once here, per prefix, with nginx's syntax, and
// inherited by merge_upstream_conf.
#include <string>
#include <utility>

#include "core/conf/module.h"
#include "core/conf/scope.h"
#include "core/conf/values.h"
#include "http/core/request.h"
#include "http/upstream/upstream_conf.h"
#include "vigil/event/peer.h"

namespace vigil::http {
namespace {

using Setter = Status (*)(const DirectiveCall&, UpstreamConf&);
using Copy = void (*)(const UpstreamConf&, UpstreamConf&);

std::string lower(std::string s) {
  for (char& ch : s) {
    if (ch >= 'A' && ch <= 'Z') ch = static_cast<char>(ch - 'A' + 'a');
  }
  return s;
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

// <prefix>_bind address [transparent] | off
Status set_bind(const DirectiveCall& call, UpstreamConf& p) {
  p.local = VarTemplate{};
  p.local_transparent = false;
  if (call.arg(0) == "off") {
    if (call.arg_count() != 1) return call.invalid_value(1);
    return Status::ok();
  }
  auto t = VarTemplate::compile(call.arg(0));
  if (!t) return call.error(t.status().message());
  if (t.value().is_literal()) {
    sockaddr_storage ss{};
    socklen_t len = 0;
    if (!parse_local_address(call.arg(0), ss, len)) {
      return call.error("invalid address \"" + call.arg(0) + "\"");
    }
  }
  p.local = std::move(t.value());
  if (call.arg_count() == 2) {
    if (call.arg(1) != "transparent") return call.invalid_value(1);
    p.local_transparent = true;
  }
  return Status::ok();
}

// <prefix>_ignore_headers field ...: nginx's names. X-Accel-Redirect and
// X-Accel-Limit-Rate mean something here (the other X-Accel-* fields are not
// acted on anyway, and Expires, Cache-Control, Set-Cookie and Vary only
// matter to a cache).
Status set_ignore_headers(const DirectiveCall& call, UpstreamConf& p) {
  static constexpr const char* kNames[] = {
      "X-Accel-Redirect", "X-Accel-Expires", "X-Accel-Limit-Rate", "X-Accel-Buffering",
      "X-Accel-Charset",  "Expires",         "Cache-Control",      "Set-Cookie",
      "Vary"};
  p.ignore_accel_redirect = false;
  p.ignore_accel_limit_rate = false;
  for (std::size_t i = 0; i < call.arg_count(); ++i) {
    bool known = false;
    for (const char* n : kNames) known = known || iequals(call.arg(i), n);
    if (!known) return call.invalid_value(i);
    if (iequals(call.arg(i), "X-Accel-Redirect")) p.ignore_accel_redirect = true;
    if (iequals(call.arg(i), "X-Accel-Limit-Rate")) p.ignore_accel_limit_rate = true;
  }
  return Status::ok();
}

Status set_next_upstream(const DirectiveCall& call, UpstreamConf& p) {
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
  p.next_upstream = mask;
  return Status::ok();
}

struct Shared {
  const char* suffix;  // after "<prefix>_"
  Arity arity;
  bool multiple;
  Setter set;
  Copy copy;
};

const Shared kShared[] = {
    {"connect_timeout", Arity::exactly(1), false,
     [](const DirectiveCall& c, UpstreamConf& p) { return set_msec(c, p.connect_timeout); },
     [](const UpstreamConf& a, UpstreamConf& b) { b.connect_timeout = a.connect_timeout; }},
    {"send_timeout", Arity::exactly(1), false,
     [](const DirectiveCall& c, UpstreamConf& p) { return set_msec(c, p.send_timeout); },
     [](const UpstreamConf& a, UpstreamConf& b) { b.send_timeout = a.send_timeout; }},
    {"read_timeout", Arity::exactly(1), false,
     [](const DirectiveCall& c, UpstreamConf& p) { return set_msec(c, p.read_timeout); },
     [](const UpstreamConf& a, UpstreamConf& b) { b.read_timeout = a.read_timeout; }},
    {"next_upstream", Arity::one_or_more(), false, set_next_upstream,
     [](const UpstreamConf& a, UpstreamConf& b) { b.next_upstream = a.next_upstream; }},
    {"next_upstream_tries", Arity::exactly(1), false,
     [](const DirectiveCall& c, UpstreamConf& p) {
       auto v = parse_number(c.arg(0));
       if (!v || *v < 0 || *v > 1000) return c.invalid_value(0);
       p.next_upstream_tries = static_cast<unsigned>(*v);
       return Status::ok();
     },
     [](const UpstreamConf& a, UpstreamConf& b) { b.next_upstream_tries = a.next_upstream_tries; }},
    {"next_upstream_timeout", Arity::exactly(1), false,
     [](const DirectiveCall& c, UpstreamConf& p) { return set_msec(c, p.next_upstream_timeout); },
     [](const UpstreamConf& a, UpstreamConf& b) {
       b.next_upstream_timeout = a.next_upstream_timeout;
     }},
    {"buffer_size", Arity::exactly(1), false,
     [](const DirectiveCall& c, UpstreamConf& p) {
       auto v = parse_size(c.arg(0));
       if (!v || *v < 1 || *v > (16u << 20)) return c.invalid_value(0);
       p.buffer_size = static_cast<std::size_t>(*v);
       return Status::ok();
     },
     [](const UpstreamConf& a, UpstreamConf& b) { b.buffer_size = a.buffer_size; }},
    {"hide_header", Arity::exactly(1), true,
     [](const DirectiveCall& c, UpstreamConf& p) {
       p.hide_headers.push_back(lower(c.arg(0)));
       return Status::ok();
     },
     [](const UpstreamConf& a, UpstreamConf& b) { b.hide_headers = a.hide_headers; }},
    {"pass_header", Arity::exactly(1), true,
     [](const DirectiveCall& c, UpstreamConf& p) {
       p.pass_headers.push_back(lower(c.arg(0)));
       return Status::ok();
     },
     [](const UpstreamConf& a, UpstreamConf& b) { b.pass_headers = a.pass_headers; }},
    {"ignore_headers", Arity::one_or_more(), false, set_ignore_headers,
     [](const UpstreamConf& a, UpstreamConf& b) {
       b.ignore_accel_redirect = a.ignore_accel_redirect;
       b.ignore_accel_limit_rate = a.ignore_accel_limit_rate;
     }},
    {"intercept_errors", Arity::on_off(), false,
     [](const DirectiveCall& c, UpstreamConf& p) { return set_flag(c, p.intercept_errors); },
     [](const UpstreamConf& a, UpstreamConf& b) { b.intercept_errors = a.intercept_errors; }},
    {"bind", Arity::between(1, 2), false, set_bind,
     [](const UpstreamConf& a, UpstreamConf& b) {
       b.local = a.local;
       b.local_transparent = a.local_transparent;
     }},
    {"socket_keepalive", Arity::on_off(), false,
     [](const DirectiveCall& c, UpstreamConf& p) { return set_flag(c, p.socket_keepalive); },
     [](const UpstreamConf& a, UpstreamConf& b) { b.socket_keepalive = a.socket_keepalive; }},
};

std::string name_of(std::string_view prefix, const char* suffix) {
  std::string n(prefix);
  n += '_';
  n += suffix;
  return n;
}

}  // namespace

void add_upstream_directives(Module& m, std::uint32_t contexts, int spec,
                             const std::type_info& conf_type, UpstreamConf& (*get)(void*),
                             std::string_view prefix) {
  for (const Shared& d : kShared) {
    DirectiveBody b;
    b.spec = spec;
    b.conf_type = &conf_type;
    b.set = [get, set = d.set](const DirectiveCall& call, void* conf) {
      return set(call, get(conf));
    };
    m.add(name_of(prefix, d.suffix), contexts, d.arity, std::move(b)).multiple = d.multiple;
  }
}

void merge_upstream_conf(const ConfInit& ctx, std::string_view prefix, const UpstreamConf& parent,
                         UpstreamConf& child) {
  for (const Shared& d : kShared) {
    if (!ctx.is_set(name_of(prefix, d.suffix))) d.copy(parent, child);
  }
}

}  // namespace vigil::http
