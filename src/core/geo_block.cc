#include "core/geo_block.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstdint>
#include <cstring>

#include "vigil/core/log.h"

namespace vigil {
namespace {

constexpr std::uint32_t kNoAddress = 0xffffffffu;  // INADDR_NONE

}  // namespace

Status GeoBlockSink::on_statement(ConfParser& parser, const ConfStatement& st) {
  const std::string where = parser.origin().where(st.words[0].line);
  if (st.end != ConfTerminator::kSemicolon) return Status::error("unexpected \"{\"" + where);
  const std::string& key = st.words[0].text;
  if (st.words.size() == 1) {
    if (key == "ranges") {
      if (!builder_.ranges() && !builder_.empty()) {
        return Status::error("\"ranges\" must come before the networks of the geo block" + where);
      }
      builder_.set_ranges();
      geo_.ranges = true;
      return Status::ok();
    }
    if (key == "proxy_recursive" && allow_proxy_) {
      geo_.proxy_recursive = true;
      return Status::ok();
    }
  }
  if (st.words.size() != 2) return Status::error("invalid number of the geo parameters" + where);
  const std::string& value = st.words[1].text;
  if (key == "include") return parser.parse_file(env_.conf_prefixed(value), *this, where);
  if (key == "proxy" && allow_proxy_) return add_proxy(value, where);
  if (key == "default") {
    std::string old;
    if (!builder_.set_default(value, old)) {
      VIGIL_LOG(Log::global(), kWarn, 0, "duplicate default geo value \"%s\", old value: \"%s\"%s",
                value.c_str(), old.c_str(), where.c_str());
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
    VIGIL_LOG(Log::global(), kWarn, 0,
              "duplicate network \"%s\", value: \"%s\", old value: \"%s\"%s", net.c_str(),
              value.c_str(), old.c_str(), where.c_str());
  }
  return Status::ok();
}

Status GeoBlockSink::add_proxy(const std::string& text, const std::string& where) {
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

bool parse_geo_address(std::string_view text, sockaddr_storage& addr) {
  // Any address fits this buffer: a longer value is none.
  char buf[64];
  if (text.size() >= sizeof buf || std::memchr(text.data(), '\0', text.size()) != nullptr) {
    return false;
  }
  std::memcpy(buf, text.data(), text.size());
  buf[text.size()] = '\0';
  addr = {};
  auto* in = reinterpret_cast<sockaddr_in*>(&addr);
  if (::inet_pton(AF_INET, buf, &in->sin_addr) == 1) {
    in->sin_family = AF_INET;
    return true;
  }
  auto* in6 = reinterpret_cast<sockaddr_in6*>(&addr);
  if (::inet_pton(AF_INET6, buf, &in6->sin6_addr) == 1) {
    in6->sin6_family = AF_INET6;
    return true;
  }
  return false;
}

std::string_view geo_lookup(const GeoBlock& geo, const sockaddr* addr) {
  const GeoTable& table = geo.table;
  if (addr == nullptr || (addr->sa_family != AF_INET && addr->sa_family != AF_INET6)) {
    return table.lookup_v4(kNoAddress);
  }
  if (addr->sa_family == AF_INET) {
    return table.lookup_v4(ntohl(reinterpret_cast<const sockaddr_in*>(addr)->sin_addr.s_addr));
  }
  const auto* a6 = &reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr;
  const std::uint8_t* b = a6->s6_addr;
  if (IN6_IS_ADDR_V4MAPPED(a6)) {
    return table.lookup_v4((std::uint32_t{b[12]} << 24) | (std::uint32_t{b[13]} << 16) |
                           (std::uint32_t{b[14]} << 8) | std::uint32_t{b[15]});
  }
  if (geo.ranges) return table.lookup_v4(kNoAddress);
  GeoU128 v = 0;
  for (int i = 0; i < 16; ++i) v = (v << 8) | b[i];
  return table.lookup_v6(v);
}

}  // namespace vigil
