// geo over real sockets: the variable a request sees for its client
// address, for an address another variable gives, through trusted proxies'
// X-Forwarded-For (recursive or not), in ranges mode with an included file,
// and its value in the access log and in a map.
#include <gtest/gtest.h>

#include <string>

#include "integration/http_harness.h"
#include "test_process.h"

namespace vigil::test {
namespace {

class HttpGeo : public ::testing::Test {
 protected:
  bool start(const std::string& http, const std::string& server_body) {
    port_ = free_port();
    return server_.start(http + "\nserver { listen 127.0.0.1:" + std::to_string(port_) +
                         "; access_log off;\n" + server_body + "\n}");
  }
  Response request(const std::string& target, const std::string& extra = "") {
    return get(port_, simple_get(target, "localhost", extra));
  }
  VigilServer server_;
  int port_ = 0;
};

constexpr char kGeos[] =
    "geo $geo {\n"
    "  127.0.0.0/8 loopback; 127.0.0.1/32 me; 192.0.2.0/24 test; 0.0.0.0/0 world;\n"
    "}\n"
    "geo $arg_ip $by_arg {\n"
    "  default other; 192.0.2.0/24 test; 192.0.2.128/25 upper; 2001:db8::/32 v6;\n"
    "  ::1 six-loopback; delete 192.0.2.128/25;\n"
    "}\n"
    "geo $xff {\n"
    "  default none; proxy 127.0.0.1; proxy 10.0.0.0/8;\n"
    "  127.0.0.0/8 loopback; 192.0.2.0/24 test; 10.0.0.0/8 inner;\n"
    "}\n"
    "geo $xff_recursive {\n"
    "  proxy_recursive; default none; proxy 127.0.0.1; proxy 10.0.0.0/8;\n"
    "  127.0.0.0/8 loopback; 192.0.2.0/24 test; 10.0.0.0/8 inner;\n"
    "}\n"
    "geo $arg_ip $ranged {\n"
    "  ranges; default none; include ranges.conf;\n"
    "  10.0.0.5-10.0.0.5 five;\n"
    "}\n"
    "map $geo $mapped { loopback no; me yes; default unknown; }\n";

TEST_F(HttpGeo, ClientAddressMostSpecificNetwork) {
  server_.write("conf/ranges.conf", "10.0.0.0-10.0.0.255 ten;\n10.0.1.0-10.0.1.9 ten-one;\n");
  ASSERT_TRUE(start(kGeos, "location / { return 200 \"$geo $mapped\"; }")) << server_.output();
  Response r = request("/");
  ASSERT_TRUE(r.complete);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "me yes") << "127.0.0.1/32 is more specific than 127.0.0.0/8";
}

TEST_F(HttpGeo, AddressFromAVariable) {
  server_.write("conf/ranges.conf", "10.0.0.0-10.0.0.255 ten;\n10.0.1.0-10.0.1.9 ten-one;\n");
  ASSERT_TRUE(start(kGeos, "location / { return 200 \"[$by_arg] [$ranged]\"; }"))
      << server_.output();
  const std::pair<const char*, const char*> cases[] = {
      {"192.0.2.1", "[test] [none]"},
      {"192.0.2.200", "[test] [none]"},  // the /25 was deleted
      {"198.51.100.1", "[other] [none]"},
      {"2001:db8::77", "[v6] [none]"},
      {"::1", "[six-loopback] [none]"},
      {"::ffff:192.0.2.9", "[test] [none]"},  // IPv4-mapped: looked up as IPv4
      {"not-an-address", "[other] [none]"},
      {"10.0.0.4", "[other] [ten]"},
      {"10.0.0.5", "[other] [five]"},
      {"10.0.1.9", "[other] [ten-one]"},
      {"10.0.1.10", "[other] [none]"},
      {"::ffff:10.0.0.5", "[other] [five]"},
  };
  for (const auto& [ip, want] : cases) {
    Response r = request(std::string("/?ip=") + ip);
    ASSERT_TRUE(r.complete) << ip;
    EXPECT_EQ(r.body, want) << ip;
  }
  Response r = request("/");
  EXPECT_EQ(r.body, "[other] [none]") << "no value: 255.255.255.255";
}

TEST_F(HttpGeo, TrustedProxiesForwardedFor) {
  server_.write("conf/ranges.conf", "");
  ASSERT_TRUE(start(kGeos, "location / { return 200 \"$xff $xff_recursive\"; }"))
      << server_.output();
  const std::pair<const char*, const char*> cases[] = {
      {"", "loopback loopback"},
      {"X-Forwarded-For: 192.0.2.1\r\n", "test test"},
      {"X-Forwarded-For: 198.51.100.1\r\n", "none none"},
      {"X-Forwarded-For: 192.0.2.1, 10.1.1.1\r\n", "inner test"},
      {"X-Forwarded-For: 192.0.2.1, 10.1.1.1, 10.2.2.2\r\n", "inner test"},
      {"X-Forwarded-For: 192.0.2.1\r\nX-Forwarded-For: 10.1.1.1\r\n", "inner test"},
      {"X-Forwarded-For: garbage\r\n", "loopback loopback"},
  };
  for (const auto& [xff, want] : cases) {
    Response r = request("/", xff);
    ASSERT_TRUE(r.complete) << xff;
    EXPECT_EQ(r.body, want) << xff;
  }
}

TEST_F(HttpGeo, BadNetworkStopsTheLoadWithFileAndLine) {
  port_ = free_port();
  server_.write("conf/bad.conf", "events {}\nhttp {\ngeo $g {\n  10.0.0.0/8 a;\n  10.0.0.0/99 b;\n}\n}\n");
  auto [rc, out] = run({VIGIL_BINARY, "-p", server_.dir(), "-c", "conf/bad.conf", "-t"});
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("[emerg]"), std::string::npos) << out;
  EXPECT_NE(out.find("invalid network \"10.0.0.0/99\" in "), std::string::npos) << out;
  EXPECT_NE(out.find("bad.conf:5"), std::string::npos) << out;
}

}  // namespace
}  // namespace vigil::test
