// The resolver and resolver_timeout directives at the http levels: the
// servers and parameters parsed, nginx's inheritance, and the errors of a bad
// one, each with the file and line.
#include <gtest/gtest.h>

#include <string>

#include "http/core/conf.h"
#include "http/core/servers.h"
#include "unit/http/http_conf_fixture.h"

namespace vigil::http {
namespace {

using ResolverConfTest = testing::HttpConfTest;

TEST_F(ResolverConfTest, ServersParametersAndInheritance) {
  const HttpSrvConf* srv = server(
      "server { listen 127.0.0.1:1;\n"
      "  resolver 127.0.0.1 [::1]:5353 127.0.0.2:53 valid=30s ipv6=off status_zone=z;\n"
      "  resolver_timeout 5s;\n"
      "  location /a/ { }\n"
      "  location /b/ { resolver 127.0.0.3; resolver_timeout 1s; }\n"
      "}\n");
  ASSERT_NE(srv, nullptr);
  ASSERT_NE(srv->loc->resolver, nullptr);
  const ResolverConf& r = *srv->loc->resolver;
  ASSERT_EQ(r.servers.size(), 3u);
  EXPECT_EQ(r.servers[0].name, "127.0.0.1:53");
  EXPECT_EQ(r.servers[1].name, "[::1]:5353");
  EXPECT_EQ(r.servers[2].name, "127.0.0.2:53");
  EXPECT_EQ(r.valid, 30000u);
  EXPECT_TRUE(r.ipv4);
  EXPECT_FALSE(r.ipv6);
  EXPECT_EQ(srv->loc->resolver_timeout, 5000u);

  const HttpLocConf& a = find_location(*srv, "/a/x");
  EXPECT_EQ(a.resolver, srv->loc->resolver) << "inherited: one resolver, one cache";
  EXPECT_EQ(a.resolver_timeout, 5000u);
  const HttpLocConf& b = find_location(*srv, "/b/x");
  ASSERT_NE(b.resolver, nullptr);
  EXPECT_EQ(b.resolver->servers[0].name, "127.0.0.3:53");
  EXPECT_TRUE(b.resolver->ipv6) << "nginx 1.22 asks for AAAA too by default";
  EXPECT_EQ(b.resolver_timeout, 1000u);
}

TEST_F(ResolverConfTest, NoResolverByDefault) {
  const HttpSrvConf* srv = server("server { listen 127.0.0.1:1; }\n");
  ASSERT_NE(srv, nullptr);
  EXPECT_EQ(srv->loc->resolver, nullptr);
  EXPECT_EQ(srv->loc->resolver_timeout, 30000u);
}

TEST_F(ResolverConfTest, ErrorsNameTheFileAndLine) {
  auto expect = [&](const std::string& http, const std::string& what) {
    const std::string e = error(http);
    EXPECT_NE(e.find(what), std::string::npos) << e;
    EXPECT_NE(e.find(".conf:"), std::string::npos) << e;
  };
  expect("server { location / { resolver 127.0.0.1:99999; } }",
         "invalid port in resolver \"127.0.0.1:99999\"");
  expect("server { location / { resolver 127.0.0.1 ipv4=off ipv6=off; } }",
         "\"ipv4\" and \"ipv6\" cannot both be \"off\"");
  expect("server { location / { resolver 127.0.0.1 valid=x; } }", "invalid parameter \"valid=x\"");
  expect("server { location / { resolver 127.0.0.1 ipv6=maybe; } }",
         "invalid parameter \"ipv6=maybe\"");
  expect("server { location / { resolver [::1; } }", "invalid host in resolver \"[::1\"");
  expect("server { location / { resolver valid=10s; } }", "no name servers defined");
  expect("server { location / { resolver_timeout never; } }", "invalid value");
}

}  // namespace
}  // namespace vigil::http
