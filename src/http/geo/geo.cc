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
// The tables are built when the block has been read (geo_table.h); a
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
#include "http/access/access.h"
#include "http/access/realip.h"
#include "http/core/conf.h"
#include "http/core/module.h"
#include "http/core/request.h"
#include "http/core/request_vars.h"
#include "http/core/variables.h"
#include "http/geo/geo_table.h"
#include "vigil/core/log.h"

namespace vigil::http {
namespace {

constexpr std::uint32_t kNoAddress = 0xffffffffu;  // INADDR_NONE

class GeoVariable final : public ComputedVariable {
 public:
  std::optional<VarTemplate> source;  // none: the client's address
  GeoTable table;
  bool ranges = false;
  std::vector<AccessRule> proxies;
  bool proxy_recursive = false;

  bool compute(Request& r, std::string_view& out) const override {
    ::sockaddr_storage addr{};
    if (!address(r, addr)) {
      out = table.lookup_v4(kNoAddress);
      return true;
    }
    if (!proxies.empty()) (void)forwarded_for(r, addr, proxies, proxy_recursive);
    out = lookup(addr);
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
    // Any address fits this buffer: a longer value is none.
    char buf[64];
    const std::size_t n = source->length(r);
    if (n >= sizeof buf) return false;
    const std::size_t len = static_cast<std::size_t>(source->write(r, buf) - buf);
    buf[len] = '\0';
    if (std::memchr(buf, '\0', len) != nullptr) return false;
    auto* in = reinterpret_cast<::sockaddr_in*>(&addr);
    if (::inet_pton(AF_INET, buf, &in->sin_addr) == 1) {
      in->sin_family = AF_INET;
      return true;
    }
    auto* in6 = reinterpret_cast<::sockaddr_in6*>(&addr);
    if (::inet_pton(AF_INET6, buf, &in6->sin6_addr) == 1) {
      in6->sin6_family = AF_INET6;
      return true;
    }
    return false;
  }

  std::string_view lookup(const ::sockaddr_storage& addr) const {
    if (addr.ss_family == AF_INET) {
      return table.lookup_v4(ntohl(reinterpret_cast<const ::sockaddr_in*>(&addr)->sin_addr.s_addr));
    }
    const auto* a6 = &reinterpret_cast<const ::sockaddr_in6*>(&addr)->sin6_addr;
    const std::uint8_t* b = a6->s6_addr;
    if (IN6_IS_ADDR_V4MAPPED(a6)) {
      return table.lookup_v4((std::uint32_t{b[12]} << 24) | (std::uint32_t{b[13]} << 16) |
                             (std::uint32_t{b[14]} << 8) | std::uint32_t{b[15]});
    }
    if (ranges) return table.lookup_v4(kNoAddress);
    GeoU128 v = 0;
    for (int i = 0; i < 16; ++i) v = (v << 8) | b[i];
    return table.lookup_v6(v);
  }
};

// The lines of a geo block.
class GeoSink : public StatementSink {
 public:
  GeoSink(GeoBuilder& builder, GeoVariable& geo, const ConfEnv& env)
      : builder_(builder), geo_(geo), env_(env) {}

  Status on_statement(ConfParser& parser, const ConfStatement& st) override {
    const std::string where = parser.origin().where(st.words[0].line);
    if (st.end != ConfTerminator::kSemicolon) return Status::error("unexpected \"{\"" + where);
    const std::string& key = st.words[0].text;
    if (st.words.size() == 1) {
      if (key == "ranges") {
        if (!builder_.ranges() && !builder_.empty()) {
          return Status::error("\"ranges\" must come before the networks of the geo block" +
                               where);
        }
        builder_.set_ranges();
        geo_.ranges = true;
        return Status::ok();
      }
      if (key == "proxy_recursive") {
        geo_.proxy_recursive = true;
        return Status::ok();
      }
    }
    if (st.words.size() != 2) return Status::error("invalid number of the geo parameters" + where);
    const std::string& value = st.words[1].text;
    if (key == "include") {
      return parser.parse_file(env_.conf_prefixed(value), *this, where);
    }
    if (key == "proxy") return add_proxy(value, where);
    if (key == "default") {
      std::string old;
      if (!builder_.set_default(value, old)) {
        VIGIL_LOG(Log::global(), kWarn, 0,
                  "duplicate default geo value \"%s\", old value: \"%s\"%s", value.c_str(),
                  old.c_str(), where.c_str());
      }
      return Status::ok();
    }
    const bool del = key == "delete";
    const std::string& net = del ? value : key;
    if (builder_.ranges()) {
      std::uint32_t start;
      std::uint32_t end;
      if (!parse_geo_range(net, start, end)) {
        return Status::error("invalid range \"" + net + "\"" + where);
      }
      if (!del) {
        builder_.add_range(start, end, value);
      } else if (!builder_.delete_range(start, end)) {
        VIGIL_LOG(Log::global(), kWarn, 0, "no address range \"%s\" to delete%s", net.c_str(),
                  where.c_str());
      }
      return Status::ok();
    }
    GeoNet n;
    bool low_bits = false;
    if (!parse_geo_net(net, n, low_bits)) {
      return Status::error("invalid network \"" + net + "\"" + where);
    }
    if (low_bits) {
      VIGIL_LOG(Log::global(), kWarn, 0, "low address bits of %s are meaningless%s", net.c_str(),
                where.c_str());
    }
    if (del) {
      if (!builder_.delete_net(n)) {
        VIGIL_LOG(Log::global(), kWarn, 0, "no network \"%s\" to delete%s", net.c_str(),
                  where.c_str());
      }
      return Status::ok();
    }
    std::string old;
    if (!builder_.add_net(n, value, old)) {
      VIGIL_LOG(Log::global(), kWarn, 0, "duplicate network \"%s\", value: \"%s\", old value: \"%s\"%s",
                net.c_str(), value.c_str(), old.c_str(), where.c_str());
    }
    return Status::ok();
  }

 private:
  Status add_proxy(const std::string& text, const std::string& where) {
    AccessRule rule;
    std::string error;
    std::string warning;
    if (!parse_access_rule(text, rule, error, warning) || rule.kind == AccessRule::Kind::kAll ||
        rule.kind == AccessRule::Kind::kUnix) {
      return Status::error("invalid network \"" + text + "\"" + where);
    }
    if (!warning.empty()) VIGIL_LOG(Log::global(), kWarn, 0, "%s%s", warning.c_str(), where.c_str());
    geo_.proxies.push_back(rule);
    return Status::ok();
  }

  GeoBuilder& builder_;
  GeoVariable& geo_;
  const ConfEnv& env_;
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
  GeoBuilder builder;
  GeoSink sink(builder, *geo, call.env());
  if (Status s = call.parse_block(sink); !s) return s;
  geo->table = builder.build();
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
