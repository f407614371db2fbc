// Feeds arbitrary bytes to the PROXY protocol parser (core/proxy_protocol.cc).
// Invariants: a header found is never longer than the input nor than the
// bound, and its addresses are IPv4/IPv6 or none; every prefix of an input
// the parser accepted asks for more (never an error: the reader consumes a
// prefix it was told is valid); the TLV walk stays inside the header; the v1
// line written from the parsed addresses parses back to them.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "core/proxy_protocol.h"
#include "fuzz_check.h"

using vigil::fuzz::check;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  vigil::ProxyProtocolHeader h;
  const char* reason = nullptr;
  const auto r = vigil::parse_proxy_protocol(in, h, reason);
  check(reason != nullptr, "a reason is always set");
  if (r != vigil::ProxyProtocolResult::kDone) return 0;
  check(h.length > 0 && h.length <= in.size(), "the header lies inside the input");
  check(h.length <= vigil::kProxyProtocolMax, "the header is bounded");
  check(h.version == 1 || h.version == 2, "a known version");
  check(h.version != 1 || h.length <= vigil::kProxyProtocolV1Max, "a v1 line is bounded");
  check(h.family == AF_UNSPEC || h.family == AF_INET || h.family == AF_INET6, "a known family");
  if (!h.tlvs.empty()) {
    check(h.tlvs.data() >= in.data() && h.tlvs.data() + h.tlvs.size() <= in.data() + h.length,
          "the TLVs lie inside the header");
  }
  std::string_view tlvs = h.tlvs;
  vigil::ProxyProtocolTlv t;
  while (vigil::next_proxy_protocol_tlv(tlvs, t)) {
    check(t.value.data() + t.value.size() <= in.data() + h.length, "a TLV inside the header");
  }
  // Every shorter prefix of the header is incomplete, not an error.
  for (std::size_t n = 1; n < h.length; n += 1 + n / 8) {
    vigil::ProxyProtocolHeader p;
    check(vigil::parse_proxy_protocol(in.substr(0, n), p, reason) ==
              vigil::ProxyProtocolResult::kAgain,
          "a prefix of a header asks for more");
  }
  if (h.family != AF_UNSPEC) {
    const std::string line = vigil::proxy_protocol_v1_line(
        reinterpret_cast<const sockaddr*>(&h.src), reinterpret_cast<const sockaddr*>(&h.dst));
    vigil::ProxyProtocolHeader back;
    check(vigil::parse_proxy_protocol(line, back, reason) == vigil::ProxyProtocolResult::kDone,
          "the written line parses");
    check(back.family == h.family && back.length == line.size(), "the same family");
    check(std::memcmp(&back.src, &h.src, h.addrlen) == 0 &&
              std::memcmp(&back.dst, &h.dst, h.addrlen) == 0,
          "the same addresses and ports");
  }
  return 0;
}
