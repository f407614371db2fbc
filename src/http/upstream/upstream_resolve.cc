// Upstreams known only at run time (nginx's u->resolved in
// ngx_http_upstream_init_request and ngx_http_upstream_resolve_handler): an
// address, or a name resolved with the location's resolver, made into a
// group of this request's own.
#include <arpa/inet.h>

#include <cstdio>
#include <cstring>
#include <new>

#include "codec/tokens.h"
#include "core/conf/values.h"
#include "http/core/worker.h"
#include "http/upstream/client_side.h"
#include "http/upstream/upstream.h"
#include "upstream/run_time_group.h"
#include "vigil/core/log.h"
#include "vigil/event/loop.h"

namespace vigil::http::upstream_core {
namespace {

RunTimeGroup* run_time_group(Upstream& u) {
  if (u.run_time == nullptr) u.run_time.reset(new (std::nothrow) RunTimeGroup());
  return u.run_time.get();
}

// Fills the group's peers from `n` addresses (one try each, as nginx's
// round-robin peers of a resolved name). False without memory.
bool fill(RunTimeGroup& g, const sockaddr_storage* addrs, const socklen_t* lens, std::size_t n,
          std::string_view server) {
  return upstream::fill_run_time_group(g.group, g.health, g.stats, addrs, lens, n, server);
}

void resolved(ResolveRequest& q) {
  Upstream& u = *static_cast<Upstream*>(q.data);
  RunTimeGroup& g = *u.run_time;
  g.resolver = nullptr;
  Request& r = *u.r;
  if (q.state != 0 || q.naddrs == 0) {
    char what[400];
    std::snprintf(what, sizeof what, "%.*s could not be resolved (%d: %s)",
                  static_cast<int>(u.resolve_host.size()), u.resolve_host.data(), q.state,
                  resolver_strerror(q.state));
    log_request_error(r, static_cast<int>(LogLevel::kError), what);
    answer(u, 502);
    return;
  }
  sockaddr_storage addrs[dns::kMaxAddrs];
  socklen_t lens[dns::kMaxAddrs];
  const auto port = static_cast<std::uint16_t>(u.resolve_port);
  for (std::size_t i = 0; i < q.naddrs; ++i) lens[i] = dns::to_sockaddr(q.addrs[i], port, addrs[i]);
  if (!fill(g, addrs, lens, q.naddrs, u.resolve_host)) {
    answer(u, 500);
    return;
  }
  u.group = &g.group;
  choose_peer(u);
}

}  // namespace

bool set_address_group(Upstream& u, const sockaddr* sa, socklen_t len, std::string_view server) {
  RunTimeGroup* g = run_time_group(u);
  if (g == nullptr) return false;
  sockaddr_storage addr{};
  std::memcpy(&addr, sa, len);
  if (!fill(*g, &addr, &len, 1, server)) return false;
  u.group = &g->group;
  return true;
}

void resolve(Upstream& u) {
  Request& r = *u.r;
  const HttpLocConf& loc = *r.loc;
  char what[400];
  if (loc.resolver == nullptr) {
    std::snprintf(what, sizeof what, "no resolver defined to resolve %.*s",
                  static_cast<int>(u.resolve_host.size()), u.resolve_host.data());
    log_request_error(r, static_cast<int>(LogLevel::kError), what);
    answer(u, 502);
    return;
  }
  RunTimeGroup* g = run_time_group(u);
  Resolver* res = g != nullptr ? Resolver::of(*r.c->loop, loc.resolver) : nullptr;
  if (res == nullptr) {
    answer(u, 500);
    return;
  }
  g->query.handler = resolved;
  g->query.data = &u;
  g->query.timeout = loc.resolver_timeout;
  g->resolver = res;
  if (res->resolve_name(g->query, u.resolve_host)) resolved(g->query);
}

int route_to(Upstream& u, std::string_view url, std::string_view hostport, unsigned default_port,
             upstream::GroupSet* groups, std::string_view& host, std::string_view& port_text,
             unsigned& port) {
  char what[600];
  auto fail = [&](const char* text) {
    std::snprintf(what, sizeof what, "%s in upstream \"%.*s\"", text,
                  static_cast<int>(url.size() > 400 ? 400 : url.size()), url.data());
    log_request_error(*u.r, static_cast<int>(LogLevel::kError), what);
    return 500;
  };
  host = hostport;
  port_text = {};
  if (hostport.empty()) return fail("no host");
  if (host.front() == '[') {
    const std::size_t close = host.find(']');
    if (close == std::string_view::npos) return fail("invalid host");
    if (close + 1 < host.size()) {
      if (host[close + 1] != ':') return fail("invalid host");
      port_text = host.substr(close + 2);
      if (port_text.empty()) return fail("invalid port");
    }
    host = host.substr(0, close + 1);
  } else if (const std::size_t colon = host.rfind(':'); colon != std::string_view::npos) {
    port_text = host.substr(colon + 1);
    host = host.substr(0, colon);
    if (port_text.empty()) return fail("invalid port");
  }
  if (host.empty() || host == "[]") return fail("no host");
  port = default_port;
  if (!port_text.empty()) {
    auto v = parse_number(port_text);
    if (!v || *v < 1 || *v > 65535) return fail("invalid port");
    port = static_cast<unsigned>(*v);
  }
  u.target = hostport;
  // An upstream block of that name (named without a port, as nginx matches
  // it), or the group a proxy_pass without variables made for this very
  // host and port (nginx's implicit upstreams are searched the same way).
  if (groups != nullptr) {
    if (port_text.empty()) {
      if (upstream::Group* g = groups->find(host); g != nullptr && !g->implicit) {
        u.group = g;
        return 0;
      }
    } else {
      for (const auto& g : groups->groups) {
        if (g->implicit && iequals(g->name, hostport)) {
          u.group = g.get();
          return 0;
        }
      }
    }
  }
  // An address literal goes straight to a group of its own.
  char text[INET6_ADDRSTRLEN + 1];
  const bool v6 = host.front() == '[';
  const std::string_view bare = v6 ? host.substr(1, host.size() - 2) : host;
  if (bare.size() < sizeof text) {
    std::memcpy(text, bare.data(), bare.size());
    text[bare.size()] = '\0';
    sockaddr_storage ss{};
    socklen_t len = 0;
    if (v6) {
      auto& a = reinterpret_cast<sockaddr_in6&>(ss);
      if (::inet_pton(AF_INET6, text, &a.sin6_addr) == 1) {
        a.sin6_family = AF_INET6;
        a.sin6_port = htons(static_cast<std::uint16_t>(port));
        len = sizeof a;
      }
    } else {
      auto& a = reinterpret_cast<sockaddr_in&>(ss);
      if (::inet_pton(AF_INET, text, &a.sin_addr) == 1) {
        a.sin_family = AF_INET;
        a.sin_port = htons(static_cast<std::uint16_t>(port));
        len = sizeof a;
      }
    }
    if (len != 0 && port == 0) return fail("no port");
    if (len != 0) {
      if (!set_address_group(u, reinterpret_cast<sockaddr*>(&ss), len, hostport)) {
        return 500;
      }
      return 0;
    }
    if (v6) return fail("invalid IPv6 address");
  }
  if (port == 0) return fail("no port");
  // A name: resolved once the request is built.
  u.resolve_host = host;
  u.resolve_port = port;
  return 0;
}


bool evaluate_url(Upstream& u, const VarTemplate& url, std::string_view& out) {
  Request& r = *u.r;
  const std::size_t n = url.length(r);
  const std::size_t size = (n + 4095) & ~std::size_t{4095};
  char* mem = r.hc->worker->buffers().get(size);
  if (mem == nullptr) return false;
  u.url_mem = mem;
  u.url_mem_size = static_cast<std::uint32_t>(size);
  out = std::string_view(mem, static_cast<std::size_t>(url.write(r, mem) - mem));
  return true;
}

bool has_scheme(std::string_view url, std::string_view scheme) {
  return url.size() >= scheme.size() && iequals(url.substr(0, scheme.size()), scheme);
}

}  // namespace vigil::http::upstream_core
