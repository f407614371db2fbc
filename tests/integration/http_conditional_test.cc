// Conditional requests (RFC 9110 §13) and single byte ranges (§14).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <utime.h>

#include <ctime>
#include <string>

#include "http_harness.h"

namespace vigil {
namespace {

using test::Response;
using test::VigilServer;

std::string http_date(std::time_t t) {
  char buf[64];
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  std::strftime(buf, sizeof buf, "%a, %d %b %Y %H:%M:%S GMT", &tm);
  return buf;
}

class HttpConditional : public ::testing::Test {
 protected:
  void SetUp() override {
    server_.write("html/f.txt", "0123456789abcdef");  // 16 bytes
    mtime_ = 1700000000;
    utimbuf t{mtime_, mtime_};
    ASSERT_EQ(::utime(server_.path("html/f.txt").c_str(), &t), 0);
    char etag[64];
    std::snprintf(etag, sizeof etag, "\"%llx-%x\"", static_cast<unsigned long long>(mtime_), 16);
    etag_ = etag;
    ASSERT_TRUE(server_.start(extra() + "server {\n listen 127.0.0.1:" + std::to_string(port_) +
                              ";\n root html;\n}\n"))
        << server_.output();
    port_ = server_.port();
  }
  virtual std::string extra() { return ""; }
  Response req(const std::string& headers, const std::string& method = "GET") {
    return test::get(port_, method + " /f.txt HTTP/1.1\r\nHost: x\r\n" + headers + "\r\n",
                     method == "HEAD");
  }

  VigilServer server_;
  int port_ = 0;
  std::time_t mtime_ = 0;
  std::string etag_;
};

TEST_F(HttpConditional, ValidatorsAreSent) {
  Response r = req("");
  EXPECT_EQ(r.header("etag"), etag_);
  EXPECT_EQ(r.header("last-modified"), http_date(mtime_));
}

TEST_F(HttpConditional, IfNoneMatchGives304) {
  Response r = req("If-None-Match: " + etag_ + "\r\n");
  EXPECT_EQ(r.status, 304);
  EXPECT_EQ(r.body, "");
  EXPECT_EQ(r.header("etag"), etag_);
  EXPECT_FALSE(r.has("content-type"));
  // Weak comparison, lists and "*".
  EXPECT_EQ(req("If-None-Match: \"x\", W/" + etag_ + "\r\n").status, 304);
  EXPECT_EQ(req("If-None-Match: *\r\n").status, 304);
  EXPECT_EQ(req("If-None-Match: \"other\"\r\n").status, 200);
  // If-None-Match wins over If-Modified-Since (RFC 9110 §13.2.2).
  EXPECT_EQ(
      req("If-None-Match: \"other\"\r\nIf-Modified-Since: " + http_date(mtime_) + "\r\n").status,
      200);
}

TEST_F(HttpConditional, IfModifiedSinceIsExactAsNginx) {
  EXPECT_EQ(req("If-Modified-Since: " + http_date(mtime_) + "\r\n").status, 304);
  EXPECT_EQ(req("If-Modified-Since: " + http_date(mtime_ + 10) + "\r\n").status, 200);
  EXPECT_EQ(req("If-Modified-Since: " + http_date(mtime_ - 10) + "\r\n").status, 200);
  EXPECT_EQ(req("If-Modified-Since: yesterday\r\n").status, 200);  // invalid: ignored
  // The connection stays usable after a 304 (no body was promised).
  test::Client c(port_);
  ASSERT_TRUE(c.send("GET /f.txt HTTP/1.1\r\nHost: x\r\nIf-Modified-Since: " + http_date(mtime_) +
                     "\r\n\r\n" + test::simple_get("/f.txt")));
  EXPECT_EQ(c.read_response().status, 304);
  EXPECT_EQ(c.read_response().body, "0123456789abcdef");
}

TEST_F(HttpConditional, FailedPreconditionsAre412) {
  EXPECT_EQ(req("If-Match: \"nope\"\r\n").status, 412);
  EXPECT_EQ(req("If-Match: " + etag_ + "\r\n").status, 200);
  EXPECT_EQ(req("If-Match: W/" + etag_ + "\r\n").status, 412);  // strong comparison
  EXPECT_EQ(req("If-Unmodified-Since: " + http_date(mtime_ - 100) + "\r\n").status, 412);
  EXPECT_EQ(req("If-Unmodified-Since: " + http_date(mtime_) + "\r\n").status, 200);
}

TEST_F(HttpConditional, SingleRangeIs206) {
  Response r = req("Range: bytes=2-5\r\n");
  EXPECT_EQ(r.status, 206);
  EXPECT_EQ(r.body, "2345");
  EXPECT_EQ(r.header("content-range"), "bytes 2-5/16");
  EXPECT_EQ(r.header("content-length"), "4");
  // As nginx: the part says nothing more about ranges (nginx_diff_test).
  EXPECT_FALSE(r.has("accept-ranges"));
  r = req("Range: bytes=10-\r\n");
  EXPECT_EQ(r.body, "abcdef");
  r = req("Range: bytes=-3\r\n");
  EXPECT_EQ(r.body, "def");
  EXPECT_EQ(r.header("content-range"), "bytes 13-15/16");
  r = req("Range: bytes=5-1000\r\n");
  EXPECT_EQ(r.body, "56789abcdef");
  // Several ranges are a multipart answer (http_multipart_range_test.cc),
  // another unit is ignored: the whole file.
  EXPECT_EQ(req("Range: bytes=0-1,4-5\r\n").status, 206);
  EXPECT_EQ(req("Range: lines=1-2\r\n").status, 200);
  // HEAD answers the whole file.
  EXPECT_EQ(req("Range: bytes=2-5\r\n", "HEAD").status, 200);
}

TEST_F(HttpConditional, UnsatisfiableRangeIs416) {
  Response r = req("Range: bytes=16-\r\n");
  EXPECT_EQ(r.status, 416);
  EXPECT_EQ(r.header("content-range"), "bytes */16");
  EXPECT_EQ(r.header("connection"), "keep-alive");
  EXPECT_NE(r.body.find("416"), std::string::npos);
}

TEST_F(HttpConditional, IfRangeDecidesWhetherTheRangeApplies) {
  EXPECT_EQ(req("Range: bytes=0-0\r\nIf-Range: " + etag_ + "\r\n").status, 206);
  EXPECT_EQ(req("Range: bytes=0-0\r\nIf-Range: \"old\"\r\n").status, 200);
  EXPECT_EQ(req("Range: bytes=0-0\r\nIf-Range: " + http_date(mtime_) + "\r\n").status, 206);
  EXPECT_EQ(req("Range: bytes=0-0\r\nIf-Range: " + http_date(mtime_ - 1) + "\r\n").status, 200);
}

class HttpConditionalBefore : public HttpConditional {
  std::string extra() override { return "if_modified_since before;\n"; }
};

TEST_F(HttpConditionalBefore, LaterDatesAlsoGive304) {
  EXPECT_EQ(req("If-Modified-Since: " + http_date(mtime_ + 10) + "\r\n").status, 304);
  EXPECT_EQ(req("If-Modified-Since: " + http_date(mtime_ - 10) + "\r\n").status, 200);
}

}  // namespace
}  // namespace vigil
