// Feeds arbitrary text to the upstream layer's address parser (the `server`
// line's address and proxy_pass's host:port): "host:port", "[v6]:port",
// "host" with a default port, "unix:/path". Numeric hosts only (no DNS).
// It may reject anything, but what it accepts must be a usable address.
#include <sys/socket.h>
#include <sys/un.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "fuzz_check.h"
#include "upstream/group.h"

using vigil::fuzz::check;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  vigil::upstream::set_numeric_hosts_only(true);
  if (size == 0) return 0;
  // The first byte picks the default port: 0 (a port is required) or 80.
  const unsigned default_port = (data[0] & 1) ? 80 : 0;
  std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  std::vector<vigil::upstream::Peer> peers;
  vigil::Status s = vigil::upstream::resolve_address(text, default_port, peers);
  if (!s) {
    check(peers.empty(), "a rejected address adds no peer");
    check(!s.message().empty(), "a rejection says why");
    return 0;
  }
  check(!peers.empty(), "an accepted address gives at least one peer");
  for (const auto& p : peers) {
    check(p.addrlen > 0 && p.addrlen <= sizeof p.addr, "address length in range");
    check(!p.name.empty(), "every peer has a name");
    const int f = p.addr.ss_family;
    check(f == AF_INET || f == AF_INET6 || f == AF_UNIX, "a stream address family");
  }
  return 0;
}
