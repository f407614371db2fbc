// The PROXY protocol parser (core/proxy_protocol.cc): version 1 lines and
// version 2 binary headers, whole, cut short and malformed, and the v1 line
// the proxies write toward their upstreams.
#include "core/proxy_protocol.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <string>
#include <string_view>

namespace vigil {
namespace {

using R = ProxyProtocolResult;

const std::string kSig("\r\n\r\n\0\r\nQUIT\n", 12);

std::string v2(unsigned char ver_cmd, unsigned char fam, const std::string& body) {
  std::string h = kSig;
  h += static_cast<char>(ver_cmd);
  h += static_cast<char>(fam);
  h += static_cast<char>(body.size() >> 8);
  h += static_cast<char>(body.size() & 0xFF);
  return h + body;
}

std::string be16(unsigned v) {
  return std::string{static_cast<char>(v >> 8), static_cast<char>(v & 0xFF)};
}

R parse(std::string_view in, ProxyProtocolHeader& h) {
  const char* reason = nullptr;
  R r = parse_proxy_protocol(in, h, reason);
  EXPECT_NE(reason, nullptr);
  if (r == R::kError) {
    EXPECT_STRNE(reason, "");
  }
  return r;
}

std::string host(const sockaddr_storage& ss) {
  return sockaddr_host(reinterpret_cast<const sockaddr*>(&ss));
}
int port(const sockaddr_storage& ss) { return sockaddr_port(reinterpret_cast<const sockaddr*>(&ss)); }

TEST(ProxyProtocolV1, Tcp4LineGivesBothAddressesAndItsLength) {
  const std::string line = "PROXY TCP4 192.0.2.1 192.0.2.2 123 5678\r\n";
  ProxyProtocolHeader h;
  ASSERT_EQ(parse(line + "GET / HTTP/1.0\r\n", h), R::kDone);
  EXPECT_EQ(h.version, 1);
  EXPECT_EQ(h.length, line.size());
  EXPECT_EQ(h.family, AF_INET);
  EXPECT_EQ(host(h.src), "192.0.2.1");
  EXPECT_EQ(host(h.dst), "192.0.2.2");
  EXPECT_EQ(port(h.src), 123);
  EXPECT_EQ(port(h.dst), 5678);
}

TEST(ProxyProtocolV1, Tcp6LineIsNormalised) {
  ProxyProtocolHeader h;
  ASSERT_EQ(parse("PROXY TCP6 2001:Db8::1 2001:DB8:0::2 0 65535\r\n", h), R::kDone);
  EXPECT_EQ(h.family, AF_INET6);
  EXPECT_EQ(host(h.src), "2001:db8::1");
  EXPECT_EQ(host(h.dst), "2001:db8::2");
  EXPECT_EQ(port(h.src), 0);
  EXPECT_EQ(port(h.dst), 65535);
}

TEST(ProxyProtocolV1, UnknownCarriesNoAddressWhateverFollows) {
  ProxyProtocolHeader h;
  ASSERT_EQ(parse("PROXY UNKNOWN\r\nrest", h), R::kDone);
  EXPECT_EQ(h.family, AF_UNSPEC);
  EXPECT_EQ(h.length, 15u);
  ASSERT_EQ(parse("PROXY UNKNOWN 1 2 3 4 5 6\r\n", h), R::kDone);
  EXPECT_EQ(h.family, AF_UNSPEC);
}

TEST(ProxyProtocolV1, EveryPrefixOfAValidLineAsksForMore) {
  const std::string line = "PROXY TCP4 192.0.2.1 192.0.2.2 123 5678\r\n";
  for (std::size_t n = 1; n < line.size(); ++n) {
    ProxyProtocolHeader h;
    EXPECT_EQ(parse(line.substr(0, n), h), R::kAgain) << n;
  }
}

// A line whose protocol cannot be TCP4, TCP6 or UNKNOWN is refused before
// its end: nothing more would make it a header.
TEST(ProxyProtocolV1, AnImpossibleProtocolIsRefusedBeforeTheLineEnds) {
  for (const char* bad :
       {"PROXY INVALID", "PROXY I", "PROXY TCP5", "PROXY TCP4X", "PROXY UNKNOWX"}) {
    ProxyProtocolHeader h;
    EXPECT_EQ(parse(bad, h), R::kError) << bad;
  }
  for (const char* more : {"PROXY T", "PROXY TCP", "PROXY TCP6", "PROXY UNKN", "PROXY UNKNOWN x"}) {
    ProxyProtocolHeader h;
    EXPECT_EQ(parse(more, h), R::kAgain) << more;
  }
}

TEST(ProxyProtocolV1, MalformedLinesAreRefused) {
  const char* bad[] = {
      "GET / HTTP/1.0\r\n",                                // not a header
      "PROXY TCP5 192.0.2.1 192.0.2.2 1 2\r\n",            // protocol
      "PROXY TCP4 192.0.2.1 192.0.2.2 1 2\n",              // LF alone
      "PROXY TCP4 192.0.2.1 192.0.2.2 1\r\n",              // fields missing
      "PROXY TCP4 192.0.2.1 192.0.2.2 1 2 3\r\n",          // one too many
      "PROXY TCP4 192.0.2.1  192.0.2.2 1 2\r\n",           // two spaces
      "PROXY TCP4 192.0.2.256 192.0.2.2 1 2\r\n",          // address
      "PROXY TCP4 2001:db8::1 192.0.2.2 1 2\r\n",          // family
      "PROXY TCP6 192.0.2.1 2001:db8::2 1 2\r\n",          // family
      "PROXY TCP4 192.0.2.1 192.0.2.2 65536 2\r\n",        // port
      "PROXY TCP4 192.0.2.1 192.0.2.2 01 2\r\n",           // leading zero
      "PROXY TCP4 192.0.2.1 192.0.2.2 -1 2\r\n",           // sign
      "PROXY UNKNOWNX\r\n",                                // protocol
      "PROXY\r\n",                                         // nothing
  };
  for (const char* b : bad) {
    ProxyProtocolHeader h;
    EXPECT_EQ(parse(b, h), R::kError) << b;
  }
}

TEST(ProxyProtocolV1, ANulInsideAnAddressIsRefused) {
  // inet_pton would stop at the NUL and take "2001:db8::" (found by the fuzzer).
  const std::string line("PROXY TCP6 2001:db8::\0\0001 2001:db8::2 123 5678\r\n", 47);
  ProxyProtocolHeader h;
  EXPECT_EQ(parse(line, h), R::kError);
  EXPECT_EQ(parse(std::string("PROXY UNKNOWN \0\r\n", 17), h), R::kError);
}

TEST(ProxyProtocolV1, LongerThan107BytesIsRefusedWithOrWithoutItsEnd) {
  ProxyProtocolHeader h;
  std::string s = "PROXY UNKNOWN " + std::string(92, 'x') + "\r\n";  // 108 bytes
  ASSERT_EQ(s.size(), 108u);
  EXPECT_EQ(parse(s, h), R::kError);
  EXPECT_EQ(parse(s.substr(0, 107), h), R::kError);
  s = "PROXY UNKNOWN " + std::string(91, 'x') + "\r\n";  // 107: the limit
  EXPECT_EQ(parse(s, h), R::kDone);
}

TEST(ProxyProtocolV2, Tcp4WithTlvs) {
  std::string body = std::string("\xC0\x00\x02\x01\xC0\x00\x02\x02", 8) + be16(123) + be16(5678);
  const std::string tlv = std::string("\x02", 1) + be16(9) + "localhost" + std::string("\x30", 1) +
                          be16(0);
  const std::string hdr = v2(0x21, 0x11, body + tlv);
  ProxyProtocolHeader h;
  const std::string in = hdr + "GET";  // h.tlvs points into it
  ASSERT_EQ(parse(in, h), R::kDone);
  EXPECT_EQ(h.version, 2);
  EXPECT_EQ(h.length, hdr.size());
  EXPECT_EQ(h.family, AF_INET);
  EXPECT_EQ(host(h.src), "192.0.2.1");
  EXPECT_EQ(host(h.dst), "192.0.2.2");
  EXPECT_EQ(port(h.src), 123);
  EXPECT_EQ(port(h.dst), 5678);
  std::string_view tlvs = h.tlvs;
  ProxyProtocolTlv t;
  ASSERT_TRUE(next_proxy_protocol_tlv(tlvs, t));
  EXPECT_EQ(t.type, 0x02);
  EXPECT_EQ(t.value, "localhost");
  ASSERT_TRUE(next_proxy_protocol_tlv(tlvs, t));
  EXPECT_EQ(t.type, 0x30);
  EXPECT_EQ(t.value, "");
  EXPECT_FALSE(next_proxy_protocol_tlv(tlvs, t));
}

TEST(ProxyProtocolV2, Tcp6) {
  std::string body(36, '\0');
  body[0] = 0x20, body[1] = 0x01, body[2] = 0x0d, body[3] = static_cast<char>(0xb8);
  body[15] = 1;
  body[16] = 0x20, body[17] = 0x01, body[18] = 0x0d, body[19] = static_cast<char>(0xb8);
  body[31] = 2;
  body.replace(32, 4, be16(123) + be16(5678));
  ProxyProtocolHeader h;
  ASSERT_EQ(parse(v2(0x21, 0x21, body), h), R::kDone);
  EXPECT_EQ(h.family, AF_INET6);
  EXPECT_EQ(host(h.src), "2001:db8::1");
  EXPECT_EQ(host(h.dst), "2001:db8::2");
  EXPECT_EQ(port(h.dst), 5678);
}

TEST(ProxyProtocolV2, LocalUnspecAndUnknownFamiliesCarryNoAddress) {
  ProxyProtocolHeader h;
  ASSERT_EQ(parse(v2(0x20, 0x11, std::string(12, '\1')), h), R::kDone);  // LOCAL
  EXPECT_EQ(h.family, AF_UNSPEC);
  EXPECT_EQ(h.length, 28u);
  ASSERT_EQ(parse(v2(0x21, 0x01, ""), h), R::kDone);  // nginx-tests' "unknown 1"
  EXPECT_EQ(h.family, AF_UNSPEC);
  ASSERT_EQ(parse(v2(0x21, 0x41, "\1\2\3\4"), h), R::kDone);  // "unknown 2"
  EXPECT_EQ(h.family, AF_UNSPEC);
  EXPECT_EQ(h.length, 20u);
  ASSERT_EQ(parse(v2(0x21, 0x31, std::string(216, 'p')), h), R::kDone);  // AF_UNIX
  EXPECT_EQ(h.family, AF_UNSPEC);
}

TEST(ProxyProtocolV2, EveryPrefixAsksForMore) {
  const std::string hdr =
      v2(0x21, 0x11, std::string("\xC0\x00\x02\x01\xC0\x00\x02\x02", 8) + be16(1) + be16(2));
  for (std::size_t n = 1; n < hdr.size(); ++n) {
    ProxyProtocolHeader h;
    EXPECT_EQ(parse(hdr.substr(0, n), h), R::kAgain) << n;
  }
}

TEST(ProxyProtocolV2, MalformedHeadersAreRefused) {
  ProxyProtocolHeader h;
  EXPECT_EQ(parse(v2(0x11, 0x11, std::string(12, '\0')), h), R::kError);  // version 1
  EXPECT_EQ(parse(v2(0x31, 0x11, std::string(12, '\0')), h), R::kError);  // version 3
  EXPECT_EQ(parse(v2(0x22, 0x11, std::string(12, '\0')), h), R::kError);  // command 2
  EXPECT_EQ(parse(v2(0x21, 0x11, std::string(11, '\0')), h), R::kError);  // short IPv4
  EXPECT_EQ(parse(v2(0x21, 0x21, std::string(35, '\0')), h), R::kError);  // short IPv6
  std::string sig = kSig;
  sig[11] = 'X';
  EXPECT_EQ(parse(sig + "\x21\x11", h), R::kError);  // signature
  // A length beyond the bound is refused before it arrives.
  std::string big = kSig + std::string("\x21\x11", 2) + be16(4096 - 15);
  EXPECT_EQ(parse(big, h), R::kError);
  std::string edge = kSig + std::string("\x21\x11", 2) + be16(4096 - 16);
  EXPECT_EQ(parse(edge, h), R::kAgain);
}

TEST(ProxyProtocolTlv, ATruncatedTlvEndsTheWalk) {
  std::string_view tlvs("\x01\x00\x05" "ab", 5);
  ProxyProtocolTlv t;
  EXPECT_FALSE(next_proxy_protocol_tlv(tlvs, t));
}

TEST(ProxyProtocolWrite, V1LineOfTwoAddresses) {
  sockaddr_in a{}, b{};
  a.sin_family = b.sin_family = AF_INET;
  ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  ::inet_pton(AF_INET, "127.0.0.2", &b.sin_addr);
  a.sin_port = htons(40000);
  b.sin_port = htons(8080);
  const std::string line = proxy_protocol_v1_line(reinterpret_cast<sockaddr*>(&a),
                                                  reinterpret_cast<sockaddr*>(&b));
  EXPECT_EQ(line, "PROXY TCP4 127.0.0.1 127.0.0.2 40000 8080\r\n");
  // It parses back to the same addresses.
  ProxyProtocolHeader h;
  ASSERT_EQ(parse(line, h), R::kDone);
  EXPECT_EQ(port(h.src), 40000);
  sockaddr_in6 c{};
  c.sin6_family = AF_INET6;
  EXPECT_EQ(proxy_protocol_v1_line(reinterpret_cast<sockaddr*>(&a), reinterpret_cast<sockaddr*>(&c)),
            "PROXY UNKNOWN\r\n");
  EXPECT_EQ(proxy_protocol_v1_line(nullptr, nullptr), "PROXY UNKNOWN\r\n");
}

}  // namespace
}  // namespace vigil
