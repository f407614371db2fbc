// Feeds arbitrary text to realip's parsers of request fields (realip.cc):
// "address[:port]" and the walk of an X-Forwarded-For list. Whatever is
// accepted must be an IPv4 or IPv6 address that prints and parses back to
// itself; a walk that declines must leave the peer as it was, and one that
// did not must end on an address of the list.
#include <arpa/inet.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "http/access/realip.h"

using vigil::fuzz::check;
using vigil::http::ForwardedAddr;

namespace {

std::string text_of(const ::sockaddr_storage& ss) {
  char buf[INET6_ADDRSTRLEN];
  const void* a =
      ss.ss_family == AF_INET
          ? static_cast<const void*>(&reinterpret_cast<const ::sockaddr_in*>(&ss)->sin_addr)
          : static_cast<const void*>(&reinterpret_cast<const ::sockaddr_in6*>(&ss)->sin6_addr);
  return ::inet_ntop(ss.ss_family, a, buf, sizeof buf) != nullptr ? buf : "";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  ::sockaddr_storage ss{};
  if (vigil::http::parse_addr_port(text, ss)) {
    check(ss.ss_family == AF_INET || ss.ss_family == AF_INET6, "an IP address");
    const std::string t = text_of(ss);
    check(!t.empty(), "it prints");
    ::sockaddr_storage again{};
    check(vigil::http::parse_addr_port(t, again), "its text parses");
    check(text_of(again) == t, "to the same address");
  }

  static const std::vector<vigil::http::AccessRule> trusted = [] {
    std::vector<vigil::http::AccessRule> v;
    for (const char* n : {"127.0.0.0/8", "10.0.0.0/8", "::1"}) {
      vigil::http::AccessRule r;
      std::string error, warning;
      vigil::http::parse_access_rule(n, r, error, warning);
      v.push_back(r);
    }
    return v;
  }();
  ::sockaddr_storage peer{};
  check(vigil::http::parse_addr_port("127.0.0.1", peer), "the peer parses");
  for (bool recursive : {false, true}) {
    ::sockaddr_storage addr = peer;
    const ForwardedAddr rc = vigil::http::forwarded_addr(addr, text, trusted, recursive);
    if (rc == ForwardedAddr::kDeclined) {
      check(std::memcmp(&addr, &peer, sizeof addr) == 0, "declined: the peer unchanged");
    } else {
      const std::string t = text_of(addr);
      check(!t.empty(), "an address");
    }
  }
  return 0;
}
