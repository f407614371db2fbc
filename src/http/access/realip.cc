// set_real_ip_from / real_ip_header / real_ip_recursive (nginx's
// ngx_http_realip_module): when the connection comes from a trusted proxy,
// the client address that proxy names in a request header becomes the
// request's client address. It replaces the connection's peer_addr and
// addr_text for the request's life (restored when it ends, so the next
// request on a kept-alive connection starts from the proxy again), so
// everything that reads them sees the client: $remote_addr, $remote_port,
// $binary_remote_addr (limit_req and limit_conn keys), allow/deny, the
// access log and the error log's "client:".
//
// It runs at post-read with the server's settings and again at pre-access
// (before limit_req and limit_conn) with the location's, and acts once per
// request, as nginx's.
//
// "real_ip_header proxy_protocol" takes the source address and port of the
// PROXY protocol header read on a "listen ... proxy_protocol" address
// (event/proxy_protocol.h), when the connection comes from a trusted
// address; a connection without one (or whose header carried no address)
// keeps its own.
#include "http/access/realip.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>
#include <vector>

#include "codec/tokens.h"
#include "event/proxy_protocol.h"
#include "http/access/access.h"
#include "http/core/conf.h"
#include "http/core/module.h"
#include "http/core/phases.h"
#include "http/core/request.h"
#include "vigil/core/log.h"

namespace vigil::http {
namespace {

enum class RealIpSource : std::uint8_t { kXRealIp, kXForwardedFor, kProxyProtocol, kHeader };

struct RealIpConf {
  std::vector<AccessRule> from;
  RealIpSource source = RealIpSource::kXRealIp;
  std::string header;  // kHeader: its name
  bool recursive = false;
};

Status set_from(const DirectiveCall& call, RealIpConf& conf) {
  AccessRule rule;
  std::string error;
  std::string warning;
  if (parse_access_rule(call.arg(0), rule, error, warning) && rule.kind != AccessRule::Kind::kAll) {
    if (!warning.empty()) {
      VIGIL_LOG(Log::global(), kWarn, 0, "%s%s", warning.c_str(), call.where().c_str());
    }
    conf.from.push_back(rule);
    return Status::ok();
  }
  // A host name: each of its addresses, resolved once, at load time.
  const std::string& host = call.arg(0);
  if (host == "all" || host.find('/') != std::string::npos) {
    return call.error("invalid parameter \"" + host + "\"");
  }
  ::addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  ::addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || res == nullptr) {
    return call.error("host not found in set_real_ip_from \"" + host + "\"");
  }
  for (const ::addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    AccessRule r;
    if (ai->ai_family == AF_INET) {
      r.kind = AccessRule::Kind::kInet;
      std::memcpy(r.addr, &reinterpret_cast<const ::sockaddr_in*>(ai->ai_addr)->sin_addr, 4);
      std::memset(r.mask, 0xff, 4);
    } else if (ai->ai_family == AF_INET6) {
      r.kind = AccessRule::Kind::kInet6;
      std::memcpy(r.addr, &reinterpret_cast<const ::sockaddr_in6*>(ai->ai_addr)->sin6_addr, 16);
      std::memset(r.mask, 0xff, 16);
    } else {
      continue;
    }
    conf.from.push_back(r);
  }
  ::freeaddrinfo(res);
  return Status::ok();
}

Status set_header(const DirectiveCall& call, RealIpConf& conf) {
  const std::string& h = call.arg(0);
  conf.header.clear();
  if (iequals(h, "X-Real-IP")) {
    conf.source = RealIpSource::kXRealIp;
  } else if (iequals(h, "X-Forwarded-For")) {
    conf.source = RealIpSource::kXForwardedFor;
  } else if (h == "proxy_protocol") {
    conf.source = RealIpSource::kProxyProtocol;
  } else {
    conf.source = RealIpSource::kHeader;
    conf.header = h;
  }
  return Status::ok();
}

}  // namespace

bool parse_addr_port(std::string_view text, ::sockaddr_storage& ss) {
  char buf[INET6_ADDRSTRLEN + 1];
  auto try_addr = [&](std::string_view a, unsigned port) {
    if (a.empty() || a.size() >= sizeof buf) return false;
    std::memcpy(buf, a.data(), a.size());
    buf[a.size()] = '\0';
    ss = ::sockaddr_storage{};
    auto* in = reinterpret_cast<::sockaddr_in*>(&ss);
    if (::inet_pton(AF_INET, buf, &in->sin_addr) == 1) {
      in->sin_family = AF_INET;
      in->sin_port = htons(static_cast<std::uint16_t>(port));
      return true;
    }
    auto* in6 = reinterpret_cast<::sockaddr_in6*>(&ss);
    if (::inet_pton(AF_INET6, buf, &in6->sin6_addr) == 1) {
      in6->sin6_family = AF_INET6;
      in6->sin6_port = htons(static_cast<std::uint16_t>(port));
      return true;
    }
    return false;
  };
  if (try_addr(text, 0)) return true;
  std::size_t colon;
  std::string_view host;
  if (!text.empty() && text[0] == '[') {
    const std::size_t close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return false;
    }
    colon = close + 1;
    host = text.substr(1, close - 1);
  } else {
    colon = text.find(':');
    if (colon == std::string_view::npos) return false;
    host = text.substr(0, colon);
  }
  const std::string_view digits = text.substr(colon + 1);
  if (digits.empty() || digits.size() > 5) return false;
  unsigned port = 0;
  for (char ch : digits) {
    if (ch < '0' || ch > '9') return false;
    port = port * 10 + static_cast<unsigned>(ch - '0');
  }
  if (port > 65535) return false;
  return try_addr(host, port);
}

ForwardedAddr forwarded_addr(::sockaddr_storage& addr, std::string_view list,
                             const std::vector<AccessRule>& trusted, bool recursive) {
  // A loop, not nginx's recursion: a long list of trusted addresses must
  // not cost stack.
  bool first = true;
  for (;;) {
    const auto* sa = reinterpret_cast<const ::sockaddr*>(&addr);
    if (!any_rule_matches(trusted, sa)) {
      return first ? ForwardedAddr::kDeclined : ForwardedAddr::kDone;
    }
    std::size_t end = list.size();
    while (end > 0 && (list[end - 1] == ' ' || list[end - 1] == ',')) --end;
    std::size_t start = end;
    while (start > 0 && list[start - 1] != ' ' && list[start - 1] != ',') --start;
    ::sockaddr_storage parsed;
    if (!parse_addr_port(list.substr(start, end - start), parsed)) {
      return first ? ForwardedAddr::kDeclined : ForwardedAddr::kDone;
    }
    addr = parsed;
    first = false;
    if (!recursive || start == 0) return ForwardedAddr::kOk;
    list = list.substr(0, start - 1);
  }
}

ForwardedAddr forwarded_for(const Request& r, ::sockaddr_storage& addr,
                            const std::vector<AccessRule>& trusted, bool recursive) {
  // Every X-Forwarded-For field, the last first (each proxy may have added
  // a field of its own rather than extend the list).
  ForwardedAddr rc = ForwardedAddr::kDeclined;
  bool found = false;
  for (std::uint32_t i = r.nfields; i-- > 0;) {
    if (!iequals(r.fields[i].name, "x-forwarded-for")) continue;
    rc = forwarded_addr(addr, r.fields[i].value, trusted, recursive);
    if (!recursive) break;
    if (rc == ForwardedAddr::kDeclined && found) return ForwardedAddr::kDone;
    if (rc != ForwardedAddr::kOk) break;
    found = true;
  }
  return rc;
}

namespace {

void replace_addr(Request& r, const ::sockaddr_storage& addr) {
  Connection& c = *r.c;
  const void* bytes =
      addr.ss_family == AF_INET
          ? static_cast<const void*>(&reinterpret_cast<const ::sockaddr_in*>(&addr)->sin_addr)
          : static_cast<const void*>(&reinterpret_cast<const ::sockaddr_in6*>(&addr)->sin6_addr);
  if (::inet_ntop(addr.ss_family, bytes, r.realip_text, sizeof r.realip_text) == nullptr) return;
  r.realip_addr = addr;
  r.realip_saved_addr = c.peer_addr;
  r.realip_saved_len = c.peer_addrlen;
  r.realip_saved_text = c.addr_text;
  c.peer_addr = reinterpret_cast<::sockaddr*>(&r.realip_addr);
  c.peer_addrlen = addr.ss_family == AF_INET ? sizeof(::sockaddr_in) : sizeof(::sockaddr_in6);
  c.addr_text = std::string_view(r.realip_text);
}

int realip_handler(Request& r) {
  if (r.realip_saved_addr != nullptr) return kPhaseDeclined;  // done once
  const RealIpConf& conf = loc_conf<RealIpConf>(*r.loc, realip_module());
  if (conf.from.empty() || r.c->peer_addr == nullptr) return kPhaseDeclined;
  ::sockaddr_storage addr{};
  std::memcpy(&addr, r.c->peer_addr,
              std::min<std::size_t>(r.c->peer_addrlen, sizeof(::sockaddr_storage)));
  ForwardedAddr rc = ForwardedAddr::kDeclined;
  if (conf.source == RealIpSource::kXForwardedFor) {
    rc = forwarded_for(r, addr, conf.from, conf.recursive);
  } else if (conf.source == RealIpSource::kProxyProtocol) {
    const ProxyProtocolInfo* pp = r.c->proxy_protocol;
    if (pp != nullptr && pp->header.family != AF_UNSPEC &&
        any_rule_matches(conf.from, r.c->peer_addr)) {
      std::memcpy(&addr, &pp->header.src, sizeof addr);
      rc = ForwardedAddr::kOk;
    }
  } else {
    const std::string_view name =
        conf.source == RealIpSource::kXRealIp ? std::string_view("x-real-ip") : conf.header;
    for (std::uint32_t i = 0; i < r.nfields; ++i) {
      if (iequals(r.fields[i].name, name)) {
        rc = forwarded_addr(addr, r.fields[i].value, conf.from, conf.recursive);
        break;
      }
    }
  }
  if (rc != ForwardedAddr::kDeclined) replace_addr(r, addr);
  return kPhaseDeclined;
}

std::uint16_t port_of(const ::sockaddr* sa) {
  if (sa == nullptr) return 0;
  if (sa->sa_family == AF_INET) return ntohs(reinterpret_cast<const ::sockaddr_in*>(sa)->sin_port);
  if (sa->sa_family == AF_INET6) {
    return ntohs(reinterpret_cast<const ::sockaddr_in6*>(sa)->sin6_port);
  }
  return 0;
}

// The connection's own address and port, whatever realip did.
bool var_realip_remote_addr(const Request& r, std::string_view, VarSink& s) {
  if (r.c == nullptr) return false;
  s.put(r.realip_saved_addr != nullptr ? r.realip_saved_text : r.c->addr_text);
  return true;
}

bool var_realip_remote_port(const Request& r, std::string_view, VarSink& s) {
  if (r.c == nullptr) return false;
  const std::uint16_t port =
      port_of(r.realip_saved_addr != nullptr ? r.realip_saved_addr : r.c->peer_addr);
  if (port != 0) s.put_uint(port);
  return true;
}

const VarSpec kVariables[] = {
    {"realip_remote_addr", var_realip_remote_addr},
    {"realip_remote_port", var_realip_remote_port},
};

}  // namespace

const HttpModule& realip_module() {
  static const HttpModule* module = [] {
    auto* m = new HttpModule("http_realip");  // never destroyed: used until exit
    auto conf = m->add_loc_conf<RealIpConf>(
        {}, [](const ConfInit& ctx, const RealIpConf& parent, RealIpConf& child) {
          if (!ctx.is_set("set_real_ip_from")) child.from = parent.from;
          if (!ctx.is_set("real_ip_header")) {
            child.source = parent.source;
            child.header = parent.header;
          }
          return Status::ok();
        });
    constexpr ConfContextMask kWhere = kHttpMainConf | kHttpSrvConf | kHttpLocConf;
    m->conf().add("set_real_ip_from", kWhere, Arity::exactly(1), conf.custom(set_from)).multiple =
        true;
    m->conf().add("real_ip_header", kWhere, Arity::exactly(1), conf.custom(set_header));
    m->conf().add("real_ip_recursive", kWhere, Arity::on_off(),
                  conf.flag(&RealIpConf::recursive, false));
    m->set_variables(kVariables);
    return m;
  }();
  return *module;
}

void add_realip_phases(PhaseEngine& engine) {
  engine.add(HttpPhase::kPostRead, realip_handler);
  engine.add(HttpPhase::kPreAccess, realip_handler);
}

}  // namespace vigil::http
