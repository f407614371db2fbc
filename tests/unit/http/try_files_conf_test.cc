// The try_files directive (try_files.cc): what it compiles to, that nested
// locations do not inherit it (nginx neither), and the errors of a bad one,
// each with the file and line.
#include <gtest/gtest.h>

#include <string>

#include "http/core/conf.h"
#include "http/core/servers.h"
#include "http/static/try_files.h"
#include "unit/http/http_conf_fixture.h"

namespace vigil::http {
namespace {

using TryFilesConfTest = testing::HttpConfTest;

TEST_F(TryFilesConfTest, FilesDirectoriesAndTheFallback) {
  const HttpSrvConf* srv = server(
      "server { listen 127.0.0.1:1;\n"
      "  try_files $uri /index.html;\n"
      "  location /a/ { try_files $uri $uri/ /dir/ /x/?q=$args; }\n"
      "  location /b/ { try_files $uri =404; location /b/c/ { } }\n"
      "}\n");
  ASSERT_NE(srv, nullptr);
  ASSERT_NE(location_try_files(*srv->loc), nullptr);
  EXPECT_EQ(location_try_files(*srv->loc)->files.size(), 1u);
  EXPECT_EQ(location_try_files(*srv->loc)->fallback.source(), "/index.html");

  const HttpLocConf& a = find_location(*srv, "/a/x");
  ASSERT_NE(location_try_files(a), nullptr);
  const TryFiles& tf = *location_try_files(a);
  ASSERT_EQ(tf.files.size(), 3u);
  EXPECT_EQ(tf.files[0].name.source(), "$uri");
  EXPECT_FALSE(tf.files[0].test_dir);
  EXPECT_EQ(tf.files[1].name.source(), "$uri") << "the slash only marks a directory";
  EXPECT_TRUE(tf.files[1].test_dir);
  EXPECT_EQ(tf.files[2].name.source(), "/dir");
  EXPECT_TRUE(tf.files[2].test_dir);
  EXPECT_EQ(tf.fallback.source(), "/x/?q=$args") << "the last argument is never a directory";
  EXPECT_EQ(tf.code, 0);

  const HttpLocConf& b = find_location(*srv, "/b/x");
  ASSERT_NE(location_try_files(b), nullptr);
  EXPECT_EQ(location_try_files(b)->code, 404);
  EXPECT_TRUE(location_try_files(b)->fallback.empty());
  EXPECT_EQ(location_try_files(find_location(*srv, "/b/c/x")), nullptr) << "not inherited";
  EXPECT_EQ(location_try_files(find_location(*srv, "/other")), location_try_files(*srv->loc))
      << "the server's own, where no location matched";
}

TEST_F(TryFilesConfTest, ErrorsNameTheFileAndLine) {
  auto expect = [&](const std::string& http, const std::string& what) {
    const std::string e = error(http);
    EXPECT_NE(e.find(what), std::string::npos) << e;
    EXPECT_NE(e.find(".conf:"), std::string::npos) << e;
  };
  expect("server { location / { location @app { } } }", "named location \"@app\" can be on the server level only");
  expect("server { location / { try_files $uri =abc; } }", "invalid code \"=abc\"");
  expect("server { location / { try_files $uri =200; } }", "invalid code \"=200\"");
  expect("server { location / { try_files $uri =1000; } }", "invalid code \"=1000\"");
  expect("server { location / { try_files $uri fallback; } }", "must start with \"/\"");
  expect("server { location / { try_files $nosuch /x; } }", "nosuch");
  expect("server { location / { try_files $uri; } }", "invalid number of arguments");
  expect("try_files $uri /x;", "\"try_files\" directive is not allowed here");
  expect("server { location / { try_files $uri /x; try_files $uri /y; } }", "is duplicate");
}

}  // namespace
}  // namespace vigil::http
