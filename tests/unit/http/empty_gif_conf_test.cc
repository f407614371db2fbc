// empty_gif's directive: a location's content handler, refused elsewhere
// with the file and line.
#include <gtest/gtest.h>

#include <string>

#include "http/core/conf.h"
#include "http/core/servers.h"
#include "unit/http/http_conf_fixture.h"

namespace vigil::http {
namespace {

using EmptyGifConf = testing::HttpConfTest;

TEST_F(EmptyGifConf, SetsTheLocationsContentHandlerOnly) {
  const HttpSrvConf* srv = server(
      "server { listen 127.0.0.1:1;\n"
      "  location = /p.gif { empty_gif; }\n"
      "  location /nested/ { location /nested/p.gif { empty_gif; } }\n"
      "}\n");
  ASSERT_NE(srv, nullptr);
  const ContentHandler* h = find_location(*srv, "/p.gif").content;
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(std::string(h->name), "empty_gif");
  EXPECT_FALSE(h->any_method);
  EXPECT_EQ(find_location(*srv, "/nested/p.gif").content, h);
  EXPECT_EQ(find_location(*srv, "/nested/x").content, nullptr) << "not inherited by the parent";
  EXPECT_EQ(srv->loc->content, nullptr);
}

TEST_F(EmptyGifConf, IsRefusedOutsideALocation) {
  const std::string err = error("server { listen 127.0.0.1:1; empty_gif; }");
  EXPECT_NE(err.find("\"empty_gif\" directive is not allowed here"), std::string::npos) << err;
  EXPECT_NE(err.find(":3"), std::string::npos) << err;
  EXPECT_NE(error("server { location / { empty_gif x; } }").find("invalid number of arguments"),
            std::string::npos);
}

}  // namespace
}  // namespace vigil::http
