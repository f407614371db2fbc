// Tests for src/http/header_check.cc and src/http/authority.cc: Host, framing
// (Content-Length / Transfer-Encoding), persistence and Expect on whole heads.

#include "codec/header_check.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "codec/authority.h"
#include "parse_driver.h"

namespace vigil::http {
namespace {

struct Want {
  int status = 0;
  std::int64_t content_length = -1;
  bool chunked = false;
  bool keep_alive = true;
  bool expect_continue = false;
  const char* host = "";
  const char* port = "";
};

struct Case {
  std::string head;  // request line and fields, without the final empty line
  Want want;
};

HeaderCheck check(const std::string& head) {
  static std::vector<std::string> inputs;  // the views point into these
  inputs.push_back(head + "\r\n");
  RequestLine line;
  std::vector<HeaderField> fields;
  auto parsed = test::parse_head(inputs.back(), {}, false, {}, &line, &fields);
  EXPECT_EQ(parsed.status, ParseStatus::kHeadersDone) << head;
  return check_headers(line, fields);
}

Want ok(const char* host = "a") {
  Want w;
  w.host = host;
  return w;
}
Want err(int status) {
  Want w;
  w.status = status;
  w.keep_alive = false;
  return w;
}
Want with_length(std::int64_t n) {
  Want w = ok();
  w.content_length = n;
  return w;
}

std::vector<Case> cases() {
  const std::string get11 = "GET / HTTP/1.1\r\n";
  const std::string get10 = "GET / HTTP/1.0\r\n";
  const std::string post = "POST / HTTP/1.1\r\nHost: a\r\n";
  Want chunked = ok();
  chunked.chunked = true;
  Want closing = ok();
  closing.keep_alive = false;
  Want continue100 = ok();
  continue100.expect_continue = true;
  Want v10 = ok("");
  v10.keep_alive = false;
  Want v10_keep = ok("");
  Want abs = ok("example.com");
  abs.port = "8080";

  return {
      // Host (RFC 9112 §3.2, RFC 9110 §7.2)
      {get11 + "Host: a\r\n", ok()},
      {get11 + "Host: Example.COM\r\n", ok("Example.COM")},
      {get11 + "Host: example.com.\r\n", ok("example.com")},
      {get11 + "Host: [::1]:80\r\n",
       [] {
         Want w = ok("[::1]");
         w.port = "80";
         return w;
       }()},
      {get11 + "Host: a:\r\n", ok()},
      {get11 + "Host:\r\n", err(400)},  // an empty authority for "http" (RFC 9110 §4.2.1)
      {get11 + "Host: [v1.fe80::a+en1]\r\n", ok("[v1.fe80::a+en1]")},  // IPvFuture
      {get11 + "Host: [v1.]\r\n", err(400)},
      {get11 + "Host: [vx.a]\r\n", err(400)},
      {get11 + "Host: [v1.a%41]\r\n", err(400)},
      {get11, err(400)},              // missing
      {get11 + "Host: a\r\nHost: a\r\n", err(400)},
      {get11 + "Host: a\r\nHost: b\r\n", err(400)},
      {get11 + "Host: a b\r\n", err(400)},
      {get11 + "Host: a/b\r\n", err(400)},
      {get11 + "Host: ../x\r\n", err(400)},
      {get11 + "Host: a..b\r\n", err(400)},
      {get11 + "Host: user@a\r\n", err(400)},
      {get11 + "Host: a:99999\r\n", err(400)},
      {get11 + "Host: a:8x\r\n", err(400)},
      {get11 + "Host: [::1\r\n", err(400)},
      {get11 + "Host: [::1]x\r\n", err(400)},
      {get11 + "Host: a,b\r\n", err(400)},
      {get10, v10},  // HTTP/1.0 needs no Host
      // absolute-form and authority-form override Host (RFC 9112 §3.2.2)
      {"GET http://example.com:8080/x HTTP/1.1\r\nHost: other\r\n", abs},
      {"GET http://example.com:8080/x HTTP/1.1\r\n", err(400)},  // still required in 1.1
      {"GET http://example.com/x HTTP/1.0\r\n",
       [] {
         Want w = ok("example.com");
         w.keep_alive = false;
         return w;
       }()},
      {"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n",
       [] {
         Want w = ok("example.com");
         w.port = "443";
         return w;
       }()},
      // Content-Length (RFC 9110 §8.6, RFC 9112 §6.3)
      {post + "Content-Length: 5\r\n", with_length(5)},
      {post + "Content-Length: 0\r\n", with_length(0)},
      {post + "Content-Length: 007\r\n", with_length(7)},
      {post + "Content-Length:  42 \r\n", with_length(42)},
      {post + "Content-Length: 9223372036854775807\r\n", with_length(9223372036854775807)},
      {post + "Content-Length: 9223372036854775808\r\n", err(400)},
      {post + "Content-Length: 99999999999999999999999\r\n", err(400)},
      {post + "Content-Length:\r\n", err(400)},
      {post + "Content-Length: -1\r\n", err(400)},
      {post + "Content-Length: +5\r\n", err(400)},
      {post + "Content-Length: 0x10\r\n", err(400)},
      {post + "Content-Length: 1 2\r\n", err(400)},
      {post + "Content-Length: 5,5\r\n", err(400)},
      {post + "Content-Length: 5, 5\r\n", err(400)},
      {post + "Content-Length: 5\r\nContent-Length: 5\r\n", err(400)},  // identical: refused
      {post + "Content-Length: 5\r\nContent-Length: 6\r\n", err(400)},
      // Transfer-Encoding (RFC 9112 §6.1, §6.3)
      {post + "Transfer-Encoding: chunked\r\n", chunked},
      {post + "Transfer-Encoding: Chunked\r\n", chunked},
      {post + "transfer-encoding: CHUNKED\r\n", chunked},
      {post + "Transfer-Encoding: , chunked,\r\n", chunked},  // empty list elements
      {post + "Transfer-Encoding: gzip, chunked\r\n", err(501)},
      {post + "Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n", err(501)},
      {post + "Transfer-Encoding: identity, chunked\r\n", err(501)},
      {post + "Transfer-Encoding: gzip\r\n", err(400)},  // chunked not final
      {post + "Transfer-Encoding: identity\r\n", err(400)},
      {post + "Transfer-Encoding: chunked, gzip\r\n", err(400)},
      {post + "Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n", err(400)},
      {post + "Transfer-Encoding: chunked, chunked\r\n", err(400)},
      {post + "Transfer-Encoding: chunked;q=1\r\n", err(400)},
      {post + "Transfer-Encoding: xchunked\r\n", err(400)},
      {post + "Transfer-Encoding:\r\n", err(400)},
      {post + "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n", err(400)},
      {post + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", err(400)},
      {"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n", err(400)},
      // persistence (RFC 9112 §9.3)
      {get11 + "Host: a\r\nConnection: close\r\n", closing},
      {get11 + "Host: a\r\nConnection: foo, CLOSE\r\n", closing},
      {get11 + "Host: a\r\nConnection: keep-alive\r\nConnection: close\r\n", closing},
      {get11 + "Host: a\r\nConnection: keep-alive\r\n", ok()},
      {get11 + "Host: a\r\nConnection: closed\r\n", ok()},
      {get11 + "Host: a\r\nConnection: upgrade\r\n", ok()},
      {get10 + "Connection: keep-alive\r\n", v10_keep},
      {get10 + "Connection: Keep-Alive\r\n", v10_keep},
      {get10 + "Connection: keep-alive, close\r\n", v10},
      {get10 + "Connection: foo\r\n", v10},
      // Expect (RFC 9110 §10.1.1)
      {post + "Expect: 100-continue\r\n", continue100},
      {post + "Expect: 100-Continue\r\n", continue100},
      {post + "Expect: foo\r\n", ok()},                      // ignored, not 417
      {"POST / HTTP/1.0\r\nExpect: 100-continue\r\n", v10},  // MUST be ignored in 1.0
  };
}

TEST(HeaderCheck, Table) {
  for (const auto& c : cases()) {
    SCOPED_TRACE(testing::PrintToString(c.head));
    const auto got = check(c.head);
    EXPECT_EQ(got.status, c.want.status) << got.error;
    if (c.want.status != 0) {
      EXPECT_STRNE(got.error, "");
      EXPECT_FALSE(got.keep_alive);
      EXPECT_FALSE(got.ok());
      continue;
    }
    EXPECT_TRUE(got.ok());
    EXPECT_EQ(got.content_length, c.want.content_length);
    EXPECT_EQ(got.chunked, c.want.chunked);
    EXPECT_EQ(got.keep_alive, c.want.keep_alive);
    EXPECT_EQ(got.expect_continue, c.want.expect_continue);
    EXPECT_EQ(got.host, c.want.host);
    EXPECT_EQ(got.port, c.want.port);
  }
}

TEST(HeaderCheck, IncrementalEqualsList) {
  RequestParser p;
  RequestLine line;
  std::size_t used = 0;
  std::string_view in = "POST /x HTTP/1.1\r\nHost: h:1\r\nContent-Length: 3\r\n\r\n";
  ASSERT_EQ(p.parse_request_line(in, used, line), ParseStatus::kOk);
  in.remove_prefix(used);
  HeaderChecker checker(line);
  std::vector<HeaderField> fields;
  HeaderField f;
  while (p.parse_header(in, used, f) == ParseStatus::kOk) {
    in.remove_prefix(used);
    checker.add(f);
    fields.push_back(f);
  }
  const auto a = checker.finish();
  const auto b = check_headers(line, fields);
  EXPECT_EQ(a.status, 0);
  EXPECT_EQ(a.content_length, 3);
  EXPECT_EQ(b.content_length, 3);
  EXPECT_EQ(a.host, "h");
  EXPECT_EQ(b.host, "h");
  EXPECT_EQ(a.port, "1");
}

TEST(HeaderCheck, FirstProblemIsReported) {
  const auto got = check(
      "POST / HTTP/1.1\r\nContent-Length: x\r\nHost: a\r\nHost: b\r\n"
      "Transfer-Encoding: gzip\r\n");
  EXPECT_EQ(got.status, 400);
  EXPECT_STREQ(got.error, "invalid Content-Length");
}

TEST(Authority, Parse) {
  struct A {
    const char* in;
    bool port_required;
    bool ok;
    const char* host;
    const char* port;
  };
  const A table[] = {
      {"example.com", false, true, "example.com", ""},
      {"example.com:80", false, true, "example.com", "80"},
      {"example.com:80", true, true, "example.com", "80"},
      {"example.com", true, false, "", ""},
      {"example.com:", true, false, "", ""},
      {"example.com:", false, true, "example.com", ""},
      {"a_b-c.d", false, true, "a_b-c.d", ""},
      {"127.0.0.1:65535", false, true, "127.0.0.1", "65535"},
      {"127.0.0.1:65536", false, false, "", ""},
      {"h:000080", false, false, "", ""},  // at most five digits
      {"[::1]", false, true, "[::1]", ""},
      {"[fe80::1%25eth0]", false, false, "", ""},
      {"[v1.x]", false, true, "[v1.x]", ""},  // IPvFuture (RFC 3986 §3.2.2)
      {"[v1.x]:8080", false, true, "[v1.x]", "8080"},
      {"[v1F.!$&'()*+,;=-._~:]", false, true, "[v1F.!$&'()*+,;=-._~:]", ""},
      {"[v1.a%41]", false, false, "", ""},
      {"[v.x]", false, false, "", ""},
      {"[v1x]", false, false, "", ""},
      {"[]", false, false, "", ""},
      {"[::1]:", false, true, "[::1]", ""},
      {"[::1]80", false, false, "", ""},
      {"", false, false, "", ""},
      {":80", false, false, "", ""},
      {".", false, false, "", ""},
      {"a.", false, true, "a", ""},
      {"a..", false, false, "", ""},
      {"a:b:c", false, false, "", ""},
      {"u@h", false, false, "", ""},
      {"h%41", false, false, "", ""},
      {"h!", false, false, "", ""},
  };
  for (const auto& a : table) {
    SCOPED_TRACE(a.in);
    Authority out;
    ASSERT_EQ(parse_authority(a.in, a.port_required, out), a.ok);
    if (!a.ok) continue;
    EXPECT_EQ(out.host, a.host);
    EXPECT_EQ(out.port, a.port);
  }
}

}  // namespace
}  // namespace vigil::http
