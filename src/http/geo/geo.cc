// geo (nginx's ngx_http_geo_module):
//
//   geo [$address] $variable {
//     [ranges;] [proxy_recursive;] [proxy address[/prefix];]
//     default value;  include file;  delete network;
//     network value;            (CIDR: 192.0.2.0/24, 2001:db8::/32, 10.0.0.1)
//     a.b.c.d-e.f.g.h value;    (with ranges)
//   }
//
// $variable is the value of the most specific network holding the client's
// address (or, with ranges, of the range holding it; a later range replaces
// what it overlaps of earlier ones). The address is the connection's (after
// realip), or $address's value when given; with `proxy`, when that address
// is trusted, the last address of X-Forwarded-For (with proxy_recursive,
// the last one that is not trusted). An address that is neither IPv4 nor
// IPv6 (a unix-domain client, a value that is no address) is looked up as
// 255.255.255.255; an IPv4-mapped IPv6 address as its IPv4 address.
//
// The block is read and looked up by core/geo_block.h, shared with stream's
// geo; the tables are built when the block has been read (geo_table.h); a
// request's lookup is a binary search over them, computed when the request
// first reads the variable and kept for the request.
#include "http/geo/geo.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/conf/module.h"
#include "core/conf/parser.h"
#include "core/geo_block.h"
#include "http/access/access.h"
#include "http/access/realip.h"
#include "http/core/conf.h"
#include "http/core/module.h"
#include "http/core/request.h"
#include "http/core/request_vars.h"
#include "http/core/variables.h"
#include "vigil/core/log.h"

namespace vigil::http {
namespace {

class GeoVariable final : public ComputedVariable {
 public:
  std::optional<VarTemplate> source;  // none: the client's address
  GeoBlock geo;

  bool compute(Request& r, std::string_view& out) const override {
    ::sockaddr_storage addr{};
    if (!address(r, addr)) {
      out = geo_lookup(geo, nullptr);
      return true;
    }
    if (!geo.proxies.empty()) (void)forwarded_for(r, addr, geo.proxies, geo.proxy_recursive);
    out = geo_lookup(geo, reinterpret_cast<const ::sockaddr*>(&addr));
    return true;
  }

 private:
  // The address to look up; false: none (looked up as 255.255.255.255).
  bool address(Request& r, ::sockaddr_storage& addr) const {
    if (!source) {
      if (r.c == nullptr || r.c->peer_addr == nullptr) return false;
      const int family = r.c->peer_addr->sa_family;
      if (family != AF_INET && family != AF_INET6) return false;
      std::memcpy(&addr, r.c->peer_addr,
                  std::min<std::size_t>(r.c->peer_addrlen, sizeof(::sockaddr_storage)));
      return true;
    }
    char buf[64];
    const std::size_t n = source->length(r);
    if (n >= sizeof buf) return false;
    const std::size_t len = static_cast<std::size_t>(source->write(r, buf) - buf);
    return parse_geo_address(std::string_view(buf, len), addr);
  }
};

// The geo variables of one http block, made current when it is finished.
struct GeosConf {
  std::vector<std::pair<std::uint32_t, std::shared_ptr<GeoVariable>>> geos;
};

Status set_geo(const DirectiveCall& call, GeosConf& conf) {
  const bool has_source = call.arg_count() == 2;
  auto word = declared_variable_word(call.arg(has_source ? 1 : 0));
  if (!word) return call.error(word.status().message());
  auto geo = std::make_shared<GeoVariable>();
  if (has_source) {
    const std::string& src = call.arg(0);
    if (src.size() < 2 || src[0] != '$') return call.error("invalid variable name \"" + src + "\"");
    auto t = VarTemplate::compile(src);
    if (!t) return call.error(t.status().message());
    geo->source = std::move(t.value());
  }
  const std::uint32_t index = declare_variable(word.value());
  GeoBlockSink sink(geo->geo, call.env(), /*allow_proxy=*/true);
  if (Status s = call.parse_block(sink); !s) return s;
  sink.finish();
  conf.geos.emplace_back(index, std::move(geo));
  return Status::ok();
}

Status finish_geos(const ConfInit&, GeosConf& conf) {
  for (auto& [index, geo] : conf.geos) set_computed_variable(index, geo);
  return Status::ok();
}

}  // namespace

const HttpModule& geo_module() {
  static const HttpModule* module = [] {
    auto* m = new HttpModule("http_geo");  // never destroyed: used until exit
    auto geos = m->conf().add_conf<GeosConf>(kHttpMainConf, finish_geos);
    m->conf().add_block("geo", kHttpMainConf, Arity::between(1, 2), 0, geos.custom(set_geo))
        .multiple = true;
    return m;
  }();
  return *module;
}

}  // namespace vigil::http
