// The open_file_cache directives (open_file_cache_conf.cc): nginx's
// defaults, inheritance from http to server to location (a location that
// inherits the cache shares its table), "off" below a level that has one,
// and the errors nginx reports.
#include <gtest/gtest.h>

#include <string>

#include "http/core/conf.h"
#include "http/core/servers.h"
#include "http/static/open_file_cache_conf.h"
#include "server/modules.h"
#include "unit/http/http_conf_fixture.h"

namespace vigil::http {
namespace {

using OpenFileCacheConfTest = testing::HttpConfTest;

TEST_F(OpenFileCacheConfTest, OffByDefaultWithNginxDefaults) {
  const HttpServers* s = servers("server { listen 127.0.0.1:1; }");
  ASSERT_NE(s, nullptr);
  const OpenFileCacheLocConf& loc = open_file_cache_conf(*s->servers[0]->loc);
  EXPECT_EQ(loc.cache, nullptr);
  EXPECT_EQ(loc.valid, 60u);
  EXPECT_EQ(loc.min_uses, 1u);
  EXPECT_FALSE(loc.errors);
  EXPECT_TRUE(s->file_caches.empty());
}

TEST_F(OpenFileCacheConfTest, InheritedAndSharedOrReplacedPerLevel) {
  const HttpServers* s = servers(
      "open_file_cache max=100 inactive=20s;\n"
      "open_file_cache_valid 30s;\n"
      "open_file_cache_errors on;\n"
      "server { listen 127.0.0.1:1;\n"
      "  open_file_cache_min_uses 2;\n"
      "  location /a/ { }\n"
      "  location /b/ { open_file_cache max=5; open_file_cache_valid 1m; }\n"
      "  location /c/ { open_file_cache off; }\n"
      "}\n");
  ASSERT_NE(s, nullptr);
  const HttpSrvConf& srv = *s->servers[0];
  const OpenFileCacheLocConf& top = open_file_cache_conf(*srv.loc);
  const OpenFileCacheLocConf& a = open_file_cache_conf(find_location(srv, "/a/x"));
  const OpenFileCacheLocConf& b = open_file_cache_conf(find_location(srv, "/b/x"));
  const OpenFileCacheLocConf& c = open_file_cache_conf(find_location(srv, "/c/x"));
  ASSERT_NE(top.cache, nullptr);
  EXPECT_EQ(top.cache->max, 100u);
  EXPECT_EQ(top.cache->inactive, 20000u);
  EXPECT_EQ(a.cache, top.cache) << "inherited: the same table";
  EXPECT_EQ(a.valid, 30u);
  EXPECT_EQ(a.min_uses, 2u);
  EXPECT_TRUE(a.errors);
  ASSERT_NE(b.cache, nullptr);
  EXPECT_EQ(b.cache->max, 5u);
  EXPECT_EQ(b.cache->inactive, 60000u) << "inactive defaults to 60s";
  EXPECT_EQ(b.valid, 60u);
  EXPECT_EQ(c.cache, nullptr);
  // Two tables per worker: the http level's (shared by server and /a/) and /b/'s.
  ASSERT_EQ(s->file_caches.size(), 2u);
  EXPECT_NE(top.cache->index, b.cache->index);
  EXPECT_EQ(s->file_caches[static_cast<std::size_t>(b.cache->index)], b.cache.get());
}

TEST_F(OpenFileCacheConfTest, ErrorsAsNginxReportsThem) {
  EXPECT_NE(error("open_file_cache inactive=10s;").find("must have the \"max\" parameter"),
            std::string::npos);
  EXPECT_NE(error("open_file_cache max=0;").find("invalid \"open_file_cache\" parameter \"max=0\""),
            std::string::npos);
  EXPECT_NE(error("open_file_cache max=10 inactive=1x;")
                .find("invalid \"open_file_cache\" parameter \"inactive=1x\""),
            std::string::npos);
  EXPECT_NE(error("open_file_cache max=10 bogus;").find("parameter \"bogus\""), std::string::npos);
  EXPECT_NE(error("open_file_cache off max=10;").find("\"off\" cannot be used"), std::string::npos);
  EXPECT_NE(error("open_file_cache_valid soon;").find("invalid value \"soon\""), std::string::npos);
  EXPECT_NE(error("open_file_cache_errors maybe;").find("open_file_cache_errors"),
            std::string::npos);
  EXPECT_NE(error("open_file_cache max=1;\nopen_file_cache max=2;").find("is duplicate"),
            std::string::npos)
      << error("open_file_cache max=1;\nopen_file_cache max=2;");
}

}  // namespace
}  // namespace vigil::http
