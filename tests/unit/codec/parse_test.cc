// Tests for src/http/parse.cc, valid requests: every target form, both
// versions, odd but valid field lines, many fields; fed whole, byte by byte,
// split at every offset and in random pieces, with and without moving the
// pending bytes to a new buffer. Errors are in parse_errors_test.cc, buffer
// moves and pipelining in parse_buffers_test.cc.

#include "codec/parse.h"

#include <gtest/gtest.h>

#include <algorithm>

#include <string>
#include <utility>
#include <vector>

#include "parse_driver.h"

namespace vigil::http {
namespace {

using test::every_byte;
using test::parse_head;
using test::parse_whole;
using test::ParsedHead;

using Fields = std::vector<std::pair<std::string, std::string>>;

struct ValidCase {
  std::string input;
  const char* method;
  Method id;
  TargetForm form;
  const char* target;
  const char* path;
  const char* query;
  bool has_query;
  const char* host;
  const char* port;
  int version;
  Fields headers;
};

constexpr auto kO = TargetForm::kOrigin;
constexpr auto kAbs = TargetForm::kAbsolute;

std::vector<ValidCase> valid_cases() {
  const Fields host_a = {{"Host", "a"}};
  // clang-format off
  std::vector<ValidCase> v = {
    {"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n",
     "GET", Method::kGet, kO, "/", "/", "", false, "", "", 1001, {{"Host", "example.com"}}},
    {"GET /index.html?a=1&b=2 HTTP/1.0\r\n\r\n",
     "GET", Method::kGet, kO, "/index.html?a=1&b=2", "/index.html", "a=1&b=2", true, "", "", 1000, {}},
    {"GET /? HTTP/1.1\r\nHost: a\r\n\r\n",
     "GET", Method::kGet, kO, "/?", "/", "", true, "", "", 1001, host_a},
    {"GET /a?b?c=/d HTTP/1.1\r\nHost: a\r\n\r\n",
     "GET", Method::kGet, kO, "/a?b?c=/d", "/a", "b?c=/d", true, "", "", 1001, host_a},
    {"GET //a/../%2e/b%20c HTTP/1.1\r\nHost: a\r\n\r\n",  // the parser does not normalize
     "GET", Method::kGet, kO, "//a/../%2e/b%20c", "//a/../%2e/b%20c", "", false, "", "", 1001, host_a},
    // bare LF line ends (RFC 9112 §2.2)
    {"HEAD /x HTTP/1.1\nHost: a\n\n",
     "HEAD", Method::kHead, kO, "/x", "/x", "", false, "", "", 1001, host_a},
    {"HEAD /x HTTP/1.1\r\nHost: a\n\r\n",
     "HEAD", Method::kHead, kO, "/x", "/x", "", false, "", "", 1001, host_a},
    // empty lines before the request line are skipped (RFC 9112 §2.2)
    {"\r\n\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",
     "GET", Method::kGet, kO, "/", "/", "", false, "", "", 1001, host_a},
    // absolute-form (RFC 9112 §3.2.2)
    {"GET http://example.com:8080/path/to?q=1 HTTP/1.1\r\nHost: other\r\n\r\n",
     "GET", Method::kGet, kAbs, "http://example.com:8080/path/to?q=1", "/path/to", "q=1", true,
     "example.com", "8080", 1001, {{"Host", "other"}}},
    {"GET http://example.com HTTP/1.1\r\nHost: example.com\r\n\r\n",
     "GET", Method::kGet, kAbs, "http://example.com", "", "", false, "example.com", "", 1001,
     {{"Host", "example.com"}}},
    {"GET HTTP://Example.COM?x HTTP/1.1\r\nHost: a\r\n\r\n",
     "GET", Method::kGet, kAbs, "HTTP://Example.COM?x", "", "x", true, "Example.COM", "", 1001, host_a},
    {"GET https://[::1]:443/ HTTP/1.1\r\nHost: a\r\n\r\n",
     "GET", Method::kGet, kAbs, "https://[::1]:443/", "/", "", false, "[::1]", "443", 1001, host_a},
    {"GET http://example.com./a HTTP/1.1\r\nHost: a\r\n\r\n",
     "GET", Method::kGet, kAbs, "http://example.com./a", "/a", "", false, "example.com", "", 1001, host_a},
    {"GET http://10.0.0.1:/a HTTP/1.1\r\nHost: a\r\n\r\n",
     "GET", Method::kGet, kAbs, "http://10.0.0.1:/a", "/a", "", false, "10.0.0.1", "", 1001, host_a},
    {"GET svn+ssh.x-y://h_1/ HTTP/1.1\r\nHost: a\r\n\r\n",  // any scheme: the server decides
     "GET", Method::kGet, kAbs, "svn+ssh.x-y://h_1/", "/", "", false, "h_1", "", 1001, host_a},
    // asterisk-form and authority-form (RFC 9112 §3.2.3-§3.2.4)
    {"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n",
     "OPTIONS", Method::kOptions, TargetForm::kAsterisk, "*", "", "", false, "", "", 1001, host_a},
    {"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
     "CONNECT", Method::kConnect, TargetForm::kAuthority, "example.com:443", "", "", false,
     "example.com", "443", 1001, {{"Host", "example.com:443"}}},
    {"CONNECT [2001:db8::1]:8443 HTTP/1.1\r\nHost: a\r\n\r\n",
     "CONNECT", Method::kConnect, TargetForm::kAuthority, "[2001:db8::1]:8443", "", "", false,
     "[2001:db8::1]", "8443", 1001, host_a},
    // methods
    {"POST /form HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n",
     "POST", Method::kPost, kO, "/form", "/form", "", false, "", "", 1001,
     {{"Host", "a"}, {"Content-Length", "0"}}},
    {"PUT /f HTTP/1.1\r\nHost: a\r\n\r\n",
     "PUT", Method::kPut, kO, "/f", "/f", "", false, "", "", 1001, host_a},
    {"DELETE /f HTTP/1.1\r\nHost: a\r\n\r\n",
     "DELETE", Method::kDelete, kO, "/f", "/f", "", false, "", "", 1001, host_a},
    {"TRACE /f HTTP/1.1\r\nHost: a\r\n\r\n",
     "TRACE", Method::kTrace, kO, "/f", "/f", "", false, "", "", 1001, host_a},
    {"PATCH /f HTTP/1.1\r\nHost: a\r\n\r\n",
     "PATCH", Method::kPatch, kO, "/f", "/f", "", false, "", "", 1001, host_a},
    // any token is a method; methods are case-sensitive (RFC 9110 §9.1)
    {"PURGE /f HTTP/1.1\r\nHost: a\r\n\r\n",
     "PURGE", Method::kOther, kO, "/f", "/f", "", false, "", "", 1001, host_a},
    {"get /f HTTP/1.1\r\nHost: a\r\n\r\n",
     "get", Method::kOther, kO, "/f", "/f", "", false, "", "", 1001, host_a},
    {"M-SEARCH!#$%&'*+.^_`|~ /f HTTP/1.1\r\nHost: a\r\n\r\n",
     "M-SEARCH!#$%&'*+.^_`|~", Method::kOther, kO, "/f", "/f", "", false, "", "", 1001, host_a},
    // HTTP/1.x with x > 1 is processed as 1.1 (RFC 9110 §2.5)
    {"GET / HTTP/1.9\r\nHost: a\r\n\r\n",
     "GET", Method::kGet, kO, "/", "/", "", false, "", "", 1001, host_a},
    // printable characters beyond RFC 3986 that browsers send raw
    {"GET /a|b{c}^d~e!$&'()*+,;=:@%20[x]\\`\"<> HTTP/1.1\r\nHost: a\r\n\r\n",
     "GET", Method::kGet, kO, "/a|b{c}^d~e!$&'()*+,;=:@%20[x]\\`\"<>",
     "/a|b{c}^d~e!$&'()*+,;=:@%20[x]\\`\"<>", "", false, "", "", 1001, host_a},
    // OWS around values, empty values, obs-text, odd but valid names
    {"GET / HTTP/1.1\r\nHost:a\r\nX-Spaced:   two  words \t\r\nEmpty:\r\nBlank: \t \r\n"
     "X-!#$%&'*+.^_`|~: v\r\nUtf8: caf\xc3\xa9\r\nX: a:b: c\r\nQ: \"quoted\\\" str\"\r\n\r\n",
     "GET", Method::kGet, kO, "/", "/", "", false, "", "", 1001,
     {{"Host", "a"}, {"X-Spaced", "two  words"}, {"Empty", ""}, {"Blank", ""},
      {"X-!#$%&'*+.^_`|~", "v"}, {"Utf8", "caf\xc3\xa9"}, {"X", "a:b: c"},
      {"Q", "\"quoted\\\" str\""}}},
  };
  // clang-format on
  ValidCase many{"GET /many HTTP/1.1\r\n",
                 "GET",
                 Method::kGet,
                 kO,
                 "/many",
                 "/many",
                 "",
                 false,
                 "",
                 "",
                 1001,
                 {}};
  for (int i = 0; i < 100; ++i) {
    std::string name = "X-Header-" + std::to_string(i);
    std::string value = "value " + std::to_string(i * 7919);
    many.input += name + ": " + value + "\r\n";
    many.headers.emplace_back(name, value);
  }
  many.input += "\r\n";
  v.push_back(many);
  return v;
}

void expect_valid(const ValidCase& c, const ParsedHead& got) {
  EXPECT_EQ(got.status, ParseStatus::kHeadersDone);
  EXPECT_EQ(got.method, c.method);
  EXPECT_EQ(got.method_id, c.id);
  EXPECT_EQ(got.form, c.form);
  EXPECT_EQ(got.target, c.target);
  EXPECT_EQ(got.path, c.path);
  EXPECT_EQ(got.query, c.query);
  EXPECT_EQ(got.has_query, c.has_query);
  EXPECT_EQ(got.host, c.host);
  EXPECT_EQ(got.port, c.port);
  EXPECT_EQ(got.version, c.version);
  EXPECT_EQ(got.headers, c.headers);
  EXPECT_EQ(got.consumed, c.input.size());
}

TEST(RequestParser, ValidRequests) {
  for (const auto& c : valid_cases()) {
    SCOPED_TRACE(c.input);
    expect_valid(c, parse_whole(c.input));
  }
}

TEST(RequestParser, ValidRequestsByteByByte) {
  for (const auto& c : valid_cases()) {
    SCOPED_TRACE(c.input);
    expect_valid(c, parse_head(c.input, every_byte(c.input.size())));
    expect_valid(c, parse_head(c.input, every_byte(c.input.size()), true));
  }
}

TEST(RequestParser, ValidRequestsAnySplit) {
  for (const auto& c : valid_cases()) test::expect_splits_agree(c.input);
}

TEST(RequestParser, IncompleteInputIsAgain) {
  for (const auto& c : valid_cases()) {
    for (std::size_t n = 0; n < c.input.size(); ++n) {
      auto got = parse_whole(c.input.substr(0, n));
      ASSERT_EQ(got.status, ParseStatus::kAgain) << testing::PrintToString(c.input.substr(0, n));
    }
  }
}

TEST(RequestParser, ViewsPointIntoTheBuffer) {
  const std::string in = "GET http://h:1/p?q HTTP/1.1\r\nHost: h\r\n\r\n";
  RequestLine line;
  std::vector<HeaderField> fields;
  auto got = parse_head(in, {}, false, {}, &line, &fields);
  ASSERT_EQ(got.status, ParseStatus::kHeadersDone);
  EXPECT_EQ(line.line, "GET http://h:1/p?q HTTP/1.1");
  EXPECT_EQ(line.line.data(), in.data());
  EXPECT_EQ(line.method_name.data(), in.data());
  EXPECT_EQ(line.target.data(), in.data() + 4);
  EXPECT_EQ(line.path.data(), in.data() + 14);
  EXPECT_EQ(line.query.data(), in.data() + 17);
  EXPECT_EQ(line.scheme, "http");
  ASSERT_EQ(fields.size(), 1u);
  EXPECT_EQ(fields[0].id, HeaderId::kHost);
  EXPECT_EQ(fields[0].name.data(), in.data() + 29);
  EXPECT_EQ(fields[0].value.data(), in.data() + 35);
}

TEST(RequestParser, KnownFieldNamesAreFoundCaseInsensitively) {
  const std::string in =
      "GET / HTTP/1.1\r\nhost: a\r\nCONTENT-LENGTH: 1\r\ntransfer-encoding: x\r\n"
      "Connection: close\r\nIf-Modified-Since: x\r\nrange: x\r\nX-Other: y\r\nExpect: z\r\n\r\n";
  const std::vector<HeaderId> want = {
      HeaderId::kHost,       HeaderId::kContentLength,   HeaderId::kTransferEncoding,
      HeaderId::kConnection, HeaderId::kIfModifiedSince, HeaderId::kRange,
      HeaderId::kOther,      HeaderId::kExpect};
  EXPECT_EQ(parse_whole(in).ids, want);
}

TEST(RequestParser, ResetStartsAFreshRequest) {
  RequestParser p;
  RequestLine line;
  std::size_t used = 0;
  ASSERT_EQ(p.parse_request_line("GET /a HTTP/1.0\r\n", used, line), ParseStatus::kOk);
  HeaderField f;
  ASSERT_EQ(p.parse_header("\r\n", used, f), ParseStatus::kHeadersDone);
  EXPECT_TRUE(p.done());
  EXPECT_EQ(p.parse_header("X: y\r\n", used, f), ParseStatus::kHeadersDone);  // stays done
  EXPECT_EQ(used, 0u);
  p.reset();
  EXPECT_FALSE(p.done());
  ASSERT_EQ(p.parse_request_line("PUT /b HTTP/1.1\r\n", used, line), ParseStatus::kOk);
  EXPECT_EQ(line.method, Method::kPut);
  EXPECT_EQ(line.version, 1001);
}

// HTTP/0.9's simple request (RFC 1945 §4.1), as nginx takes it: "GET" and a
// target, maybe spaces, the line end; no header section follows.
TEST(RequestParser, Http09SimpleRequests) {
  struct Case {
    std::string input;
    TargetForm form;
    const char* target;
    const char* path;
    const char* query;
    const char* host;
    const char* line;
  };
  const std::vector<Case> cases = {
      {"GET /index.html?a=b\r\n", kO, "/index.html?a=b", "/index.html", "a=b", "",
       "GET /index.html?a=b"},
      {"GET /\n", kO, "/", "/", "", "", "GET /"},
      {"GET / \r\n", kO, "/", "/", "", "", "GET / "},
      {"GET /x   \n", kO, "/x", "/x", "", "", "GET /x   "},
      {"GET http://h:8/p\r\n", kAbs, "http://h:8/p", "/p", "", "h", "GET http://h:8/p"},
      {"GET http://h\r\n", kAbs, "http://h", "", "", "h", "GET http://h"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(testing::PrintToString(c.input));
    // Whole and byte by byte: the line is complete at its LF, and the parser
    // is done (the next octet would be the next request's, but there is no
    // next request: the connection closes after the answer).
    for (std::size_t piece : {c.input.size(), std::size_t{1}}) {
      RequestParser p;
      RequestLine line;
      std::size_t used = 0;
      std::size_t at = 0;
      ParseStatus st = ParseStatus::kAgain;
      while (st == ParseStatus::kAgain && at < c.input.size()) {
        const std::size_t n = std::min(piece, c.input.size() - at);
        st = p.parse_request_line(std::string_view(c.input).substr(at, n), used, line);
        at += used;
      }
      ASSERT_EQ(st, ParseStatus::kOk);
      EXPECT_EQ(at, c.input.size());
      EXPECT_EQ(line.version, 9);
      EXPECT_EQ(line.method, Method::kGet);
      EXPECT_EQ(line.form, c.form);
      EXPECT_EQ(line.target, c.target);
      EXPECT_EQ(line.path, c.path);
      EXPECT_EQ(line.query, c.query);
      EXPECT_EQ(line.host, c.host);
      EXPECT_EQ(line.line, c.line);
      EXPECT_TRUE(p.done());
      HeaderField f;
      EXPECT_EQ(p.parse_header("X: y\r\n", used, f), ParseStatus::kHeadersDone);
      EXPECT_EQ(used, 0u);
    }
  }
  // Another method: 400, but the line is filled, with version 9, so that the
  // answer goes without a head as nginx's does.
  RequestParser p;
  RequestLine line;
  std::size_t used = 0;
  EXPECT_EQ(p.parse_request_line("HEAD /a\r\n", used, line), ParseStatus::kBadRequest);
  EXPECT_EQ(line.version, 9);
  EXPECT_EQ(line.method_name, "HEAD");
  EXPECT_EQ(line.line, "HEAD /a");
}

}  // namespace
}  // namespace vigil::http
