// Upstreams known only at run time (nginx's u->resolved in
// ngx_http_upstream_init_request and ngx_http_upstream_resolve_handler): an
// address, or a name resolved with the location's resolver, made into a
// group of this request's own.
#include <arpa/inet.h>

#include <cstdio>
#include <cstring>
#include <new>

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
  for (std::size_t i = 0; i < q.naddrs; ++i) {
    std::memset(&addrs[i], 0, sizeof addrs[i]);
    if (q.addrs[i].family == AF_INET6) {
      auto& a = reinterpret_cast<sockaddr_in6&>(addrs[i]);
      a.sin6_family = AF_INET6;
      a.sin6_port = htons(static_cast<std::uint16_t>(u.resolve_port));
      std::memcpy(&a.sin6_addr, q.addrs[i].bytes, 16);
      lens[i] = sizeof a;
    } else {
      auto& a = reinterpret_cast<sockaddr_in&>(addrs[i]);
      a.sin_family = AF_INET;
      a.sin_port = htons(static_cast<std::uint16_t>(u.resolve_port));
      std::memcpy(&a.sin_addr, q.addrs[i].bytes, 4);
      lens[i] = sizeof a;
    }
  }
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

}  // namespace vigil::http::upstream_core
