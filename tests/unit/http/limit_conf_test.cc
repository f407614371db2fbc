// The request limit directives: values, defaults, inheritance and the errors
// nginx reports (limit_req.cc, limit_conn.cc, limit_rate.cc, disable_symlinks.cc).
#include <gtest/gtest.h>

#include <string>

#include "core/shm_zone.h"
#include "http/access/limit_conn.h"
#include "http/access/limit_req.h"
#include "http/core/conf.h"
#include "http/core/servers.h"
#include "http/static/disable_symlinks.h"
#include "server/modules.h"
#include "unit/http/http_conf_fixture.h"

namespace vigil::http {
namespace {

using LimitConf = testing::HttpConfTest;

TEST_F(LimitConf, DefaultsAreNginxs) {
  const HttpSrvConf* srv = server("server { listen 127.0.0.1:1; }");
  ASSERT_NE(srv, nullptr);
  const HttpLocConf& loc = *srv->loc;
  EXPECT_TRUE(limit_req_conf(loc).refs.empty());
  EXPECT_TRUE(limit_conn_conf(loc).refs.empty());
  EXPECT_EQ(limit_req_conf(loc).status, 503);
  EXPECT_EQ(limit_conn_conf(loc).status, 503);
  EXPECT_EQ(limit_req_conf(loc).log_level, LogLevel::kError);
  EXPECT_EQ(limit_conn_conf(loc).log_level, LogLevel::kError);
  EXPECT_FALSE(limit_req_conf(loc).dry_run);
  EXPECT_FALSE(limit_conn_conf(loc).dry_run);
  EXPECT_EQ(loc.limit_rate, 0u);
  EXPECT_EQ(loc.limit_rate_after, 0u);
  EXPECT_EQ(disable_symlinks_conf(loc).mode, DisableSymlinks::kOff);
}

TEST_F(LimitConf, ValuesAndInheritance) {
  const HttpSrvConf* srv = server(
      "limit_req_zone $binary_remote_addr zone=one:1m rate=30r/m;\n"
      "limit_req_zone $uri zone=two:64k rate=5r/s;\n"
      "limit_conn_zone $binary_remote_addr zone=c:1m;\n"
      "limit_req zone=one burst=4;\n"
      "limit_rate 64k; limit_rate_after 1m;\n"
      "server { listen 127.0.0.1:1; limit_conn c 3; limit_req_status 429;\n"
      "  location /a { }\n"
      "  location /b { limit_req zone=two burst=2 nodelay; limit_req zone=one delay=1; "
      "disable_symlinks on from=$document_root; limit_conn_log_level info; }\n"
      "}\n");
  ASSERT_NE(srv, nullptr);
  const HttpLocConf& top = *srv->loc;
  ASSERT_EQ(limit_req_conf(top).refs.size(), 1u);
  EXPECT_EQ(limit_req_conf(top).refs[0].zone->name(), "one");
  EXPECT_EQ(limit_req_conf(top).refs[0].burst, 4000u);
  EXPECT_EQ(limit_req_conf(top).refs[0].delay, 0u);
  ASSERT_EQ(limit_conn_conf(top).refs.size(), 1u);
  EXPECT_EQ(limit_conn_conf(top).refs[0].number, 3u);
  EXPECT_EQ(top.limit_rate, 65536u);
  EXPECT_EQ(top.limit_rate_after, 1048576u);
  EXPECT_EQ(limit_req_conf(top).status, 429);
  ASSERT_EQ(top.prefix_locations.size(), 2u);
  const HttpLocConf* a =
      top.prefix_locations[0]->name == "/a" ? top.prefix_locations[0] : top.prefix_locations[1];
  const HttpLocConf* b =
      a == top.prefix_locations[0] ? top.prefix_locations[1] : top.prefix_locations[0];
  // /a sets nothing: everything inherited.
  ASSERT_EQ(limit_req_conf(*a).refs.size(), 1u);
  EXPECT_EQ(limit_req_conf(*a).refs[0].zone->name(), "one");
  EXPECT_EQ(limit_conn_conf(*a).refs.size(), 1u);
  EXPECT_EQ(limit_req_conf(*a).status, 429);
  EXPECT_EQ(a->limit_rate, 65536u);
  // /b has its own limit_req list (replacing the inherited one).
  ASSERT_EQ(limit_req_conf(*b).refs.size(), 2u);
  EXPECT_EQ(limit_req_conf(*b).refs[0].zone->name(), "two");
  EXPECT_EQ(limit_req_conf(*b).refs[0].burst, 2000u);
  EXPECT_EQ(limit_req_conf(*b).refs[0].delay, UINT64_MAX);  // nodelay
  EXPECT_EQ(limit_req_conf(*b).refs[1].delay, 1000u);
  EXPECT_EQ(disable_symlinks_conf(*b).mode, DisableSymlinks::kOn);
  EXPECT_EQ(disable_symlinks_conf(*b).from, "$document_root");
  EXPECT_EQ(limit_conn_conf(*b).log_level, LogLevel::kInfo);
  EXPECT_EQ(limit_conn_conf(*b).refs.size(), 1u);
  // The zones are registered with their sizes.
  EXPECT_EQ(conf_->zones().find("one")->size(), 1u << 20);
  EXPECT_EQ(conf_->zones().find("two")->size(), 65536u);
}

TEST_F(LimitConf, ErrorsAsNginxReportsThem) {
  auto has = [&](const std::string& http, const std::string& what) {
    const std::string e = error(http);
    EXPECT_NE(e.find(what), std::string::npos) << "got: " << e;
  };
  has("limit_req_zone $binary_remote_addr rate=1r/s;",
      "\"limit_req_zone\" must have \"zone\" parameter");
  has("limit_req_zone $binary_remote_addr zone=one rate=1r/s;", "invalid zone size \"one\"");
  has("limit_req_zone $binary_remote_addr zone=one:1m rate=1r/h;", "invalid rate \"rate=1r/h\"");
  has("limit_req_zone $binary_remote_addr zone=one:1m rate=0r/s;", "invalid rate");
  has("limit_req_zone $binary_remote_addr zone=one:1m bogus;", "invalid parameter \"bogus\"");
  has("limit_req_zone $nope zone=one:1m;", "unknown \"nope\" variable");
  has("limit_req_zone $binary_remote_addr zone=one:1k;", "zone \"one\" is too small");
  has("limit_req_zone $binary_remote_addr zone=one:1m;\n"
      "limit_req_zone $remote_addr zone=one:1m;",
      "limit_req_zone \"one\" is already bound to key \"$binary_remote_addr\"");
  has("limit_req burst=5;", "\"limit_req\" must have \"zone\" parameter");
  has("limit_req zone=one burst=x;", "invalid burst value \"burst=x\"");
  has("limit_req zone=one delay=-1;", "invalid delay value \"delay=-1\"");
  has("limit_req zone=one; limit_req zone=one;", "\"limit_req\" directive is duplicate");
  has("limit_req_status 200;", "invalid value \"200\"");
  has("limit_req_log_level crit;", "invalid value \"crit\"");
  has("limit_conn_zone $binary_remote_addr zone=c:1m;\n"
      "limit_req_zone $binary_remote_addr zone=c:1m;",
      "already declared for a different use");
  has("limit_conn c 0;", "invalid number of connections \"0\"");
  has("limit_conn_zone $binary_remote_addr c:1m;", "invalid parameter \"c:1m\"");
  has("limit_rate fast;", "invalid value \"fast\"");
  has("disable_symlinks maybe;", "invalid value \"maybe\" in \"disable_symlinks\" directive");
  has("disable_symlinks off from=/x;", "\"from=\" cannot be used with \"off\" parameter");
  has("disable_symlinks on to=/x;", "invalid parameter \"to=/x\"");
}

}  // namespace
}  // namespace vigil::http
