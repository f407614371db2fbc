// proxy_intercept_errors with error_page: the backend's error answer is
// replaced by the error page, and a 401 keeps the backend's challenges
// (every WWW-Authenticate field) so the client can still authenticate.
#include <gtest/gtest.h>

#include <string>

#include "http_harness.h"
#include "proxy_backend.h"

namespace vigil::test {
namespace {

class ProxyIntercept : public ::testing::Test {
 protected:
  void SetUp() override {
    backend_.set_handler([](BackendConn& c, const BackendRequest& r) {
      if (r.target == "/auth") {
        return c.send(backend_response(401, "backend", "WWW-Authenticate: foo\r\n"));
      }
      if (r.target == "/auth-multi") {
        return c.send(backend_response(
            401, "backend", "WWW-Authenticate: foo\r\nX-Other: 1\r\nWWW-Authenticate: bar\r\n"));
      }
      if (r.target == "/auth-none") return c.send(backend_response(401, "backend"));
      if (r.target == "/500") {
        return c.send(backend_response(500, "backend", "WWW-Authenticate: foo\r\n"));
      }
      return c.send(backend_response(404, "SEE-THIS"));
    });
    port_ = free_port();
    ASSERT_TRUE(server_.start("server { listen 127.0.0.1:" + std::to_string(port_) +
                              ";\nlocation / { proxy_pass http://" + backend_.address() +
                              "; proxy_intercept_errors on; error_page 401 500 /intercepted; }\n"
                              "location = /intercepted { return 200 \"intercepted\\n\"; }\n}"))
        << server_.output();
  }

  // The WWW-Authenticate lines of a raw head, in order.
  static std::string challenges(const std::string& head) {
    std::string out;
    for_each_field(head, [&](const std::string& name, const std::string& value) {
      if (name == "www-authenticate") out += value + ";";
    });
    return out;
  }

  VigilServer server_;
  Backend backend_;
  int port_ = 0;
};

TEST_F(ProxyIntercept, NotInterceptedWithoutErrorPage) {
  Response r = get(port_, simple_get("/"));
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.body, "SEE-THIS");
}

TEST_F(ProxyIntercept, Intercepted401KeepsTheChallenge) {
  Response r = get(port_, simple_get("/auth"));
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(r.body, "intercepted\n");
  EXPECT_EQ(challenges(r.head), "foo;");
}

TEST_F(ProxyIntercept, Intercepted401KeepsEveryChallenge) {
  Response r = get(port_, simple_get("/auth-multi"));
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(r.body, "intercepted\n");
  EXPECT_EQ(challenges(r.head), "foo;bar;");
  EXPECT_FALSE(r.has("x-other"));
}

TEST_F(ProxyIntercept, Intercepted401WithoutAChallenge) {
  Response r = get(port_, simple_get("/auth-none"));
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(r.body, "intercepted\n");
  EXPECT_EQ(challenges(r.head), "");
}

// Only a 401 carries the challenge over (nginx's rule).
TEST_F(ProxyIntercept, Intercepted500DropsTheBackendsFields) {
  Response r = get(port_, simple_get("/500"));
  EXPECT_EQ(r.status, 500);
  EXPECT_EQ(r.body, "intercepted\n");
  EXPECT_EQ(challenges(r.head), "");
}

}  // namespace
}  // namespace vigil::test
