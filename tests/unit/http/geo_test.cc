// The geo module's tables (most specific network wins, ranges painted in
// order, deletion, IPv6) and its configuration errors with file:line.
#include "core/geo_table.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <string>

#include "unit/http/http_conf_fixture.h"

namespace vigil::http {
namespace {

std::uint32_t v4(const char* s) {
  ::in_addr a;
  EXPECT_EQ(::inet_pton(AF_INET, s, &a), 1) << s;
  return ntohl(a.s_addr);
}

GeoU128 v6(const char* s) {
  std::uint8_t b[16];
  EXPECT_EQ(::inet_pton(AF_INET6, s, b), 1) << s;
  GeoU128 v = 0;
  for (std::uint8_t x : b) v = (v << 8) | x;
  return v;
}

GeoNet net(const char* s) {
  GeoNet n;
  bool warn = false;
  EXPECT_TRUE(parse_geo_net(s, n, warn)) << s;
  return n;
}

TEST(GeoTable, MostSpecificNetworkWinsWhateverTheOrder) {
  GeoBuilder b;
  std::string old;
  EXPECT_TRUE(b.add_net(net("10.1.2.0/24"), "c", old));
  EXPECT_TRUE(b.add_net(net("0.0.0.0/0"), "world", old));
  EXPECT_TRUE(b.add_net(net("10.0.0.0/8"), "a", old));
  EXPECT_TRUE(b.add_net(net("10.1.0.0/16"), "b", old));
  EXPECT_TRUE(b.add_net(net("10.1.2.3"), "host", old));
  const GeoTable t = b.build();
  EXPECT_EQ(t.lookup_v4(v4("10.1.2.3")), "host");
  EXPECT_EQ(t.lookup_v4(v4("10.1.2.4")), "c");
  EXPECT_EQ(t.lookup_v4(v4("10.1.2.255")), "c");
  EXPECT_EQ(t.lookup_v4(v4("10.1.3.0")), "b");
  EXPECT_EQ(t.lookup_v4(v4("10.255.255.255")), "a");
  EXPECT_EQ(t.lookup_v4(v4("11.0.0.0")), "world");
  EXPECT_EQ(t.lookup_v4(v4("0.0.0.0")), "world");
  EXPECT_EQ(t.lookup_v4(v4("255.255.255.255")), "world");
  EXPECT_EQ(t.lookup_v6(v6("::1")), "") << "no IPv6 network and no default";
}

TEST(GeoTable, DuplicateReplacesAndDeleteRemoves) {
  GeoBuilder b;
  std::string old;
  EXPECT_TRUE(b.add_net(net("192.0.2.0/24"), "one", old));
  EXPECT_FALSE(b.add_net(net("192.0.2.0/24"), "two", old));
  EXPECT_EQ(old, "one");
  EXPECT_TRUE(b.add_net(net("192.0.2.128/25"), "half", old));
  EXPECT_TRUE(b.delete_net(net("192.0.2.128/25")));
  EXPECT_FALSE(b.delete_net(net("192.0.2.128/25")));
  EXPECT_TRUE(b.set_default("dflt", old));
  const GeoTable t = b.build();
  EXPECT_EQ(t.lookup_v4(v4("192.0.2.200")), "two");
  EXPECT_EQ(t.lookup_v4(v4("192.0.3.0")), "dflt");
  EXPECT_EQ(t.lookup_v6(v6("2001:db8::1")), "dflt") << "default covers IPv6 too";
}

TEST(GeoTable, Ipv6Networks) {
  GeoBuilder b;
  std::string old;
  EXPECT_TRUE(b.add_net(net("::1/128"), "loopback", old));
  EXPECT_TRUE(b.add_net(net("2001:db8::/32"), "test", old));
  EXPECT_TRUE(b.add_net(net("::/0"), "world", old));
  EXPECT_TRUE(b.add_net(net("2001:db8:0:1::/64"), "sub", old));
  const GeoTable t = b.build();
  EXPECT_EQ(t.lookup_v6(v6("::1")), "loopback");
  EXPECT_EQ(t.lookup_v6(v6("::2")), "world");
  EXPECT_EQ(t.lookup_v6(v6("2001:db8:ffff::1")), "test");
  EXPECT_EQ(t.lookup_v6(v6("2001:db8:0:1::5")), "sub");
  EXPECT_EQ(t.lookup_v6(v6("2001:db9::")), "world");
  EXPECT_EQ(t.lookup_v6(v6("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff")), "world");
  EXPECT_EQ(t.lookup_v4(v4("127.0.0.1")), "") << "an IPv6 network says nothing of IPv4";
}

TEST(GeoTable, RangesLaterReplacesWhatItOverlaps) {
  GeoBuilder b(true);
  std::string old;
  b.add_range(v4("127.0.0.0"), v4("127.0.0.255"), "test");
  b.add_range(v4("127.0.0.1"), v4("127.0.0.2"), "test2");
  b.add_range(v4("127.0.0.1"), v4("127.0.0.1"), "loopback");
  b.add_range(v4("10.0.0.0"), v4("10.0.0.10"), "a");
  b.add_range(v4("10.0.0.5"), v4("10.0.1.0"), "b");  // overlaps a's tail
  b.add_range(v4("0.0.0.0"), v4("0.0.0.0"), "zero");
  b.add_range(v4("255.255.255.255"), v4("255.255.255.255"), "top");
  EXPECT_TRUE(b.set_default("none", old));
  const GeoTable t = b.build();
  EXPECT_EQ(t.lookup_v4(v4("127.0.0.0")), "test");
  EXPECT_EQ(t.lookup_v4(v4("127.0.0.1")), "loopback");
  EXPECT_EQ(t.lookup_v4(v4("127.0.0.2")), "test2");
  EXPECT_EQ(t.lookup_v4(v4("127.0.0.3")), "test");
  EXPECT_EQ(t.lookup_v4(v4("127.0.1.0")), "none");
  EXPECT_EQ(t.lookup_v4(v4("10.0.0.4")), "a");
  EXPECT_EQ(t.lookup_v4(v4("10.0.0.5")), "b");
  EXPECT_EQ(t.lookup_v4(v4("10.0.1.0")), "b");
  EXPECT_EQ(t.lookup_v4(v4("10.0.1.1")), "none");
  EXPECT_EQ(t.lookup_v4(v4("0.0.0.0")), "zero");
  EXPECT_EQ(t.lookup_v4(v4("255.255.255.255")), "top");
}

TEST(GeoTable, RangeDeletion) {
  GeoBuilder b(true);
  b.add_range(v4("127.0.0.0"), v4("127.0.0.255"), "test");
  b.add_range(v4("127.0.0.1"), v4("127.0.0.1"), "loopback");
  EXPECT_TRUE(b.delete_range(v4("127.0.0.0"), v4("127.0.0.0")));
  EXPECT_TRUE(b.delete_range(v4("127.0.0.2"), v4("127.0.0.255")));
  GeoTable t = b.build();
  EXPECT_EQ(t.lookup_v4(v4("127.0.0.1")), "loopback");
  EXPECT_EQ(t.lookup_v4(v4("127.0.0.2")), "");
  EXPECT_TRUE(b.delete_range(v4("127.0.0.1"), v4("127.0.0.1")));
  EXPECT_FALSE(b.delete_range(v4("127.0.0.0"), v4("127.0.0.255"))) << "nothing left there";
  t = b.build();
  EXPECT_EQ(t.lookup_v4(v4("127.0.0.1")), "");
  EXPECT_EQ(t.intervals(), 0u);
}

TEST(GeoTable, ManyRangesStayBinarySearchable) {
  GeoBuilder b(true);
  for (std::uint32_t i = 0; i < 100000; ++i) {
    b.add_range(0x7f000000 + 2 * i, 0x7f000000 + 2 * i, "v" + std::to_string(i % 7));
  }
  const GeoTable t = b.build();
  for (std::uint32_t i = 0; i < 100000; i += 997) {
    EXPECT_EQ(t.lookup_v4(0x7f000000 + 2 * i), "v" + std::to_string(i % 7));
    EXPECT_EQ(t.lookup_v4(0x7f000000 + 2 * i + 1), "");
  }
}

TEST(GeoTable, Parsing) {
  GeoNet n;
  bool warn = false;
  EXPECT_TRUE(parse_geo_net("192.0.2.7/24", n, warn));
  EXPECT_TRUE(warn);
  EXPECT_EQ(static_cast<std::uint32_t>(n.addr), v4("192.0.2.0"));
  EXPECT_EQ(n.prefix, 24u);
  EXPECT_TRUE(parse_geo_net("2001:db8::/32", n, warn));
  EXPECT_FALSE(warn);
  EXPECT_TRUE(n.v6);
  for (const char* bad : {"", "/24", "192.0.2.0/33", "192.0.2.0/", "192.0.2.0/2x", "::/129",
                          "example.com", "192.0.2.0-192.0.2.5", "1.2.3.4/0024"}) {
    EXPECT_FALSE(parse_geo_net(bad, n, warn)) << bad;
  }
  std::uint32_t s = 0;
  std::uint32_t e = 0;
  EXPECT_TRUE(parse_geo_range("10.0.0.1-10.0.0.9", s, e));
  EXPECT_EQ(s, v4("10.0.0.1"));
  EXPECT_EQ(e, v4("10.0.0.9"));
  for (const char* bad : {"10.0.0.9-10.0.0.1", "10.0.0.1", "10.0.0.1-", "-10.0.0.1",
                          "10.0.0.0/8", "::1-::2"}) {
    EXPECT_FALSE(parse_geo_range(bad, s, e)) << bad;
  }
}

using GeoConfTest = testing::HttpConfTest;

TEST_F(GeoConfTest, Errors) {
  auto has = [&](const std::string& http, const std::string& what) {
    const std::string e = error(http);
    EXPECT_NE(e.find(what), std::string::npos) << "got: " << e;
    EXPECT_NE(e.find("vigil.conf:"), std::string::npos) << "no file:line in: " << e;
  };
  has("geo $g { 300.0.0.0/8 x; }", "invalid network \"300.0.0.0/8\"");
  has("geo $g { 10.0.0.0/40 x; }", "invalid network \"10.0.0.0/40\"");
  has("geo $g { delete nonsense; }", "invalid network \"nonsense\"");
  has("geo $g { ranges; 10.0.0.0/8 x; }", "invalid range \"10.0.0.0/8\"");
  has("geo $g { ranges; 10.0.0.9-10.0.0.1 x; }", "invalid range \"10.0.0.9-10.0.0.1\"");
  has("geo $g { 10.0.0.0/8 x y; }", "invalid number of the geo parameters");
  has("geo $g { ranges x y; }", "invalid number of the geo parameters");
  has("geo $g { ranges x; }", "invalid network \"ranges\"");
  has("geo $g { proxy all; }", "invalid network \"all\"");
  has("geo $g { proxy unix:; }", "invalid network \"unix:\"");
  has("geo $g { 10.0.0.0/8 x; ranges; }", "\"ranges\" must come before");
  has("geo $g { default x; include missing.conf; }", "missing.conf");
  has("geo $uri { }", "the duplicate \"uri\" variable");
  has("geo arg_ip $g { }", "invalid variable name \"arg_ip\"");
  has("geo $g { default { } }", "unexpected \"{\"");
  has("server { geo $g { } }", "\"geo\" directive is not allowed here");
}

TEST_F(GeoConfTest, IncludeAndWarningsLoad) {
  write("conf/nets.conf", "10.0.0.0/8 ten;\n127.0.0.0/8 lo;\n");
  EXPECT_NE(servers("geo $g { include nets.conf; 10.0.0.0/8 again; delete 1.0.0.0/8; "
                    "192.0.2.7/24 low; }\n"
                    "geo $arg_ip $h { ranges; default d; 1.0.0.0-1.0.0.9 a; delete 2.0.0.0-2.0.0.1; }\n"
                    "server { listen 127.0.0.1:1; return 200 \"$g $h\"; }"),
            nullptr);
}

}  // namespace
}  // namespace vigil::http
