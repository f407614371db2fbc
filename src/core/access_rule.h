#pragma once
// allow / deny rules by client address (nginx's ngx_http_access_module and
// ngx_stream_access_module share them): an IPv4 or IPv6 network, every
// unix-domain client, or everyone. Checked in order, the first that matches
// deciding. Also the address lists of http's set_real_ip_from and geo's
// proxy.

#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace vigil {

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

// The first of `rules` that matches `sa` (null: no address, which only
// "all" matches); null when none does. An IPv4-mapped IPv6 address is
// matched as IPv4, as nginx does for a dual-stack socket.
const AccessRule* first_matching_rule(const std::vector<AccessRule>& rules, const sockaddr* sa);

// Whether `sa` is in one of the networks of `rules` (allow and deny alike).
inline bool any_rule_matches(const std::vector<AccessRule>& rules, const sockaddr* sa) {
  return first_matching_rule(rules, sa) != nullptr;
}

}  // namespace vigil
