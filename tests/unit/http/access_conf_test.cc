// allow / deny (access.cc): the address parser (IPv4, IPv6, prefixes, the
// low-bits warning, what is refused), the rules each level ends up with (a
// level with none inherits its parent's whole list, as nginx), and load
// errors with the file and line.
#include <gtest/gtest.h>

#include <string>

#include "http/access/access.h"
#include "http/core/conf.h"
#include "http/core/module.h"
#include "http/core/servers.h"
#include "unit/http/http_conf_fixture.h"

namespace vigil::http {
namespace {

AccessRule parse_ok(const std::string& text, std::string* warning_out = nullptr) {
  AccessRule r;
  std::string error;
  std::string warning;
  EXPECT_TRUE(parse_access_rule(text, r, error, warning)) << text << ": " << error;
  if (warning_out != nullptr) {
    *warning_out = warning;
  } else {
    EXPECT_EQ(warning, "") << text;
  }
  return r;
}

std::string hex(const std::uint8_t* b, std::size_t n) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  for (std::size_t i = 0; i < n; ++i) {
    s += kHex[b[i] >> 4];
    s += kHex[b[i] & 15];
  }
  return s;
}

TEST(AccessRuleParse, AllUnixAndAddresses) {
  EXPECT_EQ(parse_ok("all").kind, AccessRule::Kind::kAll);
  EXPECT_EQ(parse_ok("unix:").kind, AccessRule::Kind::kUnix);

  AccessRule r = parse_ok("192.168.1.7");
  EXPECT_EQ(r.kind, AccessRule::Kind::kInet);
  EXPECT_EQ(hex(r.addr, 4), "c0a80107");
  EXPECT_EQ(hex(r.mask, 4), "ffffffff");

  r = parse_ok("10.1.0.0/17");
  EXPECT_EQ(hex(r.addr, 4), "0a010000");
  EXPECT_EQ(hex(r.mask, 4), "ffff8000");

  r = parse_ok("0.0.0.0/0");
  EXPECT_EQ(hex(r.mask, 4), "00000000");

  r = parse_ok("2001:db8::/33");
  EXPECT_EQ(r.kind, AccessRule::Kind::kInet6);
  EXPECT_EQ(hex(r.addr, 16), "20010db8000000000000000000000000");
  EXPECT_EQ(hex(r.mask, 16), "ffffffff800000000000000000000000");

  r = parse_ok("::1");
  EXPECT_EQ(hex(r.mask, 16), std::string(32, 'f'));
}

TEST(AccessRuleParse, LowBitsAreClearedWithAWarning) {
  std::string warning;
  AccessRule r = parse_ok("10.1.2.3/8", &warning);
  EXPECT_EQ(warning, "low address bits of 10.1.2.3/8 are meaningless");
  EXPECT_EQ(hex(r.addr, 4), "0a000000");
  r = parse_ok("2001:db8::1/64", &warning);
  EXPECT_EQ(warning, "low address bits of 2001:db8::1/64 are meaningless");
  EXPECT_EQ(hex(r.addr, 16), "20010db8000000000000000000000000");
}

TEST(AccessRuleParse, RefusesWhatIsNoAddress) {
  for (const char* bad :
       {"", "none", "1.2.3", "1.2.3.4.5", "256.1.1.1", "1.2.3.4/33", "1.2.3.4/", "1.2.3.4/-1",
        "1.2.3.4/a", "1.2.3.4/0008", "::1/129", "2001:db8:::1", "unix:/tmp/x", "/8", "all/8",
        "1.2.3.4/8/8", " 1.2.3.4"}) {
    AccessRule r;
    r.deny = true;
    std::string error;
    std::string warning;
    EXPECT_FALSE(parse_access_rule(bad, r, error, warning)) << bad;
    EXPECT_EQ(error, std::string("invalid parameter \"") + bad + "\"");
    EXPECT_TRUE(r.deny) << "the kind of rule is the caller's";
  }
}

using AccessConfTest = testing::HttpConfTest;

// allow/deny are the access module's own conf (module.h).
const std::vector<AccessRule>& rules_of(const HttpLocConf& loc) {
  return loc_conf<AccessConf>(loc, access_module()).rules;
}

TEST_F(AccessConfTest, InOrderAndInheritedOnlyByLevelsWithoutRules) {
  const HttpSrvConf* srv = server(
      "allow 10.0.0.0/8;\n"
      "server { listen 127.0.0.1:1;\n"
      "  deny 10.1.0.0/16; allow 10.0.0.0/8; deny all;\n"
      "  location /a/ { }\n"
      "  location /b/ { allow all; }\n"
      "}\n"
      "server { listen 127.0.0.1:2; }\n");
  ASSERT_NE(srv, nullptr);
  const auto& rules = rules_of(*srv->loc);
  ASSERT_EQ(rules.size(), 3u);
  EXPECT_TRUE(rules[0].deny);
  EXPECT_EQ(hex(rules[0].mask, 4), "ffff0000");
  EXPECT_FALSE(rules[1].deny);
  EXPECT_TRUE(rules[2].deny);
  EXPECT_EQ(rules[2].kind, AccessRule::Kind::kAll);
  EXPECT_EQ(rules_of(find_location(*srv, "/a/x")).size(), 3u) << "inherited whole";
  const auto& b = rules_of(find_location(*srv, "/b/x"));
  ASSERT_EQ(b.size(), 1u) << "its own replace the parent's";
  EXPECT_FALSE(b[0].deny);
  const HttpServers* all = http_servers(*conf_);
  ASSERT_EQ(all->servers.size(), 2u);
  ASSERT_EQ(rules_of(*all->servers[1]->loc).size(), 1u) << "the http level's";
}

TEST_F(AccessConfTest, ErrorsNameTheFileAndLine) {
  for (const char* bad : {"allow 1.2.3.4/40;", "deny localhost;", "allow;", "deny 1.2.3.4 all;"}) {
    const std::string e = error(std::string("server { location / { ") + bad + " } }");
    EXPECT_NE(e.find(".conf:"), std::string::npos) << bad << ": " << e;
  }
  EXPECT_NE(error("server { allow 1.2.3.4/40; }").find("invalid parameter \"1.2.3.4/40\""),
            std::string::npos);
  EXPECT_NE(error("server { deny nowhere; }").find("invalid parameter \"nowhere\""),
            std::string::npos);
}

}  // namespace
}  // namespace vigil::http
