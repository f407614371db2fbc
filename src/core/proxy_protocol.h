#pragma once
// The PROXY protocol header a load balancer puts in front of a connection
// (HAProxy's proxy-protocol.txt, versions 1 and 2): the parser every listener
// with "listen ... proxy_protocol" uses (http, stream, mail), and the
// version 1 line the proxies write toward their upstreams.
//
//   v1: "PROXY TCP4 192.0.2.1 192.0.2.2 123 5678\r\n"  (at most 107 bytes)
//       "PROXY TCP6 <src> <dst> <sport> <dport>\r\n", "PROXY UNKNOWN ...\r\n"
//   v2: the 12-byte signature, version/command, family/transport, a 16-bit
//       length, then the addresses and TLVs (type, 16-bit length, value).
//
// The parser works on what has arrived so far: it answers kAgain while every
// byte given can still be part of a valid header (so a reader may consume
// them and wait for more), kDone with the header's length, or kError with a
// reason. It never reads past the header: the bytes after it belong to the
// protocol behind it (TLS, HTTP, ...).

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace vigil {

// The largest header accepted: a v1 line is at most 107 bytes; a v2 header
// with its TLVs at most this (nginx's bound, too).
inline constexpr std::size_t kProxyProtocolV1Max = 107;
inline constexpr std::size_t kProxyProtocolMax = 4096;

struct ProxyProtocolHeader {
  int version = 0;  // 1 or 2
  // The addresses of the original connection: AF_INET or AF_INET6 with
  // ports in src/dst; AF_UNSPEC when the header carries none (v1 UNKNOWN, a
  // v2 LOCAL command, a v2 family other than TCP/UDP over IPv4/IPv6).
  int family = AF_UNSPEC;
  sockaddr_storage src{};
  sockaddr_storage dst{};
  socklen_t addrlen = 0;  // of src and dst
  // v2: the TLVs after the addresses, as received (a view into the input).
  std::string_view tlvs;
  std::size_t length = 0;  // bytes of the whole header
};

enum class ProxyProtocolResult { kDone, kAgain, kError };

// Parses the start of `in`. kDone: `out` is filled, out.length bytes were the
// header. kAgain: a valid prefix, shorter than a whole header. kError:
// `reason` says why (static text).
ProxyProtocolResult parse_proxy_protocol(std::string_view in, ProxyProtocolHeader& out,
                                         const char*& reason);

// One TLV of a v2 header. next_tlv walks `tlvs` (advancing it); false at the
// end or at a TLV whose length runs past the end (the rest is ignored).
struct ProxyProtocolTlv {
  std::uint8_t type = 0;
  std::string_view value;
};
bool next_proxy_protocol_tlv(std::string_view& tlvs, ProxyProtocolTlv& out);

// The address and port of an AF_INET/AF_INET6 sockaddr as text ("192.0.2.1",
// "2001:db8::1"); empty for anything else.
std::string sockaddr_host(const sockaddr* sa);
int sockaddr_port(const sockaddr* sa);

// "PROXY TCP4 <src> <dst> <sport> <dport>\r\n" for the two addresses, or
// "PROXY UNKNOWN\r\n" when they are not of one IP family. `src` is the
// client, `dst` the address it connected to.
std::string proxy_protocol_v1_line(const sockaddr* src, const sockaddr* dst);

}  // namespace vigil
