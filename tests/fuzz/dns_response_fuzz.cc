// Feeds arbitrary bytes to the resolver's reply parser (event/dns.cc) as the
// reply to a fixed question: it may reject anything, but it must never read
// out of bounds, loop on compression pointers, or report more than it holds.
#include <cstddef>
#include <cstdint>

#include <sys/socket.h>

#include "event/dns.h"
#include "fuzz_check.h"

using vigil::fuzz::check;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  // The first byte picks the question's type; the id is the reply's own, so
  // most inputs get past the id check.
  static constexpr std::uint16_t kTypes[] = {vigil::dns::kTypeA, vigil::dns::kTypeAaaa,
                                             vigil::dns::kTypePtr};
  const std::uint16_t qtype = kTypes[data[0] % 3];
  const std::uint8_t* p = data + 1;
  const std::size_t n = size - 1;
  const std::uint16_t id = n >= 2 ? static_cast<std::uint16_t>((p[0] << 8) | p[1]) : 0;
  vigil::dns::Reply r;
  const vigil::dns::Parse rc = vigil::dns::parse_reply(p, n, id, "a.test", qtype, r);
  if (rc == vigil::dns::Parse::kOk) {
    check(r.naddrs <= vigil::dns::kMaxAddrs, "addresses within the array");
    check(r.cname_len <= vigil::dns::kMaxName, "a CNAME within the limit");
    check(r.ptr_len <= vigil::dns::kMaxName, "a PTR name within the limit");
    for (std::size_t i = 0; i < r.naddrs; ++i) {
      check(r.addrs[i].family == AF_INET || r.addrs[i].family == AF_INET6, "an address family");
    }
  }
  // Every name anywhere in the message: the reader stays inside it.
  char name[vigil::dns::kMaxName + 1];
  for (std::size_t off = 0; off < n && off < 64; ++off) {
    std::size_t len = 0;
    std::size_t next = 0;
    if (vigil::dns::read_name(p, n, off, name, len, next)) {
      check(len <= vigil::dns::kMaxName, "a name within the limit");
      check(next <= n, "the next offset inside the message");
    }
  }
  return 0;
}
