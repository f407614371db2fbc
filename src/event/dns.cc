// DNS query building and reply parsing (RFC 1035 §4).
#include "event/dns.h"

#include <sys/socket.h>

#include <cstring>

namespace vigil::dns {
namespace {

constexpr std::size_t kHeader = 12;
constexpr unsigned kMaxPointers = 64;  // more jumps than a 512-byte message needs: a loop
constexpr unsigned kMaxChain = 8;      // CNAMEs followed inside one reply

std::uint16_t get16(const std::uint8_t* p) {
  return static_cast<std::uint16_t>((p[0] << 8) | p[1]);
}

std::uint32_t get32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
         std::uint32_t{p[3]};
}

char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

std::string_view strip_dot(std::string_view s) {
  if (!s.empty() && s.back() == '.') s.remove_suffix(1);
  return s;
}

}  // namespace

bool same_name(std::string_view a, std::string_view b) {
  a = strip_dot(a);
  b = strip_dot(b);
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

std::size_t build_query(std::uint8_t* buf, std::size_t cap, std::uint16_t id,
                        std::string_view name, std::uint16_t qtype) {
  name = strip_dot(name);
  if (name.empty() || name.size() > kMaxName - 2) return 0;
  const std::size_t len = kHeader + name.size() + 2 + 4;
  if (cap < len) return 0;
  std::memset(buf, 0, kHeader);
  buf[0] = static_cast<std::uint8_t>(id >> 8);
  buf[1] = static_cast<std::uint8_t>(id);
  buf[2] = 0x01;  // RD
  buf[5] = 1;     // QDCOUNT
  std::size_t o = kHeader;
  std::size_t label = o++;
  for (char c : name) {
    if (c == '.') {
      const std::size_t l = o - label - 1;
      if (l == 0 || l > 63) return 0;
      buf[label] = static_cast<std::uint8_t>(l);
      label = o++;
      continue;
    }
    buf[o++] = static_cast<std::uint8_t>(c);
  }
  const std::size_t l = o - label - 1;
  if (l == 0 || l > 63) return 0;
  buf[label] = static_cast<std::uint8_t>(l);
  buf[o++] = 0;
  buf[o++] = static_cast<std::uint8_t>(qtype >> 8);
  buf[o++] = static_cast<std::uint8_t>(qtype);
  buf[o++] = 0;
  buf[o++] = 1;  // IN
  return o;
}

std::size_t reverse_name(const Address& a, char* out, std::size_t cap) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::size_t o = 0;
  auto put = [&](char c) {
    if (o < cap) out[o] = c;
    ++o;
  };
  auto puts = [&](std::string_view s) {
    for (char c : s) put(c);
  };
  if (a.family == AF_INET) {
    for (int i = 3; i >= 0; --i) {
      const unsigned v = a.bytes[i];
      if (v >= 100) put(static_cast<char>('0' + v / 100));
      if (v >= 10) put(static_cast<char>('0' + v / 10 % 10));
      put(static_cast<char>('0' + v % 10));
      put('.');
    }
    puts("in-addr.arpa");
  } else if (a.family == AF_INET6) {
    for (int i = 15; i >= 0; --i) {
      put(kHex[a.bytes[i] & 0xf]);
      put('.');
      put(kHex[a.bytes[i] >> 4]);
      put('.');
    }
    puts("ip6.arpa");
  } else {
    return 0;
  }
  return o <= cap ? o : 0;
}

socklen_t to_sockaddr(const Address& a, std::uint16_t port, sockaddr_storage& out) {
  std::memset(&out, 0, sizeof out);
  if (a.family == AF_INET6) {
    auto& in6 = reinterpret_cast<sockaddr_in6&>(out);
    in6.sin6_family = AF_INET6;
    in6.sin6_port = htons(port);
    std::memcpy(&in6.sin6_addr, a.bytes, 16);
    return sizeof in6;
  }
  auto& in4 = reinterpret_cast<sockaddr_in&>(out);
  in4.sin_family = AF_INET;
  in4.sin_port = htons(port);
  std::memcpy(&in4.sin_addr, a.bytes, 4);
  return sizeof in4;
}

bool read_name(const std::uint8_t* p, std::size_t n, std::size_t off, char* out,
               std::size_t& out_len, std::size_t& next) {
  out_len = 0;
  bool jumped = false;
  unsigned jumps = 0;
  for (;;) {
    if (off >= n) return false;
    const std::uint8_t l = p[off];
    if ((l & 0xc0) == 0xc0) {
      if (off + 1 >= n || ++jumps > kMaxPointers) return false;
      if (!jumped) next = off + 2;
      jumped = true;
      off = static_cast<std::size_t>(((l & 0x3f) << 8) | p[off + 1]);
      continue;
    }
    if ((l & 0xc0) != 0) return false;  // the reserved label types (RFC 6891 dropped 0x40)
    if (l == 0) {
      if (!jumped) next = off + 1;
      return true;
    }
    if (off + 1 + l > n) return false;
    if (out_len + (out_len ? 1 : 0) + l > kMaxName) return false;
    if (out_len) out[out_len++] = '.';
    for (std::size_t i = 0; i < l; ++i) out[out_len++] = lower(static_cast<char>(p[off + 1 + i]));
    off += 1 + l;
  }
}

Parse parse_reply(const std::uint8_t* p, std::size_t n, std::uint16_t id, std::string_view name,
                  std::uint16_t qtype, Reply& out) {
  out.rcode = 0;
  out.truncated = false;
  out.ttl = 0;
  out.naddrs = 0;
  out.cname_len = 0;
  out.ptr_len = 0;
  if (n < kHeader) return Parse::kShort;
  if ((p[2] & 0x80) == 0 || (p[2] & 0x78) != 0) return Parse::kNotReply;
  if (get16(p) != id) return Parse::kIdMismatch;
  out.truncated = (p[2] & 0x02) != 0;
  out.rcode = p[3] & 0x0f;
  const unsigned qd = get16(p + 4);
  const unsigned an = get16(p + 6);
  // A reply must repeat our one question (RFC 1035 §7.3: check it).
  if (qd != 1) return out.rcode != 0 && qd == 0 ? Parse::kOk : Parse::kQuestionMismatch;
  char buf[kMaxName + 1];
  std::size_t len = 0;
  std::size_t off = 0;
  if (!read_name(p, n, kHeader, buf, len, off)) return Parse::kBadName;
  if (off + 4 > n) return Parse::kShort;
  if (!same_name({buf, len}, name) || get16(p + off) != qtype || get16(p + off + 2) != 1) {
    return Parse::kQuestionMismatch;
  }
  off += 4;
  if (out.truncated || out.rcode != 0) return Parse::kOk;

  // The names the answers may be for: the question's, then each CNAME's target.
  char owner[kMaxName + 1];
  std::size_t owner_len = strip_dot(name).size();
  if (owner_len > kMaxName) return Parse::kBadName;
  for (std::size_t i = 0; i < owner_len; ++i) owner[i] = lower(name[i]);
  std::uint32_t ttl = UINT32_MAX;
  // A chain may be in any order: walk the answers again while it grows.
  bool any_cname = false;
  for (unsigned round = 0; round <= kMaxChain; ++round) {
    std::size_t o = off;
    bool moved = false;
    out.naddrs = 0;
    out.ptr_len = 0;
    std::uint32_t round_ttl = UINT32_MAX;
    for (unsigned i = 0; i < an; ++i) {
      std::size_t next = 0;
      if (!read_name(p, n, o, buf, len, next)) return Parse::kBadName;
      if (next + 10 > n) return Parse::kShort;
      const std::uint16_t type = get16(p + next);
      const std::uint16_t cls = get16(p + next + 2);
      std::uint32_t rttl = get32(p + next + 4);
      if (rttl > 0x7fffffffu) rttl = 0;  // RFC 2181 §8
      const std::size_t rdlen = get16(p + next + 8);
      const std::size_t rd = next + 10;
      if (rd + rdlen > n) return Parse::kShort;
      o = rd + rdlen;
      if (cls != 1 || !same_name({buf, len}, {owner, owner_len})) continue;
      if (type == kTypeCname && qtype != kTypeCname && !moved) {
        std::size_t tlen = 0;
        std::size_t tnext = 0;
        if (!read_name(p, n, rd, out.cname, tlen, tnext)) return Parse::kBadName;
        if (tnext > rd + rdlen) return Parse::kBadName;
        out.cname_len = tlen;
        if (rttl < ttl) ttl = rttl;
        any_cname = true;
        moved = true;
        continue;
      }
      if (type != qtype) {
        out.other_types = true;
        continue;
      }
      if (type == kTypeA && rdlen == 4 && out.naddrs < kMaxAddrs) {
        Address& a = out.addrs[out.naddrs++];
        a.family = AF_INET;
        std::memcpy(a.bytes, p + rd, 4);
      } else if (type == kTypeAaaa && rdlen == 16 && out.naddrs < kMaxAddrs) {
        Address& a = out.addrs[out.naddrs++];
        a.family = AF_INET6;
        std::memcpy(a.bytes, p + rd, 16);
      } else if (type == kTypePtr && out.ptr_len == 0) {
        std::size_t tnext = 0;
        if (!read_name(p, n, rd, out.ptr, out.ptr_len, tnext)) return Parse::kBadName;
        if (tnext > rd + rdlen) return Parse::kBadName;
      } else {
        continue;
      }
      if (rttl < round_ttl) round_ttl = rttl;
    }
    if (out.naddrs > 0 || out.ptr_len > 0) {
      if (round_ttl < ttl) ttl = round_ttl;
      out.cname_len = 0;  // answered: nothing to follow
      break;
    }
    if (!moved) break;
    // Follow the CNAME inside this reply.
    std::memcpy(owner, out.cname, out.cname_len);
    owner_len = out.cname_len;
  }
  out.ttl = (out.naddrs > 0 || out.ptr_len > 0 || any_cname) ? ttl : 0;
  return Parse::kOk;
}

}  // namespace vigil::dns
