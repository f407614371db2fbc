// Regular-expression locations, server names, alias and the rewrite
// module at load time: what each level keeps, the search order nginx uses,
// and the errors (with file:line) nginx reports.
#include <gtest/gtest.h>

#include <string>

#include "http/core/conf.h"
#include "http/core/module.h"
#include "http/core/servers.h"
#include "http/rewrite/rewrite.h"
#include "unit/http/http_conf_fixture.h"

namespace vigil::http {
namespace {

using RewriteConfTest = testing::HttpConfTest;

const RewriteConf& rewrite_of(const HttpLocConf& loc) {
  return loc_conf<RewriteConf>(loc, rewrite_module());
}

TEST_F(RewriteConfTest, LocationSearchOrder) {
  const HttpSrvConf* srv = server(
      "server { listen 127.0.0.1:1;\n"
      " location / { }\n"
      " location = /exact.php { }\n"
      " location ^~ /static/ { }\n"
      " location /app/ { location ~ \\.js$ { } }\n"
      " location ~ \\.php$ { }\n"
      " location ~* \\.PNG$ { }\n"
      " location ~ ^/app/ { }\n"
      " location @named { }\n"
      "}");
  ASSERT_NE(srv, nullptr);
  EXPECT_EQ(find_location(*srv, "/x").name, "/");
  EXPECT_EQ(find_location(*srv, "/exact.php").name, "/exact.php");  // = wins over a regex
  EXPECT_EQ(find_location(*srv, "/a.php").name, "\\.php$");
  EXPECT_EQ(find_location(*srv, "/static/a.php").name, "/static/");  // ^~ stops the regexes
  EXPECT_EQ(find_location(*srv, "/a.png").name, "\\.PNG$");          // ~* ignores case
  EXPECT_EQ(find_location(*srv, "/app/a.js").name, "\\.js$");        // nested regex first
  EXPECT_EQ(find_location(*srv, "/app/a.css").name, "^/app/");       // then the level's, in order
  EXPECT_TRUE(find_location(*srv, "/a.php").regex != nullptr);
  ASSERT_EQ(srv->named_locations.size(), 1u);
  EXPECT_EQ(find_named_location(*srv, "@named"), srv->named_locations[0]);
  EXPECT_EQ(find_named_location(*srv, "@other"), nullptr);
  // A named location is never found by a path.
  EXPECT_EQ(&find_location(*srv, "@named"), srv->loc);
}

TEST_F(RewriteConfTest, RegexServerNames) {
  const HttpSrvConf* srv = server(
      "server { listen 127.0.0.1:1; server_name a.example ~^(?<sub>[a-z]+)\\.example$; }");
  ASSERT_NE(srv, nullptr);
  ASSERT_EQ(srv->server_regexes.size(), 1u);
  ASSERT_EQ(srv->server_regexes[0]->names.size(), 1u);
}

TEST_F(RewriteConfTest, ProgramsInOrderAndNotInherited) {
  const HttpSrvConf* srv = server(
      "server { listen 127.0.0.1:1; rewrite ^/a /b last;\n"
      " location /l { set $x 1; if ($x) { return 200; } rewrite ^ /y break; break;\n"
      "   location /l/n { } }\n"
      "}");
  ASSERT_NE(srv, nullptr);
  ASSERT_EQ(rewrite_of(*srv->loc).ops.size(), 1u);
  EXPECT_EQ(rewrite_of(*srv->loc).ops[0].flag, RewriteFlag::kLast);
  const HttpLocConf& l = find_location(*srv, "/l");
  const auto& ops = rewrite_of(l).ops;
  ASSERT_EQ(ops.size(), 4u);
  EXPECT_EQ(ops[0].kind, RewriteOp::kSet);
  EXPECT_EQ(ops[1].kind, RewriteOp::kIf);
  EXPECT_EQ(ops[2].kind, RewriteOp::kRewrite);
  EXPECT_EQ(ops[2].flag, RewriteFlag::kBreak);
  EXPECT_EQ(ops[3].kind, RewriteOp::kBreak);
  ASSERT_EQ(l.if_blocks.size(), 1u);
  EXPECT_EQ(l.if_blocks[0].scope, ops[1].if_scope);
  EXPECT_EQ(rewrite_of(*l.if_blocks[0].loc).ops.size(), 1u);  // the block's return
  EXPECT_EQ(l.if_blocks[0].loc->name, "/l");
  EXPECT_TRUE(rewrite_of(find_location(*srv, "/l/n")).ops.empty());
}

TEST_F(RewriteConfTest, AliasReplacesTheLocationsPart) {
  const HttpSrvConf* srv = server(
      "server { listen 127.0.0.1:1;\n"
      " location /i/ { alias /data/img/; location /i/x/ { } }\n"
      " location ~ ^/p/(.+)$ { alias /data/$1; }\n"
      " location /v/ { root /srv/$host; }\n"
      "}");
  ASSERT_NE(srv, nullptr);
  const HttpLocConf& i = find_location(*srv, "/i/a");
  EXPECT_TRUE(i.alias);
  EXPECT_EQ(i.alias_len, 3u);
  EXPECT_EQ(i.root_path, "/data/img/");
  const HttpLocConf& nested = find_location(*srv, "/i/x/a");
  EXPECT_TRUE(nested.alias);  // inherited, with the outer location's part
  EXPECT_EQ(nested.alias_len, 3u);
  const HttpLocConf& p = find_location(*srv, "/p/a");
  EXPECT_TRUE(p.alias);
  EXPECT_EQ(p.alias_len, std::string::npos);
  ASSERT_NE(p.root_vars, nullptr);
  EXPECT_NE(find_location(*srv, "/v/").root_vars, nullptr);
  EXPECT_FALSE(find_location(*srv, "/v/").alias);
}

TEST_F(RewriteConfTest, Errors) {
  auto has = [&](const std::string& http, const std::string& what) {
    const std::string e = error(http);
    EXPECT_NE(e.find(what), std::string::npos) << "got: " << e;
    EXPECT_NE(e.find("vigil.conf:"), std::string::npos) << "no file:line in: " << e;
  };
  has("server { rewrite ^(a /b; }", "pcre2_compile() failed");
  has("server { rewrite ^a /b sometimes; }", "invalid parameter \"sometimes\"");
  has("server { rewrite ^a; }", "invalid number of arguments in \"rewrite\"");
  has("server { set x 1; }", "invalid variable name \"x\"");
  has("server { set $uri 1; }", "the duplicate \"uri\" variable");
  has("server { if ($a) { } }", "unknown \"a\" variable");
  has("server { set $a 1; if ($a ~ ( ) { } }", "pcre2_compile() failed");
  has("server { set $a 1; if ($a <> b) { } }", "unexpected \"<>\" in condition");
  has("server { set $a 1; if (a) { } }", "invalid condition \"a\"");
  has("server { set $a 1; if ($a) { if ($a) { } } }", "\"if\" directive is not allowed here");
  has("server { set $a 1; location / { if ($a) { location /x { } } } }",
      "\"location\" directive is not allowed here");
  has("server { location / { location @n { } } }", "can be on the server level only");
  has("server { location /a { root /r; alias /b/; } }",
      "\"alias\" directive is duplicate, \"root\" directive was specified earlier");
  has("server { location /a { alias /b/; root /r; } }",
      "\"root\" directive is duplicate, \"alias\" directive was specified earlier");
  has("server { alias /b/; }", "\"alias\" directive is not allowed here");
  has("server { location @n { alias /b/; } }", "cannot be used inside the named location");
  has("server { server_name ~^(a; }", "pcre2_compile() failed");
  has("rewrite ^ /x;", "\"rewrite\" directive is not allowed here");
}

}  // namespace
}  // namespace vigil::http
