#include "core/proxy_protocol.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace vigil {

namespace {

constexpr unsigned char kV2Signature[12] = {0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D,
                                            0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A};
constexpr std::string_view kV1Prefix = "PROXY ";

// A decimal port without a sign or leading zeros, 0-65535.
bool parse_port(std::string_view s, std::uint16_t& port) {
  if (s.empty() || s.size() > 5 || (s.size() > 1 && s[0] == '0')) return false;
  unsigned v = 0;
  for (char ch : s) {
    if (ch < '0' || ch > '9') return false;
    v = v * 10 + static_cast<unsigned>(ch - '0');
  }
  if (v > 65535) return false;
  port = static_cast<std::uint16_t>(v);
  return true;
}

// An address of `family` in the exact form inet_pton takes.
bool parse_ip(std::string_view s, int family, sockaddr_storage& ss) {
  char buf[INET6_ADDRSTRLEN];
  if (s.empty() || s.size() >= sizeof buf || s.find('\0') != std::string_view::npos) return false;
  std::memcpy(buf, s.data(), s.size());
  buf[s.size()] = '\0';
  ss = {};
  if (family == AF_INET) {
    auto* sin = reinterpret_cast<sockaddr_in*>(&ss);
    sin->sin_family = AF_INET;
    return ::inet_pton(AF_INET, buf, &sin->sin_addr) == 1;
  }
  auto* sin6 = reinterpret_cast<sockaddr_in6*>(&ss);
  sin6->sin6_family = AF_INET6;
  return ::inet_pton(AF_INET6, buf, &sin6->sin6_addr) == 1;
}

void set_port(sockaddr_storage& ss, std::uint16_t port) {
  if (ss.ss_family == AF_INET) {
    reinterpret_cast<sockaddr_in*>(&ss)->sin_port = htons(port);
  } else {
    reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port = htons(port);
  }
}

// "PROXY TCP4 src dst sport dport\r\n": exactly single spaces, CRLF at the end.
ProxyProtocolResult parse_v1(std::string_view in, ProxyProtocolHeader& out, const char*& reason) {
  const std::size_t lf = in.find('\n');
  if (lf == std::string_view::npos) {
    if (in.size() >= kProxyProtocolV1Max) {
      reason = "too long";
      return ProxyProtocolResult::kError;
    }
    // No line yet: the text so far must not hold anything a line cannot,
    // and its protocol must be able to become one ("PROXY INVALID" is
    // refused now, not when the line ends or the wait times out: nginx
    // refuses it at once).
    for (char ch : in) {
      if (ch == '\0') {
        reason = "invalid character";
        return ProxyProtocolResult::kError;
      }
    }
    const std::string_view proto = in.substr(kV1Prefix.size());
    bool possible = false;
    for (std::string_view known :
         {std::string_view("TCP4 "), std::string_view("TCP6 "), std::string_view("UNKNOWN")}) {
      const std::size_t n = std::min(proto.size(), known.size());
      possible = possible || proto.substr(0, n) == known.substr(0, n);
    }
    if (!possible) {
      reason = "unknown protocol";
      return ProxyProtocolResult::kError;
    }
    return ProxyProtocolResult::kAgain;
  }
  if (lf + 1 > kProxyProtocolV1Max) {
    reason = "too long";
    return ProxyProtocolResult::kError;
  }
  if (lf == 0 || in[lf - 1] != '\r') {
    reason = "no CRLF";
    return ProxyProtocolResult::kError;
  }
  std::string_view line = in.substr(kV1Prefix.size(), lf - 1 - kV1Prefix.size());
  // A NUL would end the text early for inet_pton: "2001:db8::\0..." must not
  // pass as "2001:db8::".
  if (line.find('\0') != std::string_view::npos) {
    reason = "invalid character";
    return ProxyProtocolResult::kError;
  }
  out = ProxyProtocolHeader{};
  out.version = 1;
  out.length = lf + 1;
  if (line.starts_with("UNKNOWN") && (line.size() == 7 || line[7] == ' ')) {
    // The receiver ignores the rest of the line (proxy-protocol.txt §2.1).
    for (char ch : line) {
      if (ch == '\0' || ch == '\r') {
        reason = "invalid character";
        return ProxyProtocolResult::kError;
      }
    }
    return ProxyProtocolResult::kDone;
  }
  int family = 0;
  if (line.starts_with("TCP4 ")) {
    family = AF_INET;
  } else if (line.starts_with("TCP6 ")) {
    family = AF_INET6;
  } else {
    reason = "unknown protocol";
    return ProxyProtocolResult::kError;
  }
  line.remove_prefix(5);
  std::string_view field[4];
  for (int i = 0; i < 4; ++i) {
    const std::size_t sp = line.find(' ');
    if ((i < 3) != (sp != std::string_view::npos)) {
      reason = "wrong number of fields";
      return ProxyProtocolResult::kError;
    }
    field[i] = line.substr(0, sp);
    line = sp == std::string_view::npos ? std::string_view{} : line.substr(sp + 1);
  }
  std::uint16_t sport = 0;
  std::uint16_t dport = 0;
  if (!parse_ip(field[0], family, out.src) || !parse_ip(field[1], family, out.dst)) {
    reason = "invalid address";
    return ProxyProtocolResult::kError;
  }
  if (!parse_port(field[2], sport) || !parse_port(field[3], dport)) {
    reason = "invalid port";
    return ProxyProtocolResult::kError;
  }
  set_port(out.src, sport);
  set_port(out.dst, dport);
  out.family = family;
  out.addrlen = family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
  return ProxyProtocolResult::kDone;
}

std::uint16_t be16(const unsigned char* p) {
  return static_cast<std::uint16_t>((p[0] << 8) | p[1]);
}

ProxyProtocolResult parse_v2(std::string_view in, ProxyProtocolHeader& out, const char*& reason) {
  const auto* p = reinterpret_cast<const unsigned char*>(in.data());
  if (in.size() > 12) {
    if ((p[12] >> 4) != 2) {
      reason = "unsupported version";
      return ProxyProtocolResult::kError;
    }
    if ((p[12] & 0x0F) > 1) {
      reason = "unknown command";
      return ProxyProtocolResult::kError;
    }
  }
  if (in.size() < 16) return ProxyProtocolResult::kAgain;
  const std::size_t len = be16(p + 14);
  if (16 + len > kProxyProtocolMax) {
    reason = "header too large";
    return ProxyProtocolResult::kError;
  }
  if (in.size() < 16 + len) return ProxyProtocolResult::kAgain;
  out = ProxyProtocolHeader{};
  out.version = 2;
  out.length = 16 + len;
  const bool proxy = (p[12] & 0x0F) == 1;
  const unsigned family = p[13] >> 4;
  const unsigned char* body = p + 16;
  std::size_t addr_size = 0;
  if (proxy && family == 1) {  // AF_INET: 4 + 4 + 2 + 2
    addr_size = 12;
    if (len < addr_size) {
      reason = "address block too short";
      return ProxyProtocolResult::kError;
    }
    auto* s = reinterpret_cast<sockaddr_in*>(&out.src);
    auto* d = reinterpret_cast<sockaddr_in*>(&out.dst);
    s->sin_family = d->sin_family = AF_INET;
    std::memcpy(&s->sin_addr, body, 4);
    std::memcpy(&d->sin_addr, body + 4, 4);
    std::memcpy(&s->sin_port, body + 8, 2);
    std::memcpy(&d->sin_port, body + 10, 2);
    out.family = AF_INET;
    out.addrlen = sizeof(sockaddr_in);
  } else if (proxy && family == 2) {  // AF_INET6: 16 + 16 + 2 + 2
    addr_size = 36;
    if (len < addr_size) {
      reason = "address block too short";
      return ProxyProtocolResult::kError;
    }
    auto* s = reinterpret_cast<sockaddr_in6*>(&out.src);
    auto* d = reinterpret_cast<sockaddr_in6*>(&out.dst);
    s->sin6_family = d->sin6_family = AF_INET6;
    std::memcpy(&s->sin6_addr, body, 16);
    std::memcpy(&d->sin6_addr, body + 16, 16);
    std::memcpy(&s->sin6_port, body + 32, 2);
    std::memcpy(&d->sin6_port, body + 34, 2);
    out.family = AF_INET6;
    out.addrlen = sizeof(sockaddr_in6);
  } else if (proxy && family == 3) {  // AF_UNIX: two 108-byte paths; no addresses kept
    addr_size = len >= 216 ? 216 : len;
  }
  // LOCAL, AF_UNSPEC or an unknown family: the block is skipped whole
  // (proxy-protocol.txt §2.2: the receiver must ignore what it does not know).
  if (out.family != AF_UNSPEC || addr_size != 0) {
    out.tlvs = in.substr(16 + addr_size, len - addr_size);
  }
  return ProxyProtocolResult::kDone;
}

}  // namespace

ProxyProtocolResult parse_proxy_protocol(std::string_view in, ProxyProtocolHeader& out,
                                         const char*& reason) {
  reason = "";
  if (in.empty()) return ProxyProtocolResult::kAgain;
  if (in[0] == 'P') {
    const std::size_t n = std::min(in.size(), kV1Prefix.size());
    if (in.substr(0, n) != kV1Prefix.substr(0, n)) {
      reason = "not a PROXY protocol header";
      return ProxyProtocolResult::kError;
    }
    if (in.size() <= kV1Prefix.size()) return ProxyProtocolResult::kAgain;
    return parse_v1(in, out, reason);
  }
  const std::size_t n = std::min(in.size(), sizeof kV2Signature);
  if (std::memcmp(in.data(), kV2Signature, n) != 0) {
    reason = "not a PROXY protocol header";
    return ProxyProtocolResult::kError;
  }
  return parse_v2(in, out, reason);
}

bool next_proxy_protocol_tlv(std::string_view& tlvs, ProxyProtocolTlv& out) {
  if (tlvs.size() < 3) return false;
  const auto* p = reinterpret_cast<const unsigned char*>(tlvs.data());
  const std::size_t len = be16(p + 1);
  if (3 + len > tlvs.size()) return false;
  out.type = p[0];
  out.value = tlvs.substr(3, len);
  tlvs.remove_prefix(3 + len);
  return true;
}

std::string sockaddr_host(const sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN];
  const char* r = nullptr;
  if (sa == nullptr) return {};
  if (sa->sa_family == AF_INET) {
    r = ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, buf, sizeof buf);
  } else if (sa->sa_family == AF_INET6) {
    r = ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, buf,
                    sizeof buf);
  }
  return r != nullptr ? std::string(r) : std::string();
}

int sockaddr_port(const sockaddr* sa) {
  if (sa == nullptr) return 0;
  if (sa->sa_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(sa)->sin_port);
  if (sa->sa_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(sa)->sin6_port);
  return 0;
}

std::string proxy_protocol_v1_line(const sockaddr* src, const sockaddr* dst) {
  if (src == nullptr || dst == nullptr || src->sa_family != dst->sa_family ||
      (src->sa_family != AF_INET && src->sa_family != AF_INET6)) {
    return "PROXY UNKNOWN\r\n";
  }
  const std::string s = sockaddr_host(src);
  const std::string d = sockaddr_host(dst);
  char buf[kProxyProtocolV1Max + 1];
  const int n = std::snprintf(buf, sizeof buf, "PROXY %s %s %s %d %d\r\n",
                              src->sa_family == AF_INET ? "TCP4" : "TCP6", s.c_str(), d.c_str(),
                              sockaddr_port(src), sockaddr_port(dst));
  if (n <= 0 || static_cast<std::size_t>(n) >= sizeof buf) return "PROXY UNKNOWN\r\n";
  return std::string(buf, static_cast<std::size_t>(n));
}

}  // namespace vigil
