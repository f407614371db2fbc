// limit_except and the blocks that stand for their location (`if`,
// `limit_except`) through the real vigil binary, as nginx answers: a method
// the block does not name is answered with the block's conf (its allow/deny,
// its proxy_pass), GET names HEAD too; both blocks proxy as their location
// does, with the location's URI replaced; an `if` without a handler keeps
// the one of the conf before it.
#include <gtest/gtest.h>

#include <string>

#include "integration/http_harness.h"
#include "integration/proxy_backend.h"

namespace vigil::test {
namespace {

class LimitExcept : public ::testing::Test {
 protected:
  void SetUp() override { server_.write("html/lmt/a.txt", "a\n"); }
  bool start(const std::string& server_body) {
    port_ = free_port();
    return server_.start("access_log off;\nserver { listen 127.0.0.1:" + std::to_string(port_) +
                         "; root html;\n" + server_body + "}\n");
  }
  Response request(const std::string& method, const std::string& target) {
    Client c(port_);
    if (!c.ok()) return {};
    const std::string body = method == "POST" || method == "PUT" ? "x" : "";
    std::string raw = method + " " + target + " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n";
    if (!body.empty()) raw += "Content-Length: 1\r\n";
    if (!c.send(raw + "\r\n" + body)) return {};
    return c.read_response(method == "HEAD");
  }
  // `vigil -t` on an http block: {exit code, output}.
  std::pair<int, std::string> check(const std::string& http) {
    server_.write("conf/t.conf", "events {}\nhttp {\n" + http + "\n}\n");
    return run({kVigil, "-p", server_.dir(), "-c", "conf/t.conf", "-t"});
  }

  VigilServer server_;
  int port_ = 0;
};

TEST_F(LimitExcept, MethodsNotNamedGetTheBlocksRules) {
  ASSERT_TRUE(start("location /lmt/ { limit_except GET { deny all; } }\n"
                    "location /post/ { limit_except POST PUT { allow 10.0.0.0/8; deny all; } "
                    "return 200 \"ok\\n\"; }\n"))
      << server_.output();
  EXPECT_EQ(request("GET", "/lmt/a.txt").status, 200);
  EXPECT_EQ(request("HEAD", "/lmt/a.txt").status, 200) << "GET names HEAD too";
  EXPECT_EQ(request("POST", "/lmt/a.txt").status, 403);
  EXPECT_EQ(request("DELETE", "/lmt/a.txt").status, 403);
  EXPECT_TRUE(server_.wait_output("access forbidden by rule")) << server_.output();
  EXPECT_EQ(request("GET", "/post/").status, 403);
  EXPECT_EQ(request("HEAD", "/post/").status, 403) << "POST does not name HEAD";
}

TEST_F(LimitExcept, BlocksProxyAsTheirLocation) {
  Backend b([](BackendConn& c, const BackendRequest& r) {
    return c.send(backend_response(200, "uri:" + r.target + "\n"));
  });
  const std::string up = "http://" + b.address();
  ASSERT_TRUE(start("location /inh { proxy_pass " + up +
                    "/replacement; limit_except POST { }\n"
                    "  location /inh/inner { limit_except POST { } } }\n"
                    "location /own { proxy_pass " + up + "/replacement;\n"
                    "  limit_except POST { proxy_pass " + up + "; } }\n"
                    "location /if { proxy_pass " + up + "/replacement;\n"
                    "  if ($arg_if) { } }\n"
                    "location /crash { set $true 1;\n"
                    "  if ($true) { proxy_pass " + up + "; }\n"
                    "  if ($true) { } }\n"))
      << server_.output();
  Response r = request("GET", "/inh");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "uri:/replacement\n");
  EXPECT_EQ(request("POST", "/inh").body, "uri:/replacement\n");
  EXPECT_EQ(request("GET", "/inh/inner").status, 404) << "a nested location proxies nothing";
  EXPECT_EQ(request("GET", "/own").body, "uri:/own\n") << "the block's own proxy_pass";
  EXPECT_EQ(request("POST", "/own").body, "uri:/replacement\n");
  EXPECT_EQ(request("GET", "/if?if=1").body, "uri:/replacement?if=1\n");
  EXPECT_EQ(request("GET", "/if").body, "uri:/replacement\n");
  // The second `if` has no handler: the first one's proxy_pass runs with a
  // conf that has no backend, which is an error (nginx: 500).
  EXPECT_EQ(request("GET", "/crash").status, 500);
}

TEST_F(LimitExcept, ConfigurationErrors) {
  struct Case {
    std::string conf;
    std::string error;
  };
  const Case cases[] = {
      {"server { location / { limit_except BREW { } } }", "invalid method \"BREW\""},
      {"server { location / { limit_except GET { location /x { } } } }",
       "\"location\" directive is not allowed here"},
      {"server { location / { limit_except GET { if ($uri) { } } } }",
       "\"if\" directive is not allowed here"},
      {"server { location / { limit_except GET { limit_except POST { } } } }",
       "\"limit_except\" directive is not allowed here"},
      {"server { location / { limit_except GET { } limit_except POST { } } }",
       "\"limit_except\" directive is duplicate"},
      {"server { limit_except GET { } }", "\"limit_except\" directive is not allowed here"},
  };
  for (const auto& c : cases) {
    auto [rc, out] = check(c.conf);
    EXPECT_NE(rc, 0) << c.conf;
    EXPECT_NE(out.find(c.error), std::string::npos) << c.conf << "\n" << out;
    EXPECT_NE(out.find("t.conf:"), std::string::npos) << c.conf << "\n" << out;
  }
  auto [rc, out] = check(
      "server { location / { limit_except GET POST PUT DELETE OPTIONS PATCH HEAD MKCOL COPY MOVE "
      "PROPFIND PROPPATCH LOCK UNLOCK { allow 127.0.0.1; deny all; auth_basic off; } } }");
  EXPECT_EQ(rc, 0) << out;
}

}  // namespace
}  // namespace vigil::test
