// nginx's hash sizing directives (hash_size_conf.cc): accepted where nginx
// accepts them, with nginx's value checks, so that nginx configurations such
// as Debian's stock nginx.conf load; they size nothing in Vigil.
#include <gtest/gtest.h>

#include <string>

#include "unit/http/http_conf_fixture.h"

namespace vigil::http {
namespace {

using HashSizeConfTest = testing::HttpConfTest;

constexpr const char* kServer = "server { listen 127.0.0.1:1; }\n";

TEST_F(HashSizeConfTest, AcceptedInTheHttpBlock) {
  EXPECT_NE(servers(std::string("types_hash_max_size 2048;\n"
                                "types_hash_bucket_size 64;\n"
                                "server_names_hash_max_size 1024;\n"
                                "server_names_hash_bucket_size 128;\n"
                                "variables_hash_max_size 2048;\n"
                                "variables_hash_bucket_size 1k;\n"
                                "map_hash_max_size 16384;\n"
                                "map_hash_bucket_size 128;\n"
                                "proxy_headers_hash_max_size 1024;\n"
                                "proxy_headers_hash_bucket_size 128;\n") +
                    "server { listen 127.0.0.1:1; proxy_headers_hash_max_size 512;\n"
                    "  location / { proxy_headers_hash_bucket_size 64; } }\n"),
            nullptr);
}

TEST_F(HashSizeConfTest, ValuesAreCheckedAsNginxDoes) {
  const std::string at = " in conf/vigil.conf:3";
  EXPECT_EQ(error(std::string("types_hash_max_size big;\n") + kServer),
            "invalid value \"big\" in \"types_hash_max_size\" directive" + at);
  EXPECT_EQ(error(std::string("server_names_hash_bucket_size 0;\n") + kServer),
            "invalid value \"0\" in \"server_names_hash_bucket_size\" directive" + at);
  EXPECT_EQ(error(std::string("types_hash_max_size 1 2;\n") + kServer),
            "invalid number of arguments in \"types_hash_max_size\" directive" + at);
  EXPECT_EQ(error(std::string("map_hash_bucket_size 0;\n") + kServer),
            "invalid value \"0\" in \"map_hash_bucket_size\" directive" + at);
  EXPECT_EQ(error(std::string("map_hash_max_size -1;\n") + kServer),
            "invalid value \"-1\" in \"map_hash_max_size\" directive" + at);
  EXPECT_NE(error(std::string("types_hash_max_size 1;\ntypes_hash_max_size 2;\n") + kServer)
                .find("is duplicate"),
            std::string::npos);
}

TEST_F(HashSizeConfTest, OnlyWhereNginxAllowsThem) {
  EXPECT_NE(error("server { listen 127.0.0.1:1; types_hash_max_size 2048; }")
                .find("\"types_hash_max_size\" directive is not allowed here"),
            std::string::npos);
  EXPECT_NE(error("server { listen 127.0.0.1:1; location / { map_hash_max_size 2048; } }")
                .find("\"map_hash_max_size\" directive is not allowed here"),
            std::string::npos);
}

}  // namespace
}  // namespace vigil::http
