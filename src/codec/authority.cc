#include "codec/authority.h"

#include <arpa/inet.h>

#include <cstring>

#include "codec/chars.h"

namespace vigil::http {
namespace {

// IPvFuture (RFC 3986 §3.2.2): "v" 1*HEXDIG "." 1*( unreserved / sub-delims / ":" ).
// Valid syntax, so a Host naming one is not a bad request (RFC 9112 §3.2);
// it matches no server_name and goes to the default server, as in nginx.
bool valid_ipvfuture(std::string_view s) {
  const auto dot = s.find('.');
  if (dot == std::string_view::npos || dot < 2 || dot + 1 == s.size()) return false;
  for (std::size_t i = 1; i < dot; ++i) {
    if (!chars::is_hex(s[i])) return false;
  }
  for (char c : s.substr(dot + 1)) {
    const bool unreserved = chars::is_alpha(c) || chars::is_digit(c) || c == '-' || c == '.' ||
                            c == '_' || c == '~';
    if (!unreserved && (c == '\0' || std::strchr("!$&'()*+,;=:", c) == nullptr)) return false;
  }
  return true;
}

// The inside of "[...]": an IPv6 address or an IPvFuture literal.
bool valid_ip_literal(std::string_view s) {
  if (!s.empty() && (s.front() == 'v' || s.front() == 'V')) return valid_ipvfuture(s);
  char tmp[INET6_ADDRSTRLEN];
  if (s.empty() || s.size() >= sizeof tmp) return false;
  std::memcpy(tmp, s.data(), s.size());
  tmp[s.size()] = '\0';
  in6_addr addr;
  return ::inet_pton(AF_INET6, tmp, &addr) == 1;
}

bool valid_reg_name(std::string_view s) {
  if (s.empty() || s.front() == '.') return false;
  char prev = '\0';
  for (char c : s) {
    if (!chars::is_reg_name_char(c)) return false;
    if (c == '.' && prev == '.') return false;
    prev = c;
  }
  return true;
}

bool valid_port(std::string_view s) {
  if (s.size() > 5) return false;
  unsigned value = 0;
  for (char c : s) {
    if (!chars::is_digit(c)) return false;
    value = value * 10 + static_cast<unsigned>(c - '0');
  }
  return value <= 65535;
}

}  // namespace

bool parse_authority(std::string_view s, bool port_required, Authority& out) {
  std::string_view host;
  std::string_view rest;
  if (!s.empty() && s.front() == '[') {
    auto close = s.find(']');
    if (close == std::string_view::npos || !valid_ip_literal(s.substr(1, close - 1))) return false;
    host = s.substr(0, close + 1);
    rest = s.substr(close + 1);
  } else {
    auto colon = s.find(':');
    host = s.substr(0, colon);
    rest = colon == std::string_view::npos ? std::string_view() : s.substr(colon);
    if (!valid_reg_name(host)) return false;
    if (host.size() > 1 && host.back() == '.') host.remove_suffix(1);
  }
  std::string_view port;
  if (!rest.empty()) {
    if (rest.front() != ':') return false;
    port = rest.substr(1);
    if (!valid_port(port)) return false;
  }
  if (port_required && port.empty()) return false;
  out.host = host;
  out.port = port;
  return true;
}

}  // namespace vigil::http
