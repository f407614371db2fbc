#include "stream/proxy_target.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdio>
#include <cstring>
#include <new>

#include "core/conf/values.h"
#include "core/unix_addr.h"
#include "stream/session.h"
#include "stream/stream_conf.h"
#include "upstream/run_time_group.h"
#include "vigil/core/log.h"

namespace vigil::stream {
namespace {

void log_error(const Session& s, const char* what, std::string_view arg, const char* after) {
  const Connection& c = *s.client;
  VIGIL_LOG(*c.log, kError, 0, "*%llu %s%.*s%s, client: %.*s",
            static_cast<unsigned long long>(c.number), what, static_cast<int>(arg.size()),
            arg.data(), after, static_cast<int>(c.addr_text.size()), c.addr_text.data());
}

// The session's own group of `n` addresses. False without memory.
bool make_group(Session& s, const sockaddr_storage* addrs, const socklen_t* lens, std::size_t n,
                std::string_view server) {
  if (s.run_time == nullptr) s.run_time = s.client->arena->make<SessionGroup>();
  if (s.run_time == nullptr ||
      !upstream::fill_run_time_group(s.run_time->group, s.run_time->health, s.run_time->stats,
                                     addrs, lens, n, server)) {
    return false;
  }
  s.run_time->group.protocol = upstream::Protocol::kStream;
  s.group = &s.run_time->group;
  return true;
}

// The resolver's answer made the session's group: 0, or the $status to end with.
int use_answer(SessionGroup& g, const ResolveRequest& q) {
  Session& s = *g.session;
  if (q.state != 0 || q.naddrs == 0) {
    char why[96];
    std::snprintf(why, sizeof why, " could not be resolved (%d: %s)", q.state,
                  resolver_strerror(q.state));
    log_error(s, "", g.host, why);
    return 502;
  }
  sockaddr_storage addrs[dns::kMaxAddrs];
  socklen_t lens[dns::kMaxAddrs];
  for (std::size_t i = 0; i < q.naddrs; ++i)
    lens[i] = dns::to_sockaddr(q.addrs[i], g.port, addrs[i]);
  return make_group(s, addrs, lens, q.naddrs, s.target) ? 0 : 500;
}

void resolved(ResolveRequest& q) {
  SessionGroup& g = *static_cast<SessionGroup*>(q.data);
  g.resolver = nullptr;
  g.then(*g.session, use_answer(g, q));
}

}  // namespace

std::string_view target_host(std::string_view text) {
  std::size_t from = 0;
  if (text.starts_with('[')) {
    const std::size_t close = text.find(']');
    if (close != std::string_view::npos) from = close;
  }
  const std::size_t colon = text.find(':', from);
  return colon == std::string_view::npos ? text : text.substr(0, colon);
}

int choose_target(Session& s, void (*then)(Session& s, int status)) {
  const StreamSrvConf& conf = *s.conf;
  std::string_view text;
  if (!conf.proxy_pass_var->evaluate(s, text)) return 500;
  s.target = text;
  if (upstream::Group* g = conf.fin->upstreams->find(text); g != nullptr && !g->implicit) {
    s.group = g;
    return 0;
  }
  sockaddr_storage ss{};
  socklen_t len = 0;
  if (text.starts_with("unix:")) {
    if (!make_unix_sockaddr(text.substr(5), ss, len)) {
      log_error(s, "invalid unix domain socket in upstream \"", text, "\"");
      return 500;
    }
    return make_group(s, &ss, &len, 1, text) ? 0 : 500;
  }
  const std::string_view host = target_host(text);
  const std::string_view port_text =
      host.size() < text.size() ? text.substr(host.size() + 1) : std::string_view();
  if (host.empty() || host == "[]") {
    log_error(s, "no host in upstream \"", text, "\"");
    return 500;
  }
  if (host.size() == text.size()) {
    log_error(s, "no port in upstream \"", text, "\"");
    return 500;
  }
  const auto port = parse_number(port_text);
  if (!port || *port < 1 || *port > 65535) {
    log_error(s, "invalid port in upstream \"", text, "\"");
    return 500;
  }
  if (parse_local_address(text, ss, len)) return make_group(s, &ss, &len, 1, text) ? 0 : 500;
  if (host.front() == '[') {
    log_error(s, "invalid IPv6 address in upstream \"", text, "\"");
    return 500;
  }
  // A name: nginx's stream answers 500 without a resolver.
  if (conf.resolver == nullptr) {
    log_error(s, "no resolver defined to resolve ", host, "");
    return 500;
  }
  if (s.run_time == nullptr) s.run_time = s.client->arena->make<SessionGroup>();
  Resolver* res = s.run_time != nullptr ? Resolver::of(*s.client->loop, conf.resolver) : nullptr;
  if (res == nullptr) return 500;
  SessionGroup& g = *s.run_time;
  g.host = host;
  g.port = static_cast<std::uint16_t>(*port);
  g.session = &s;
  g.then = then;
  g.query.handler = resolved;
  g.query.data = &g;
  g.query.timeout = conf.resolver_timeout;
  g.resolver = res;
  if (!res->resolve_name(g.query, host)) return kTargetResolving;
  // Answered now (from the cache, or a failure to start).
  g.resolver = nullptr;
  return use_answer(g, g.query);
}

void cancel_target(Session& s) {
  if (s.run_time == nullptr || s.run_time->resolver == nullptr) return;
  s.run_time->resolver->cancel(s.run_time->query);
  s.run_time->resolver = nullptr;
}

}  // namespace vigil::stream
