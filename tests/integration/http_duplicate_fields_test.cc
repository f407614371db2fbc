// Request fields that must appear once (the preconditions, the
// credentials, Expect, Content-Range): a second line is a 400, as nginx
// answers; list fields are joined for $http_NAME, Cookie with "; ".
#include <gtest/gtest.h>

#include <string>

#include "integration/http_harness.h"

namespace vigil::test {
namespace {

class DuplicateFields : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(
        server_.start("server { listen 127.0.0.1:0; access_log off;\n"
                      "  location / { add_header X-Cookie $http_cookie;\n"
                      "    add_header X-Forwarded-For $http_x_forwarded_for;\n"
                      "    return 204; }\n}\n"))
        << server_.output();
  }
  Response get_with(const std::string& fields) {
    return get(server_.port(), simple_get("/", "localhost", fields));
  }
  VigilServer server_;
};

TEST_F(DuplicateFields, ASecondLineOfASingleValuedFieldIsRefused) {
  for (const char* name : {"If-Modified-Since", "If-Unmodified-Since", "If-Match", "If-None-Match",
                           "If-Range", "Expect", "Authorization", "Content-Range"}) {
    const std::string one = std::string(name) + ": foo\r\n";
    EXPECT_EQ(get_with(one).status, 204) << name;
    Response two = get_with(one + name + ": bar\r\n");
    EXPECT_EQ(two.status, 400) << name;
    EXPECT_TRUE(server_.wait_output("client sent duplicate header line: \"" + std::string(name) +
                                    ": bar\", previous value: \"" + name + ": foo\""))
        << server_.output();
  }
  // Case does not make it another field.
  EXPECT_EQ(get_with("if-match: \"a\"\r\nIF-MATCH: \"b\"\r\n").status, 400);
}

TEST_F(DuplicateFields, ListFieldsAreJoined) {
  Response r = get_with(
      "Cookie: a=1\r\nX-Forwarded-For: 10.0.0.1\r\nCookie: b=2; c=3\r\n"
      "X-Forwarded-For: 10.0.0.2\r\n");
  EXPECT_EQ(r.status, 204);
  EXPECT_EQ(r.header("x-cookie"), "a=1; b=2; c=3");
  EXPECT_EQ(r.header("x-forwarded-for"), "10.0.0.1, 10.0.0.2");
}

}  // namespace
}  // namespace vigil::test
