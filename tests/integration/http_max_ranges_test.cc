// max_ranges: 0 turns byte ranges off for a location (the whole file, 200,
// and no Accept-Ranges), inherited from the server's level; a number lets a
// single range through.
#include <gtest/gtest.h>

#include <string>

#include "integration/http_harness.h"

namespace vigil::test {
namespace {

TEST(MaxRanges, ZeroTurnsRangesOff) {
  VigilServer s;
  const int port = free_port();
  const int other = free_port();
  ASSERT_TRUE(s.start("server { listen 127.0.0.1:" + std::to_string(port) +
                      "; root html; access_log off;\n"
                      "  location /off/ { max_ranges 0; }\n"
                      "  location /one/ { max_ranges 1; }\n}\n"
                      "server { listen 127.0.0.1:" +
                      std::to_string(other) +
                      "; root html; access_log off; max_ranges 0;\n"
                      "  location / { }\n}\n"))
      << s.output();
  for (const char* d : {"off", "one", "any"})
    s.write(std::string("html/") + d + "/f.txt", "0123456789");
  const std::string range = "Range: bytes=2-5\r\n";
  Response any = get(port, simple_get("/any/f.txt", "localhost", range));
  EXPECT_EQ(any.status, 206);
  EXPECT_EQ(any.body, "2345");
  Response one = get(port, simple_get("/one/f.txt", "localhost", range));
  EXPECT_EQ(one.status, 206);
  EXPECT_EQ(one.body, "2345");
  Response off = get(port, simple_get("/off/f.txt", "localhost", range));
  EXPECT_EQ(off.status, 200);
  EXPECT_EQ(off.body, "0123456789");
  EXPECT_FALSE(off.has("accept-ranges"));
  EXPECT_TRUE(get(port, simple_get("/any/f.txt")).has("accept-ranges"));
  // Inherited from the server's level.
  Response inherited = get(other, simple_get("/any/f.txt", "localhost", range));
  EXPECT_EQ(inherited.status, 200);
  EXPECT_FALSE(inherited.has("accept-ranges"));
}

TEST(MaxRanges, ANegativeValueIsRefused) {
  VigilServer s;
  auto [rc, out] = check_http_conf(s, "max_ranges -1;");
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("invalid value \"-1\""), std::string::npos) << out;
  EXPECT_NE(out.find("t.conf:3"), std::string::npos) << out;
}

}  // namespace
}  // namespace vigil::test
