// return, add_header and server_tokens at load time: the forms each takes,
// what a level inherits, and the errors (with file:line) nginx reports.
#include <gtest/gtest.h>

#include <string>

#include "http/filters/add_header.h"
#include "http/core/conf.h"
#include "http/rewrite/rewrite.h"
#include "http/core/servers.h"
#include "unit/http/http_conf_fixture.h"

namespace vigil::http {
namespace {

using ReturnConfTest = testing::HttpConfTest;

const HttpLocConf& loc_for(const HttpSrvConf& srv, std::string_view path) {
  return find_location(srv, path);
}

TEST_F(ReturnConfTest, Forms) {
  const HttpSrvConf* srv = server(
      "server { listen 127.0.0.1:1;\n"
      " location /a { return 404; }\n"
      " location /b { return 200 \"hi $uri\"; }\n"
      " location /c { return 301 /x; }\n"
      " location /d { return https://$host$request_uri; }\n"
      " location /e { return $scheme://h/; }\n"
      " location /f { return 444; }\n"
      " location /g { return 200 first; return 200 second; }\n"
      " location /h { }\n"
      "}");
  ASSERT_NE(srv, nullptr);
  EXPECT_EQ(location_return(*srv->loc), nullptr);
  const ReturnConf* a = location_return(loc_for(*srv, "/a"));
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->code, 404);
  EXPECT_FALSE(a->has_text);
  const ReturnConf* b = location_return(loc_for(*srv, "/b"));
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->code, 200);
  EXPECT_TRUE(b->has_text);
  EXPECT_FALSE(b->text.is_literal());
  EXPECT_EQ(location_return(loc_for(*srv, "/c"))->code, 301);
  EXPECT_EQ(location_return(loc_for(*srv, "/c"))->text.literal_text(), "/x");
  EXPECT_EQ(location_return(loc_for(*srv, "/d"))->code, 302);  // a bare URL is a 302
  EXPECT_EQ(location_return(loc_for(*srv, "/d"))->text.source(), "https://$host$request_uri");
  EXPECT_EQ(location_return(loc_for(*srv, "/e"))->code, 302);
  EXPECT_EQ(location_return(loc_for(*srv, "/f"))->code, 444);
  EXPECT_EQ(location_return(loc_for(*srv, "/g"))->text.literal_text(), "first");  // the first one runs
  EXPECT_EQ(location_return(loc_for(*srv, "/h")), nullptr);
}

TEST_F(ReturnConfTest, ServerLevelIsNotInheritedByLocations) {
  const HttpSrvConf* srv = server(
      "server { listen 127.0.0.1:1; return 403;\n"
      " location /a { location /a/b { } }\n"
      " location /c { return 410; location /c/d { } }\n"
      "}");
  ASSERT_NE(srv, nullptr);
  ASSERT_NE(location_return(*srv->loc), nullptr);
  EXPECT_EQ(location_return(*srv->loc)->code, 403);
  EXPECT_EQ(location_return(loc_for(*srv, "/a")), nullptr);
  EXPECT_EQ(location_return(loc_for(*srv, "/a/b")), nullptr);
  EXPECT_EQ(location_return(loc_for(*srv, "/c"))->code, 410);
  EXPECT_EQ(location_return(loc_for(*srv, "/c/d")), nullptr);  // nginx: a nested location has its own
}

TEST_F(ReturnConfTest, Errors) {
  auto has = [&](const std::string& http, const std::string& what) {
    const std::string e = error(http);
    EXPECT_NE(e.find(what), std::string::npos) << "got: " << e;
    EXPECT_NE(e.find(":"), std::string::npos) << "no file:line in: " << e;
  };
  has("server { listen 127.0.0.1:1;\nreturn abc; }", "invalid return code \"abc\"");
  has("server { listen 127.0.0.1:1;\nreturn 1000; }", "invalid return code \"1000\"");
  has("server { listen 127.0.0.1:1;\nreturn 99999999999999999999; }", "invalid return code");
  has("server { listen 127.0.0.1:1;\nreturn 100; }", "invalid return code \"100\"");
  has("server { listen 127.0.0.1:1;\nreturn 600; }", "invalid return code \"600\"");
  has("server { listen 127.0.0.1:1;\nreturn /relative; }", "invalid return code \"/relative\"");
  has("server { listen 127.0.0.1:1;\nreturn http://a/ x; }", "invalid parameter \"x\"");
  has("server { listen 127.0.0.1:1;\nreturn 200 $nope; }", "unknown \"nope\" variable");
  has("server { listen 127.0.0.1:1;\nreturn; }", "invalid number of arguments in \"return\"");
  has("server { listen 127.0.0.1:1;\nreturn 200 a b; }", "invalid number of arguments");
  has("return 200;", "\"return\" directive is not allowed here");
  // The line of the directive.
  const std::string e = error("server { listen 127.0.0.1:1;\n\nreturn 42; }");
  EXPECT_NE(e.find("vigil.conf:5"), std::string::npos) << e;
}

TEST_F(ReturnConfTest, AddHeaderInheritsOnlyWithoutOwn) {
  const HttpSrvConf* srv = server(
      "add_header X-Http h always;\n"
      "server { listen 127.0.0.1:1;\n"
      " location /a { }\n"
      " location /b { add_header X-B \"b $uri\"; add_header X-C c; }\n"
      "}");
  ASSERT_NE(srv, nullptr);
  const AddHeaderList* a = add_header_list(loc_for(*srv, "/a"));
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->headers.size(), 1u);
  EXPECT_EQ(a->headers[0].name, "X-Http");
  EXPECT_TRUE(a->headers[0].always);
  const AddHeaderList* b = add_header_list(loc_for(*srv, "/b"));
  ASSERT_NE(b, nullptr);
  ASSERT_EQ(b->headers.size(), 2u);  // its own two, not the http one
  EXPECT_EQ(b->headers[0].name, "X-B");
  EXPECT_FALSE(b->headers[0].always);
  EXPECT_EQ(b->headers[1].name, "X-C");
}

TEST_F(ReturnConfTest, AddHeaderErrors) {
  auto has = [&](const std::string& http, const std::string& what) {
    const std::string e = error(http);
    EXPECT_NE(e.find(what), std::string::npos) << "got: " << e;
  };
  has("add_header X a sometimes;", "invalid parameter \"sometimes\"");
  has("add_header \"X Y\" a;", "invalid header name \"X Y\"");
  has("add_header X $nope;", "unknown \"nope\" variable");
  has("add_header X;", "invalid number of arguments in \"add_header\"");
}

TEST_F(ReturnConfTest, ServerTokens) {
  const HttpSrvConf* srv = server(
      "server_tokens off;\n"
      "server { listen 127.0.0.1:1;\n"
      " location /a { }\n"
      " location /b { server_tokens on; }\n"
      "}");
  ASSERT_NE(srv, nullptr);
  EXPECT_FALSE(srv->loc->server_tokens);
  EXPECT_FALSE(loc_for(*srv, "/a").server_tokens);
  EXPECT_TRUE(loc_for(*srv, "/b").server_tokens);
  const HttpSrvConf* dflt = server("server { listen 127.0.0.1:1; }");
  ASSERT_NE(dflt, nullptr);
  EXPECT_TRUE(dflt->loc->server_tokens);
  EXPECT_NE(error("server_tokens maybe;").find("server_tokens"), std::string::npos);
}

}  // namespace
}  // namespace vigil::http
