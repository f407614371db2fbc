// The filter chains of a loaded configuration (http/core/filters.h,
// modules.cc): built once per configuration, shared by every server of it,
// with a module's filter inserted only when the configuration uses it.
#include <gtest/gtest.h>

#include "http/core/filters.h"
#include "http/filters/add_header.h"
#include "http/filters/range.h"
#include "unit/http/http_conf_fixture.h"

namespace vigil::testing {
namespace {

using http::add_header_filter;
using http::chunked_body_filter;
using http::not_modified_header_filter;
using http::range_header_filter;

class FilterChains : public HttpConfTest {};

TEST_F(FilterChains, WithoutAddHeaderTheChainHasOnlyTheCoreFilters) {
  const http::HttpServers* s = servers(
      "server { listen 127.0.0.1:8080; location / { } }\n"
      "server { listen 127.0.0.1:8081; }");
  ASSERT_NE(s, nullptr);
  const http::FilterChains& f = s->filters;
  EXPECT_EQ(f.header.size(), 2u);
  EXPECT_TRUE(f.header.contains(not_modified_header_filter));
  EXPECT_TRUE(f.header.contains(range_header_filter));
  EXPECT_FALSE(f.header.contains(add_header_filter));
  EXPECT_EQ(f.body.size(), 2u);
  EXPECT_TRUE(f.body.contains(http::range_body_filter));
  EXPECT_TRUE(f.body.contains(chunked_body_filter));
  // Every server of the configuration runs the same chains.
  ASSERT_EQ(s->servers.size(), 2u);
  for (const http::HttpSrvConf* srv : s->servers) EXPECT_EQ(srv->filters, &f);
}

TEST_F(FilterChains, AnAddHeaderInOneNestedLocationInsertsItsFilter) {
  const http::HttpServers* s = servers(
      "server { listen 127.0.0.1:8080; location / { } }\n"
      "server { listen 127.0.0.1:8081; location /a/ { location /a/b/ { add_header X-A 1; } } }");
  ASSERT_NE(s, nullptr);
  const http::FilterChains& f = s->filters;
  EXPECT_EQ(f.header.size(), 3u);
  EXPECT_TRUE(f.header.contains(add_header_filter));
  EXPECT_TRUE(f.body.contains(chunked_body_filter));
}

TEST_F(FilterChains, AnAddHeaderAtTheHttpLevelInsertsItsFilter) {
  const http::HttpServers* s =
      servers("add_header X-A 1;\nserver { listen 127.0.0.1:8080; }");
  ASSERT_NE(s, nullptr);
  EXPECT_TRUE(s->filters.header.contains(add_header_filter));
}

}  // namespace
}  // namespace vigil::testing
