// Building upstream groups: addresses resolved at load time (a name with
// several addresses gives several peers, as nginx's ngx_parse_url with
// resolve), primaries before backups, the consistent-hash ring.
#include "upstream/group.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <strings.h>
#include <sys/un.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "core/conf/values.h"
#include "core/unix_addr.h"

namespace vigil::upstream {

namespace {

std::string sockaddr_text(const sockaddr_storage& ss) {
  char host[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) {
    const auto* sin = reinterpret_cast<const sockaddr_in*>(&ss);
    ::inet_ntop(AF_INET, &sin->sin_addr, host, sizeof host);
    return std::string(host) + ":" + std::to_string(ntohs(sin->sin_port));
  }
  if (ss.ss_family == AF_INET6) {
    const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(&ss);
    ::inet_ntop(AF_INET6, &sin6->sin6_addr, host, sizeof host);
    return "[" + std::string(host) + "]:" + std::to_string(ntohs(sin6->sin6_port));
  }
  const auto* sun = reinterpret_cast<const sockaddr_un*>(&ss);
  return "unix:" + std::string(sun->sun_path);
}

const std::array<std::uint32_t, 256>& crc_table() {
  static const std::array<std::uint32_t, 256> table = [] {
    std::array<std::uint32_t, 256> t{};
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  return table;
}

bool g_numeric_only = false;

}  // namespace

void set_numeric_hosts_only(bool on) { g_numeric_only = on; }

std::uint32_t crc32(std::string_view data, std::uint32_t crc) {
  const auto& t = crc_table();
  crc = ~crc;
  for (unsigned char ch : data) crc = t[(crc ^ ch) & 0xff] ^ (crc >> 8);
  return ~crc;
}

namespace {

// What every ring point of a server line is chained on: the CRC-32 of its
// host, a NUL and its port, split as nginx splits the text as written:
// "unix:/path" is all host; else the port is the digits after the last
// colon when nothing but digits follows it ("localhost" and "[::1]" have
// none, "[::1]:80" has "80").
std::uint32_t ring_base(std::string_view server) {
  std::string_view host = server;
  std::string_view port;
  if (server.size() >= 5 && ::strncasecmp(server.data(), "unix:", 5) == 0) {
    host = server.substr(5);
  } else {
    for (std::size_t j = server.size(); j > 0; --j) {
      const char c = server[j - 1];
      if (c == ':') {
        host = server.substr(0, j - 1);
        port = server.substr(j);
        break;
      }
      if (c < '0' || c > '9') break;
    }
  }
  return crc32(port, crc32(std::string_view("", 1), crc32(host)));
}

}  // namespace

Status resolve_address(std::string_view text, unsigned default_port, std::vector<Peer>& out) {
  const std::string quoted = "\"" + std::string(text) + "\"";
  if (text.starts_with("unix:")) {
    Peer p;
    if (!make_unix_sockaddr(text.substr(5), p.addr, p.addrlen)) {
      return Status::error("invalid UNIX-domain socket path in upstream " + quoted);
    }
    p.name = std::string(text);
    out.push_back(std::move(p));
    return Status::ok();
  }
  std::string_view host = text;
  std::string_view port_text;
  if (text.starts_with("[")) {
    std::size_t close = text.find(']');
    if (close == std::string_view::npos) return Status::error("invalid IPv6 address in upstream " + quoted);
    host = text.substr(1, close - 1);
    std::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest[0] != ':') return Status::error("invalid host in upstream " + quoted);
      port_text = rest.substr(1);
      if (port_text.empty()) return Status::error("invalid port in upstream " + quoted);
    }
  } else if (std::size_t colon = text.rfind(':'); colon != std::string_view::npos) {
    host = text.substr(0, colon);
    port_text = text.substr(colon + 1);
    if (port_text.empty()) return Status::error("invalid port in upstream " + quoted);
  }
  if (host.empty()) return Status::error("no host in upstream " + quoted);
  unsigned port = default_port;
  if (!port_text.empty()) {
    auto v = parse_number(port_text);
    if (!v || *v < 1 || *v > 65535) return Status::error("invalid port in upstream " + quoted);
    port = static_cast<unsigned>(*v);
  }
  if (port == 0) return Status::error("no port in upstream " + quoted);

  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (g_numeric_only) hints.ai_flags = AI_NUMERICHOST;
  addrinfo* res = nullptr;
  std::string h(host);
  int rc = ::getaddrinfo(h.c_str(), nullptr, &hints, &res);
  if (rc != 0) {
    return Status::error("host not found in upstream " + quoted + " (" + ::gai_strerror(rc) + ")");
  }
  std::size_t before = out.size();
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6) continue;
    Peer p;
    std::memcpy(&p.addr, ai->ai_addr, ai->ai_addrlen);
    p.addrlen = ai->ai_addrlen;
    if (ai->ai_family == AF_INET) {
      reinterpret_cast<sockaddr_in*>(&p.addr)->sin_port = htons(static_cast<std::uint16_t>(port));
    } else {
      reinterpret_cast<sockaddr_in6*>(&p.addr)->sin6_port = htons(static_cast<std::uint16_t>(port));
    }
    p.name = sockaddr_text(p.addr);
    // getaddrinfo may list an address once per protocol: keep each once.
    bool dup = false;
    for (std::size_t i = before; i < out.size(); ++i) dup = dup || out[i].name == p.name;
    if (!dup) out.push_back(std::move(p));
  }
  ::freeaddrinfo(res);
  if (out.size() == before) return Status::error("host not found in upstream " + quoted);
  return Status::ok();
}

Status add_server(Group& group, const ServerLine& line, unsigned default_port) {
  std::vector<Peer> peers;
  if (Status s = resolve_address(line.address, default_port, peers); !s) {
    return Status::error(s.message() + line.where);
  }
  for (Peer& p : peers) {
    p.server = line.address;
    p.weight = line.weight;
    p.effective_weight = line.weight;
    p.max_fails = line.max_fails;
    p.fail_timeout = line.fail_timeout;
    p.max_conns = line.max_conns;
    p.backup = line.backup;
    p.down = line.down;
    group.peers.push_back(std::move(p));
  }
  return Status::ok();
}

void finish_peers(Group& group) {
  std::stable_partition(group.peers.begin(), group.peers.end(),
                        [](const Peer& p) { return !p.backup; });
  group.primaries = 0;
  for (std::size_t i = 0; i < group.peers.size(); ++i) {
    group.peers[i].index = i;
    if (!group.peers[i].backup) ++group.primaries;
  }
  group.ring.clear();
  if (group.method != Method::kConsistentHash) return;
  // nginx's points (ngx_http_upstream_init_chash, compatible with
  // Cache::Memcached::Fast): 160 per weight unit of each address, the first
  // crc32(host "\0" port prev) with prev four zero bytes, each next one
  // chained on the previous point (its four bytes, little-endian). A server
  // line's points depend only on its own text and weight, so removing one
  // server moves only the keys that were on its points.
  for (std::size_t i = 0; i < group.primaries; ++i) {
    const Peer& p = group.peers[i];
    const std::uint32_t base = ring_base(p.server);
    std::uint32_t prev = 0;
    const std::size_t points = 160 * static_cast<std::size_t>(p.weight);
    for (std::size_t k = 0; k < points; ++k) {
      const char bytes[4] = {static_cast<char>(prev), static_cast<char>(prev >> 8),
                             static_cast<char>(prev >> 16), static_cast<char>(prev >> 24)};
      prev = crc32(std::string_view(bytes, 4), base);
      group.ring.push_back({prev, static_cast<std::uint32_t>(i)});
    }
  }
  std::sort(group.ring.begin(), group.ring.end(), [](const RingPoint& a, const RingPoint& b) {
    return a.hash != b.hash ? a.hash < b.hash : a.peer < b.peer;
  });
  // One point per hash value, as nginx keeps (the first server's).
  auto last = std::unique(group.ring.begin(), group.ring.end(),
                          [](const RingPoint& a, const RingPoint& b) { return a.hash == b.hash; });
  group.ring.erase(last, group.ring.end());
}

// ---- GroupSet -------------------------------------------------------------

namespace {
std::vector<GroupSet*>& sets() {
  static std::vector<GroupSet*> list;
  return list;
}
}  // namespace

void register_set(GroupSet* set) { sets().push_back(set); }
void unregister_set(GroupSet* set) { std::erase(sets(), set); }
const std::vector<GroupSet*>& live_sets() { return sets(); }

GroupSet::GroupSet() { register_set(this); }
GroupSet::~GroupSet() { unregister_set(this); }

Group* GroupSet::find(std::string_view name) const {
  for (const auto& g : groups) {
    if (!g->implicit && g->name == name) return g.get();
  }
  return nullptr;
}

Result<Group*> GroupSet::find_or_add(std::string_view target, unsigned default_port,
                                     std::string_view where) {
  if (Group* g = find(target)) return g;
  for (const auto& g : groups) {
    if (g->implicit && g->name == target) return g.get();
  }
  auto group = std::make_unique<Group>();
  group->name = std::string(target);
  group->where = std::string(where);
  group->implicit = true;
  group->protocol = protocol;
  ServerLine line;
  line.address = std::string(target);
  line.where = std::string(where);
  if (Status s = add_server(*group, line, default_port); !s) return s;
  finish_peers(*group);
  if (Status s = place_state(*group); !s) return Status::error(s.message() + std::string(where));
  groups.push_back(std::move(group));
  return groups.back().get();
}

}  // namespace vigil::upstream
