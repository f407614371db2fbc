// realip's parsers of what a client sends (realip.cc): "address[:port]" and
// the walk of an X-Forwarded-For list past trusted proxies, with and
// without recursion, as nginx's ngx_http_get_forwarded_addr_internal; a
// long list of trusted addresses is walked without recursion.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <string>

#include "http/access/realip.h"

namespace vigil::http {
namespace {

std::string text_of(const ::sockaddr_storage& ss) {
  char buf[INET6_ADDRSTRLEN];
  unsigned port = 0;
  const char* ok = nullptr;
  if (ss.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const ::sockaddr_in*>(&ss);
    ok = ::inet_ntop(AF_INET, &in->sin_addr, buf, sizeof buf);
    port = ntohs(in->sin_port);
  } else if (ss.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const ::sockaddr_in6*>(&ss);
    ok = ::inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof buf);
    port = ntohs(in6->sin6_port);
  }
  if (ok == nullptr) return "?";
  return std::string(buf) + (port != 0 ? "#" + std::to_string(port) : "");
}

std::string parse(const std::string& text) {
  ::sockaddr_storage ss{};
  return parse_addr_port(text, ss) ? text_of(ss) : "<no>";
}

TEST(RealIpParse, AddressesWithAndWithoutPorts) {
  EXPECT_EQ(parse("192.0.2.1"), "192.0.2.1");
  EXPECT_EQ(parse("192.0.2.1:8080"), "192.0.2.1#8080");
  EXPECT_EQ(parse("2001:db8::1"), "2001:db8::1");
  EXPECT_EQ(parse("[2001:db8::1]:443"), "2001:db8::1#443");
  EXPECT_EQ(parse("192.0.2.1:65535"), "192.0.2.1#65535");
  for (const char* bad : {"", "host", "192.0.2", "192.0.2.1:", "192.0.2.1:65536", "192.0.2.1:8x",
                          "[2001:db8::1]", "[2001:db8::1]x80", "[192.0.2.1]:80x", "192.0.2.1 ",
                          " 192.0.2.1", "[::1", "1.2.3.4:123456"}) {
    EXPECT_EQ(parse(bad), "<no>") << bad;
  }
}

std::vector<AccessRule> trusted(std::initializer_list<const char*> nets) {
  std::vector<AccessRule> v;
  for (const char* n : nets) {
    AccessRule r;
    std::string error, warning;
    EXPECT_TRUE(parse_access_rule(n, r, error, warning)) << n;
    v.push_back(r);
  }
  return v;
}

std::string walk(const std::string& list, bool recursive, ForwardedAddr* rc_out = nullptr,
                 const char* peer = "127.0.0.1") {
  ::sockaddr_storage ss{};
  EXPECT_TRUE(parse_addr_port(peer, ss));
  const ForwardedAddr rc =
      forwarded_addr(ss, list, trusted({"127.0.0.1", "10.0.1.0/24"}), recursive);
  if (rc_out != nullptr) *rc_out = rc;
  return text_of(ss);
}

TEST(RealIpForwarded, TheLastAddressOrTheLastUntrusted) {
  EXPECT_EQ(walk("10.0.0.1, 192.0.2.1", false), "192.0.2.1");
  EXPECT_EQ(walk("192.0.2.1, 10.0.1.1, 127.0.0.1", false), "127.0.0.1");
  EXPECT_EQ(walk("10.0.1.1, 192.0.2.1, 127.0.0.1", true), "192.0.2.1");
  EXPECT_EQ(walk("192.0.2.1,,  10.0.1.1 ,", true), "192.0.2.1") << "separators in any number";
  ForwardedAddr rc;
  EXPECT_EQ(walk("10.0.1.1, 10.0.1.2", true, &rc), "10.0.1.1") << "all trusted: the first";
  EXPECT_EQ(rc, ForwardedAddr::kOk);
  EXPECT_EQ(walk("junk, 10.0.1.2", true, &rc), "10.0.1.2") << "stops at what is no address";
  EXPECT_EQ(rc, ForwardedAddr::kDone);
  EXPECT_EQ(walk("192.0.2.1", true, &rc, "192.0.2.9"), "192.0.2.9") << "an untrusted peer";
  EXPECT_EQ(rc, ForwardedAddr::kDeclined);
  EXPECT_EQ(walk("192.0.2.1, junk", true, &rc), "127.0.0.1");
  EXPECT_EQ(rc, ForwardedAddr::kDeclined);
}

TEST(RealIpForwarded, ALongTrustedListCostsNoStack) {
  std::string list = "192.0.2.77";
  for (int i = 0; i < 200000; ++i) list += ", 127.0.0.1";
  EXPECT_EQ(walk(list, true), "192.0.2.77");
}

}  // namespace
}  // namespace vigil::http
