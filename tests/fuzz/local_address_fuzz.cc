// Feeds arbitrary text to the local address parser of proxy_bind
// (parse_local_address in event/peer.cc), whose input may come from a
// request through variables ("proxy_bind $arg_b"): "a.b.c.d[:port]", "v6",
// "[v6]:port". It may refuse anything, but what it accepts must be an
// address of the family and length it says, with the port the text gave,
// and the same when its own text form is parsed again.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "vigil/event/peer.h"

using vigil::fuzz::check;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  sockaddr_storage ss{};
  socklen_t len = 0;
  if (!vigil::parse_local_address(text, ss, len)) return 0;
  check(ss.ss_family == AF_INET || ss.ss_family == AF_INET6, "an IP family");
  check(len == (ss.ss_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6)),
        "the length of its family");
  const bool v4 = ss.ss_family == AF_INET;
  const std::uint16_t port = ntohs(v4 ? reinterpret_cast<sockaddr_in&>(ss).sin_port
                                      : reinterpret_cast<sockaddr_in6&>(ss).sin6_port);
  check(port == 0 || text.find(':') != std::string_view::npos, "a port only when one was given");
  char host[INET6_ADDRSTRLEN];
  const void* a = v4 ? static_cast<const void*>(&reinterpret_cast<sockaddr_in&>(ss).sin_addr)
                     : static_cast<const void*>(&reinterpret_cast<sockaddr_in6&>(ss).sin6_addr);
  check(::inet_ntop(ss.ss_family, a, host, sizeof host) != nullptr, "printable");
  std::string again = v4 ? std::string(host) : "[" + std::string(host) + "]";
  again += ":" + std::to_string(port);
  sockaddr_storage ss2{};
  socklen_t len2 = 0;
  check(vigil::parse_local_address(again, ss2, len2), "its own text form parses");
  check(len2 == len && std::memcmp(&ss, &ss2, len) == 0, "to the same address");
  return 0;
}
