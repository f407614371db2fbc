// allow / deny rules (see access_rule.h).
#include "core/access_rule.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>

namespace vigil {
namespace {

// "/N" with 0 <= N <= max, decimal digits only.
bool parse_prefix(std::string_view s, unsigned max, unsigned& bits) {
  if (s.empty() || s.size() > 3) return false;
  unsigned v = 0;
  for (char ch : s) {
    if (ch < '0' || ch > '9') return false;
    v = v * 10 + static_cast<unsigned>(ch - '0');
  }
  if (v > max) return false;
  bits = v;
  return true;
}

// The client as a rule kind and address bytes (kAll: a family no rule but
// "all" matches).
AccessRule::Kind client_of(const sockaddr* sa, const std::uint8_t*& bytes) {
  if (sa == nullptr) return AccessRule::Kind::kAll;
  switch (sa->sa_family) {
    case AF_INET:
      bytes = reinterpret_cast<const std::uint8_t*>(
          &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr);
      return AccessRule::Kind::kInet;
    case AF_INET6: {
      const auto* a = &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr;
      bytes = reinterpret_cast<const std::uint8_t*>(a);
      if (IN6_IS_ADDR_V4MAPPED(a)) {
        bytes += 12;
        return AccessRule::Kind::kInet;
      }
      return AccessRule::Kind::kInet6;
    }
    case AF_UNIX:
      return AccessRule::Kind::kUnix;
    default:
      return AccessRule::Kind::kAll;
  }
}

bool matches(const AccessRule& rule, AccessRule::Kind kind, const std::uint8_t* bytes) {
  if (rule.kind == AccessRule::Kind::kAll) return true;
  if (rule.kind != kind) return false;
  if (kind == AccessRule::Kind::kUnix) return true;
  const std::size_t n = kind == AccessRule::Kind::kInet ? 4 : 16;
  for (std::size_t i = 0; i < n; ++i) {
    if ((bytes[i] & rule.mask[i]) != rule.addr[i]) return false;
  }
  return true;
}

}  // namespace

bool parse_access_rule(std::string_view text, AccessRule& rule, std::string& error,
                       std::string& warning) {
  const bool deny = rule.deny;
  rule = AccessRule{};
  rule.deny = deny;
  warning.clear();
  if (text == "all") return true;
  if (text == "unix:") {
    rule.kind = AccessRule::Kind::kUnix;
    return true;
  }
  const std::size_t slash = text.find('/');
  const std::string_view host = text.substr(0, slash);
  char buf[64];
  if (host.empty() || host.size() >= sizeof buf || host.find('\0') != std::string_view::npos) {
    error = "invalid parameter \"" + std::string(text) + "\"";
    return false;
  }
  std::memcpy(buf, host.data(), host.size());
  buf[host.size()] = '\0';
  unsigned max = 0;
  if (::inet_pton(AF_INET, buf, rule.addr) == 1) {
    rule.kind = AccessRule::Kind::kInet;
    max = 32;
  } else if (::inet_pton(AF_INET6, buf, rule.addr) == 1) {
    rule.kind = AccessRule::Kind::kInet6;
    max = 128;
  } else {
    error = "invalid parameter \"" + std::string(text) + "\"";
    return false;
  }
  unsigned bits = max;
  if (slash != std::string_view::npos && !parse_prefix(text.substr(slash + 1), max, bits)) {
    rule = AccessRule{};
    rule.deny = deny;
    error = "invalid parameter \"" + std::string(text) + "\"";
    return false;
  }
  bool low_bits = false;
  for (unsigned i = 0; i < max / 8; ++i) {
    const unsigned left = bits > i * 8 ? bits - i * 8 : 0;
    rule.mask[i] = left >= 8 ? 0xff : static_cast<std::uint8_t>(0xff00u >> left);
    if ((rule.addr[i] & ~rule.mask[i]) != 0) low_bits = true;
    rule.addr[i] &= rule.mask[i];
  }
  if (low_bits) warning = "low address bits of " + std::string(text) + " are meaningless";
  return true;
}

const AccessRule* first_matching_rule(const std::vector<AccessRule>& rules, const sockaddr* sa) {
  const std::uint8_t* bytes = nullptr;
  const AccessRule::Kind kind = client_of(sa, bytes);
  for (const AccessRule& rule : rules) {
    if (matches(rule, kind, bytes)) return &rule;
  }
  return nullptr;
}

}  // namespace vigil
