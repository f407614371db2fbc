#pragma once
// Address networks for the stream and mail set_real_ip_from lists (nginx's
// ngx_cidr_t): "192.0.2.0/24", "2001:db8::/32", a single address, or a host
// name resolved once at load time to each of its addresses; "unix:" is every
// unix-domain peer.

#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace vigil {

struct Cidr {
  int family = 0;  // AF_INET, AF_INET6 or AF_UNIX (no address)
  std::uint8_t addr[16] = {};
  std::uint8_t mask[16] = {};
};

// Appends the networks `text` names to `out`; false with `error` when it is
// neither a network, "unix:" nor a host name that resolves ("all" is not a
// network here).
bool parse_cidr_or_host(std::string_view text, std::vector<Cidr>& out, std::string& error);

// Whether `sa` (null: no) lies in one of `list`. An IPv4-mapped IPv6
// address is matched as IPv4.
bool cidr_match(const std::vector<Cidr>& list, const sockaddr* sa);

}  // namespace vigil
