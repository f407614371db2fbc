#pragma once
// A configuration-test fixture for the http block: loads "events {} http {
// <text> }" from a temporary directory and hands out its servers, or the
// error a bad text gives.

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "http/core/servers.h"
#include "unit/core/conf/conf_test_util.h"

namespace vigil::testing {

class HttpConfTest : public ConfDirTest {
 protected:
  const http::HttpServers* servers(const std::string& http) {
    conf_ = nullptr;
    auto r = load("events {}\nhttp {\n" + http + "\n}\n");
    EXPECT_TRUE(r) << r.status().message();
    if (!r) return nullptr;
    conf_ = std::move(r.value());
    return http::http_servers(*conf_);
  }
  // The first server block of `http`, or nullptr.
  const http::HttpSrvConf* server(const std::string& http) {
    const http::HttpServers* s = servers(http);
    return s != nullptr && !s->servers.empty() ? s->servers[0] : nullptr;
  }
  std::string error(const std::string& http) {
    return error_of("events {}\nhttp {\n" + http + "\n}\n");
  }

  std::unique_ptr<Configuration> conf_;
};

}  // namespace vigil::testing
