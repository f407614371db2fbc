// expires at load time: the forms it takes, what a level inherits, and the
// errors nginx reports (with file:line).
#include <gtest/gtest.h>

#include <string>

#include "http/core/conf.h"
#include "http/core/module.h"
#include "http/core/servers.h"
#include "http/filters/expires.h"
#include "unit/http/http_conf_fixture.h"

namespace vigil::http {
namespace {

using ExpiresConfTest = testing::HttpConfTest;

const ExpiresConf& expires_of(const HttpLocConf& loc) {
  return loc_conf<ExpiresConf>(loc, expires_module());
}

TEST_F(ExpiresConfTest, FormsAndInheritance) {
  const HttpSrvConf* srv = server(
      "expires 1h;\n"
      "server { listen 127.0.0.1:1;\n"
      " location /a { }\n"
      " location /b { expires epoch; }\n"
      " location /c { expires max; }\n"
      " location /d { expires off; location /d/e { } }\n"
      " location /f { expires -30s; }\n"
      " location /g { expires @1h30m; }\n"
      " location /h { expires modified +1d; }\n"
      " location /i { expires $arg_e; }\n"
      "}");
  ASSERT_NE(srv, nullptr);
  EXPECT_EQ(expires_of(*srv->loc).expires, Expires::kAccess);
  EXPECT_EQ(expires_of(*srv->loc).time, 3600);
  EXPECT_EQ(expires_of(find_location(*srv, "/a")).time, 3600);
  EXPECT_EQ(expires_of(find_location(*srv, "/b")).expires, Expires::kEpoch);
  EXPECT_EQ(expires_of(find_location(*srv, "/c")).expires, Expires::kMax);
  EXPECT_EQ(expires_of(find_location(*srv, "/d")).expires, Expires::kOff);
  EXPECT_EQ(expires_of(find_location(*srv, "/d/e")).expires, Expires::kOff);
  EXPECT_EQ(expires_of(find_location(*srv, "/f")).time, -30);
  EXPECT_EQ(expires_of(find_location(*srv, "/g")).expires, Expires::kDaily);
  EXPECT_EQ(expires_of(find_location(*srv, "/g")).time, 5400);
  EXPECT_EQ(expires_of(find_location(*srv, "/h")).expires, Expires::kModified);
  EXPECT_EQ(expires_of(find_location(*srv, "/h")).time, 86400);
  EXPECT_TRUE(expires_of(find_location(*srv, "/i")).has_value);
}

TEST_F(ExpiresConfTest, Errors) {
  const std::pair<const char*, const char*> cases[] = {
      {"expires @25h;", "\"expires\" directive daily time value must be less than 24 hours"},
      {"expires modified @1h;", "daily time cannot be used with \"modified\" parameter"},
      {"expires soon;", "\"expires\" directive invalid value"},
      {"expires later 1h;", "\"expires\" directive invalid value"},
      {"expires 1h; expires 2h;", "is duplicate"},
      {"expires 1h 2h 3h;", "invalid number of arguments"},
  };
  for (const auto& [text, what] : cases) {
    const std::string e = error(std::string("server { listen 127.0.0.1:1;\n") + text + " }");
    EXPECT_NE(e.find(what), std::string::npos) << text << " got: " << e;
    EXPECT_NE(e.find("vigil.conf:4"), std::string::npos) << text << " got: " << e;
  }
}

}  // namespace
}  // namespace vigil::http
