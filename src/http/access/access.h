#pragma once
// The access module (nginx's ngx_http_access_module): allow / deny rules by
// client address, checked in order, the first match deciding (access.cc).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace vigil::http {

struct Request;

}  // namespace vigil::http

struct sockaddr;

namespace vigil::http {

// One "allow" or "deny": an IPv4 or IPv6 network (address & mask), every
// unix-domain client, or everyone.
struct AccessRule {
  enum class Kind : std::uint8_t { kAll, kInet, kInet6, kUnix };
  Kind kind = Kind::kAll;
  bool deny = false;
  std::uint8_t addr[16] = {};  // network byte order; 4 bytes used for kInet
  std::uint8_t mask[16] = {};
};

// Parses "address | address/prefix | unix: | all" into `rule` (kind,
// address, mask; `deny` untouched). Returns false with `error` for text that
// is none of these; an address with bits set outside its prefix is accepted,
// those bits cleared, with `warning` set (nginx's "low address bits of ...
// are meaningless").
bool parse_access_rule(std::string_view text, AccessRule& rule, std::string& error,
                       std::string& warning);

// The module's conf at each level: its rules in order. A level with no
// allow or deny of its own inherits its parent's whole list (nginx's rule).
struct AccessConf {
  std::vector<AccessRule> rules;
  // satisfy any: the client passes the access phase when allow/deny or
  // auth_basic lets it in (nginx keeps this in its core location conf).
  bool satisfy_any = false;
};

// Whether `sa` (null: no address) is in one of the networks of `rules`
// (allow and deny alike; realip's set_real_ip_from list). An IPv4-mapped
// IPv6 address is matched as IPv4.
bool any_rule_matches(const std::vector<AccessRule>& rules, const ::sockaddr* sa);

class HttpModule;
const HttpModule& access_module();

// The allow/deny rules of r.loc: 0 when a rule allows the client, 403 when
// one denies it (logged "access forbidden by rule" when `log`), and
// kPhaseDeclined (phases.h) when there are no rules or none matches.
int access_phase(Request& r, bool log);

class PhaseEngine;
// allow/deny's access phase handler.
void add_access_phase(PhaseEngine& engine);

}  // namespace vigil::http
