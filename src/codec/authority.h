#pragma once
// uri-host [ ":" port ] (RFC 3986 §3.2.2-§3.2.3, RFC 9110 §4.2.1 and §7.2): the
// authority of an absolute-form or authority-form target and the Host value.

#include <string_view>

namespace vigil::http {

struct Authority {
  // An IP literal keeps its brackets ("[::1]"); a reg-name or IPv4 address
  // loses one trailing '.' ("example.com." names the same host as
  // "example.com", as nginx treats it). Case is not folded.
  std::string_view host;
  std::string_view port;  // digits, empty when absent
};

// Parses and validates `s`; false when it is not an acceptable authority.
// Accepted hosts: an IP literal whose inside is an IPv6 address, or a non-empty
// name of ALPHA / DIGIT / "-" / "." / "_" without an empty label ("..", a
// leading '.'). That is narrower than RFC 3986's reg-name: percent-encoding and
// sub-delims never name a real host, userinfo ("user@") is forbidden for http
// (RFC 9110 §4.2.4), and ".." must not reach a configuration that maps hosts to
// directories. A port is at most 65535; `port_required` (CONNECT, RFC 9110
// §9.3.6) also refuses an empty or absent port.
bool parse_authority(std::string_view s, bool port_required, Authority& out);

}  // namespace vigil::http
