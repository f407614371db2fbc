// Tests for src/http/parse.cc, refused input: every error with the status
// the server answers (400, 414, 431, 505), the same result however the input
// is split, and the line limits.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "codec/parse.h"
#include "parse_driver.h"

namespace vigil::http {
namespace {

using test::parse_whole;

struct ErrorCase {
  std::string input;
  ParseStatus status;
};

std::vector<ErrorCase> error_cases() {
  const auto bad = ParseStatus::kBadRequest;
  const auto v505 = ParseStatus::kVersionNotSupported;
  return {
      // request line syntax
      {"GET  / HTTP/1.1\r\n\r\n", bad},  // one SP only
      {"GET / HTTP/1.1 \r\n\r\n", bad},
      {"GET /  HTTP/1.1\r\n\r\n", bad},
      {"GET\t/ HTTP/1.1\r\n\r\n", bad},
      // HTTP/0.9's simple request is GET only (RFC 1945 §4.1), its line
      // ends after the target and any spaces
      {"HEAD /\r\n", bad},
      {"POST /x?y\n", bad},
      {"OPTIONS *\r\n", bad},
      {"GET / x\r\n", bad},
      {"GET /  x\r\n", bad},
      {"GET /\rx", bad},
      {"GET\r\n", bad},
      {" GET / HTTP/1.1\r\n\r\n", bad},
      {"\rGET / HTTP/1.1\r\n\r\n", bad},         // bare CR before the request line
      {"GET / HTTP/1.1\rHost: a\r\n\r\n", bad},  // bare CR ending the line
      {"G(T / HTTP/1.1\r\n\r\n", bad},
      {"GET{} / HTTP/1.1\r\n\r\n", bad},
      {"GET x HTTP/1.1\r\n\r\n", bad},  // "x" is no target form
      {"GET ?a HTTP/1.1\r\n\r\n", bad},
      {"M-SEARCH * HTTP/1.1\r\n\r\n", bad},
      // invalid octets in the target
      {"GET /a\x01"
       "b HTTP/1.1\r\n\r\n",
       bad},
      {"GET /a\x7f"
       "b HTTP/1.1\r\n\r\n",
       bad},
      {"GET /a\x80"
       "b HTTP/1.1\r\n\r\n",
       bad},
      {"GET /a\xff HTTP/1.1\r\n\r\n", bad},
      {std::string("GET /a\0b HTTP/1.1\r\n\r\n", 20), bad},
      {"GET /a#frag HTTP/1.1\r\n\r\n", bad},
      {"GET /a\tb HTTP/1.1\r\n\r\n", bad},
      {"GET /a?b\x01 HTTP/1.1\r\n\r\n", bad},
      // target forms and methods
      {"GET * HTTP/1.1\r\n\r\n", bad},
      {"OPTIONS *x HTTP/1.1\r\n\r\n", bad},
      {"OPTIONS ** HTTP/1.1\r\n\r\n", bad},
      {"CONNECT /path HTTP/1.1\r\n\r\n", bad},
      {"CONNECT example.com HTTP/1.1\r\n\r\n", bad},  // port required
      {"CONNECT example.com: HTTP/1.1\r\n\r\n", bad},
      {"CONNECT example.com:443/x HTTP/1.1\r\n\r\n", bad},
      {"CONNECT http://example.com:443 HTTP/1.1\r\n\r\n", bad},
      {"GET example.com:443 HTTP/1.1\r\n\r\n", bad},  // authority-form needs CONNECT
      {"GET http://user@host/ HTTP/1.1\r\n\r\n", bad},
      {"GET http:///x HTTP/1.1\r\n\r\n", bad},
      {"GET http:// HTTP/1.1\r\n\r\n", bad},
      {"GET http://host:99999/ HTTP/1.1\r\n\r\n", bad},
      {"GET http://host:12a/ HTTP/1.1\r\n\r\n", bad},
      {"GET http:/x HTTP/1.1\r\n\r\n", bad},
      {"GET http:x HTTP/1.1\r\n\r\n", bad},
      {"GET h%74tp://x/ HTTP/1.1\r\n\r\n", bad},
      {"GET http://[zz]/ HTTP/1.1\r\n\r\n", bad},
      {"GET http://[::1/ HTTP/1.1\r\n\r\n", bad},
      {"GET http://a..b/ HTTP/1.1\r\n\r\n", bad},
      {"GET http://.a/ HTTP/1.1\r\n\r\n", bad},
      {"GET http://a%41/ HTTP/1.1\r\n\r\n", bad},
      {"GET http://a/b#c HTTP/1.1\r\n\r\n", bad},
      // versions
      {"GET / HTTP/2.0\r\n\r\n", v505},
      {"GET / HTTP/0.9\r\n\r\n", v505},
      {"GET / HTTP/3.1\r\nHost: a\r\n\r\n", v505},
      {"GET / HTTP/1.10\r\n\r\n", bad},
      {"GET / HTTP/11.1\r\n\r\n", bad},
      {"GET / http/1.1\r\n\r\n", bad},
      {"GET / HTTP/1\r\n\r\n", bad},
      {"GET / HTTP/1.\r\n\r\n", bad},
      {"GET / HTTP/a.b\r\n\r\n", bad},
      {"GET / HTTPS/1.1\r\n\r\n", bad},
      {"GET / HTTP/1.1x\r\n\r\n", bad},
      {"GET / HTTP1.1\r\n\r\n", bad},
      // field lines
      {"GET / HTTP/1.1\r\nHost : a\r\n\r\n", bad},  // RFC 9112 §5.1
      {"GET / HTTP/1.1\r\nHost\t: a\r\n\r\n", bad},
      {"GET / HTTP/1.1\r\n Host: a\r\n\r\n", bad},  // whitespace before the first field
      {"GET / HTTP/1.1\r\nHost: a\r\nX: b\r\n c\r\n\r\n", bad},  // obs-fold
      {"GET / HTTP/1.1\r\nHost: a\r\nX: b\r\n\tc\r\n\r\n", bad},
      {std::string("GET / HTTP/1.1\r\nX: a\0b\r\n\r\n", 27), bad},
      {"GET / HTTP/1.1\r\nX: a\rb\r\n\r\n", bad},
      {"GET / HTTP/1.1\r\nX: a\x01"
       "b\r\n\r\n",
       bad},
      {"GET / HTTP/1.1\r\nX: a\x7f\r\n\r\n", bad},
      {"GET / HTTP/1.1\r\nX: a\x1b[31m\r\n\r\n", bad},
      {"GET / HTTP/1.1\r\n: v\r\n\r\n", bad},
      {"GET / HTTP/1.1\r\nFoo\r\n\r\n", bad},
      {"GET / HTTP/1.1\r\nX(y): v\r\n\r\n", bad},
      {"GET / HTTP/1.1\r\nX\x80: v\r\n\r\n", bad},
      {"GET / HTTP/1.1\r\nX: v\r\n\r\r\n", bad},
      {"GET / HTTP/1.1\r\nX: v\r\r\n\r\n", bad},
      {"GET / HTTP/1.1\r\n\x01: v\r\n\r\n", bad},
  };
}

TEST(RequestParser, ErrorsWhole) {
  for (const auto& c : error_cases()) {
    SCOPED_TRACE(testing::PrintToString(c.input));
    auto got = parse_whole(c.input);
    EXPECT_EQ(got.status, c.status);
  }
}

TEST(RequestParser, ErrorsReportAReason) {
  for (const auto& c : error_cases()) {
    SCOPED_TRACE(testing::PrintToString(c.input));
    RequestParser p;
    RequestLine line;
    HeaderField f;
    std::size_t used = 0;
    std::string_view in = c.input;
    auto st = p.parse_request_line(in, used, line);
    while (st == ParseStatus::kOk) {
      in.remove_prefix(used);
      st = p.parse_header(in, used, f);
    }
    ASSERT_EQ(st, c.status);
    EXPECT_STRNE(p.error(), "");
    // Errors are sticky.
    EXPECT_EQ(p.parse_header("X: y\r\n", used, f), c.status);
    EXPECT_EQ(used, 0u);
  }
}

TEST(RequestParser, StatusCodes) {
  EXPECT_EQ(status_code(ParseStatus::kBadRequest), 400);
  EXPECT_EQ(status_code(ParseStatus::kRequestLineTooLong), 414);
  EXPECT_EQ(status_code(ParseStatus::kHeaderTooLong), 431);
  EXPECT_EQ(status_code(ParseStatus::kVersionNotSupported), 505);
  EXPECT_EQ(status_code(ParseStatus::kOk), 0);
  EXPECT_EQ(status_code(ParseStatus::kAgain), 0);
  EXPECT_EQ(status_code(ParseStatus::kHeadersDone), 0);
  EXPECT_TRUE(is_error(ParseStatus::kBadRequest));
  EXPECT_FALSE(is_error(ParseStatus::kHeadersDone));
}

// ---- limits -------------------------------------------------------------------

TEST(RequestParser, RequestLineLimitCountsTheLineEnd) {
  ParserLimits limits{32, 64};
  const std::string fits = "GET /" + std::string(16, 'a') + " HTTP/1.1\r\n";  // 32 bytes
  ASSERT_EQ(fits.size(), 32u);
  EXPECT_EQ(parse_whole(fits + "Host: a\r\n\r\n", limits).status, ParseStatus::kHeadersDone);
  const std::string over = "GET /" + std::string(17, 'a') + " HTTP/1.1\r\n";
  auto got = parse_whole(over + "Host: a\r\n\r\n", limits);
  EXPECT_EQ(got.status, ParseStatus::kRequestLineTooLong);
  EXPECT_EQ(got.consumed, 32u);  // the 33rd byte is the one refused
  EXPECT_EQ(status_code(got.status), 414);
  // Too long is reported as soon as the limit passes, without a line end.
  got = parse_whole("GET /" + std::string(100, 'a'), limits);
  EXPECT_EQ(got.status, ParseStatus::kRequestLineTooLong);
}

TEST(RequestParser, HeaderLineLimitCountsTheLineEnd) {
  ParserLimits limits{64, 16};
  const std::string fits = "X: 12345678901\r\n";
  ASSERT_EQ(fits.size(), 16u);
  EXPECT_EQ(parse_whole("GET / HTTP/1.1\r\n" + fits + "\r\n", limits).status,
            ParseStatus::kHeadersDone);
  auto got = parse_whole("GET / HTTP/1.1\r\nX: 123456789012\r\n\r\n", limits);
  EXPECT_EQ(got.status, ParseStatus::kHeaderTooLong);
  EXPECT_EQ(status_code(got.status), 431);
  // A long name is as long as a long value.
  got = parse_whole("GET / HTTP/1.1\r\nX-" + std::string(50, 'n') + ": v\r\n\r\n", limits);
  EXPECT_EQ(got.status, ParseStatus::kHeaderTooLong);
}

TEST(RequestParser, EmptyLinesBeforeTheRequestAreBounded) {
  ParserLimits limits{16, 16};
  EXPECT_EQ(parse_whole(std::string(8, '\n') + "GET / HTTP/1.1\r\n\r\n", limits).status,
            ParseStatus::kHeadersDone);
  EXPECT_EQ(parse_whole(std::string(17, '\n') + "GET / HTTP/1.1\r\n\r\n", limits).status,
            ParseStatus::kBadRequest);
}

TEST(RequestParser, ErrorsAnySplit) {
  for (const auto& c : error_cases()) test::expect_splits_agree(c.input);
}

TEST(RequestParser, LimitsAnySplit) {
  ParserLimits limits{24, 12};
  const std::vector<std::string> inputs = {
      "GET /aaaaaaaaaaa HTTP/1.1\r\nX: 12345678\r\n\r\n",
      "GET /aaaaaaaaaaaa HTTP/1.1\r\nX: 1\r\n\r\n",
      "GET / HTTP/1.1\r\nX: 123456789\r\n\r\n",
      std::string(25, '\n') + "GET / HTTP/1.1\r\n\r\n",
  };
  for (const auto& in : inputs) {
    EXPECT_NE(parse_whole(in, limits).status, ParseStatus::kAgain);
    test::expect_splits_agree(in, limits);
  }
}

}  // namespace
}  // namespace vigil::http
