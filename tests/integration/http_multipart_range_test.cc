// Several byte ranges of one representation: a 206 multipart/byteranges
// (RFC 9110 §14.6) with a boundary, each part's Content-Type and
// Content-Range, and a Content-Length that is the body's exact size; from a
// file (sendfile on and off: the parts stay file ranges) and from memory
// (empty_gif). Overlapping ranges adding up to more than the whole are
// answered whole, an invalid range is 416, and more ranges than max_ranges
// the whole representation, as nginx does.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "integration/http_harness.h"

namespace vigil::test {
namespace {

struct Part {
  std::string content_type;
  std::string content_range;
  std::string body;
};

// The parts of a multipart/byteranges body with boundary `b`; fails the
// test on anything but CRLF "--" b CRLF fields CRLF CRLF bytes, ..., CRLF
// "--" b "--" CRLF.
std::vector<Part> parse_parts(const std::string& body, const std::string& b) {
  std::vector<Part> parts;
  const std::string delim = "\r\n--" + b;
  std::size_t at = 0;
  for (;;) {
    if (body.compare(at, delim.size(), delim) != 0) {
      ADD_FAILURE() << "no boundary at " << at << ": " << body.substr(at, 40);
      return parts;
    }
    at += delim.size();
    if (body.compare(at, 4, "--\r\n") == 0) {
      EXPECT_EQ(at + 4, body.size()) << "bytes after the closing boundary";
      return parts;
    }
    if (body.compare(at, 2, "\r\n") != 0) {
      ADD_FAILURE() << "no CRLF after the boundary at " << at;
      return parts;
    }
    at += 2;
    const std::size_t end = body.find("\r\n\r\n", at);
    if (end == std::string::npos) {
      ADD_FAILURE() << "a part without the end of its fields";
      return parts;
    }
    Part p;
    for_each_field("x\r\n" + body.substr(at, end - at) + "\r\n",
                   [&p](const std::string& name, const std::string& value) {
                     if (name == "content-type") p.content_type = value;
                     if (name == "content-range") p.content_range = value;
                   });
    at = end + 4;
    long long first = 0;
    long long last = 0;
    long long size = 0;
    if (std::sscanf(p.content_range.c_str(), "bytes %lld-%lld/%lld", &first, &last, &size) != 3) {
      ADD_FAILURE() << "Content-Range: " << p.content_range;
      return parts;
    }
    const auto n = static_cast<std::size_t>(last - first + 1);
    p.body = body.substr(at, n);
    at += n;
    parts.push_back(p);
  }
}

std::string boundary_of(const Response& r) {
  const std::string ct = r.header("content-type");
  const std::string prefix = "multipart/byteranges; boundary=";
  if (ct.rfind(prefix, 0) != 0) return {};
  return ct.substr(prefix.size());
}

class HttpMultipartRange : public ::testing::Test {
 protected:
  bool start(const std::string& locations, const std::string& http = "") {
    port_ = free_port();
    return server_.start(http + "server { listen 127.0.0.1:" + std::to_string(port_) +
                         "; root html; access_log off;\n" + locations + "\n}\n");
  }
  Response range(const std::string& target, const std::string& value) {
    return get(port_, simple_get(target, "localhost", "Range: " + value + "\r\n"));
  }
  // 1000 bytes: "X000XXXXXX" to "X099XXXXXX", as nginx's range tests.
  static std::string tens() {
    std::string s;
    char line[16];
    for (int i = 0; i < 100; ++i) {
      std::snprintf(line, sizeof line, "X%03dXXXXXX", i);
      s += line;
    }
    return s;
  }
  // Checks a multipart answer of `r` against `whole` and the ranges asked
  // ({first, last} each, in order).
  static void expect_parts(const Response& r, const std::string& whole, const std::string& type,
                           const std::vector<std::pair<std::size_t, std::size_t>>& ranges) {
    ASSERT_EQ(r.status, 206) << r.head;
    EXPECT_FALSE(r.has("content-range"));
    EXPECT_FALSE(r.has("accept-ranges"));
    const std::string b = boundary_of(r);
    ASSERT_FALSE(b.empty()) << r.head;
    EXPECT_EQ(r.header("content-length"), std::to_string(r.body.size()));
    const std::vector<Part> parts = parse_parts(r.body, b);
    ASSERT_EQ(parts.size(), ranges.size()) << r.body;
    for (std::size_t i = 0; i < ranges.size(); ++i) {
      const auto [first, last] = ranges[i];
      SCOPED_TRACE(i);
      EXPECT_EQ(parts[i].content_type, type);
      EXPECT_EQ(parts[i].content_range, "bytes " + std::to_string(first) + "-" +
                                            std::to_string(last) + "/" +
                                            std::to_string(whole.size()));
      EXPECT_EQ(parts[i].body, whole.substr(first, last - first + 1));
    }
  }

  VigilServer server_;
  int port_ = 0;
};

TEST_F(HttpMultipartRange, PartsOfAFileWithSendfileOnAndOff) {
  ASSERT_TRUE(
      start("location /on/ { sendfile on; }\n"
            "location /off/ { sendfile off; output_buffers 1 4k; }"))
      << server_.output();
  const std::string t = tens();
  server_.write("html/on/t.txt", t);
  server_.write("html/off/t.txt", t);
  for (const char* dir : {"/on/", "/off/"}) {
    SCOPED_TRACE(dir);
    const std::string target = std::string(dir) + "t.txt";
    // In the order asked; an unsatisfiable one is left out.
    expect_parts(range(target, "bytes=0-9, -10, 10-19"), t, "text/plain",
                 {{0, 9}, {990, 999}, {10, 19}});
    expect_parts(range(target, "bytes=0-9, -10, 100000-, 10-19"), t, "text/plain",
                 {{0, 9}, {990, 999}, {10, 19}});
    // Overlapping, within the size of the whole.
    expect_parts(range(target, "bytes=500-, 0-99, 50-149"), t, "text/plain",
                 {{500, 999}, {0, 99}, {50, 149}});
  }
}

TEST_F(HttpMultipartRange, PartsOfALargeFileStayInTheFile) {
  ASSERT_TRUE(start("location / { sendfile on; }")) << server_.output();
  std::string big;
  for (int i = 0; big.size() < 3'000'000; ++i) big += std::to_string(i) + ",";
  server_.write("html/big.bin", big);
  expect_parts(range("/big.bin", "bytes=2900000-, 0-2499999, 5-5"), big, "application/octet-stream",
               {{2900000, big.size() - 1}, {0, 2499999}, {5, 5}});
}

TEST_F(HttpMultipartRange, PartsOfABodyInMemory) {
  ASSERT_TRUE(start("location = /p { empty_gif; }")) << server_.output();
  const Response whole = get(port_, simple_get("/p"));
  ASSERT_EQ(whole.status, 200);
  ASSERT_GT(whole.body.size(), 20u);
  expect_parts(range("/p", "bytes=0-5, -4, 6-9"), whole.body, "image/gif",
               {{0, 5}, {whole.body.size() - 4, whole.body.size() - 1}, {6, 9}});
}

TEST_F(HttpMultipartRange, WhatIsAnsweredWholeOr416) {
  ASSERT_TRUE(start("location /two/ { max_ranges 2; }")) << server_.output();
  const std::string t = tens();
  server_.write("html/t.txt", t);
  server_.write("html/two/t.txt", t);
  // More bytes than the whole: 200, the whole.
  Response r = range("/t.txt", "bytes=0-10001, 0-0");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, t);
  // Invalid values: 416 with the size.
  for (const char* v : {"bytes=alpha", "bytes=10-alpha", "bytes=10", "bytes=10-11 12-",
                        "bytes=0-1, x", "bytes=5-2", "bytes=1000-, 2000-"}) {
    r = range("/t.txt", v);
    EXPECT_EQ(r.status, 416) << v;
    EXPECT_EQ(r.header("content-range"), "bytes */1000") << v;
  }
  // max_ranges 2: two ranges (and an unsatisfiable third) are answered.
  expect_parts(range("/two/t.txt", "bytes=0-9, -10"), t, "text/plain", {{0, 9}, {990, 999}});
  expect_parts(range("/two/t.txt", "bytes=0-9, -10, 10000-"), t, "text/plain",
               {{0, 9}, {990, 999}});
  r = range("/two/t.txt", "bytes=0-9, -10, 10-19");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, t);
}

TEST_F(HttpMultipartRange, ManyRangesAndAn8BitRecoding) {
  ASSERT_TRUE(
      start("location / { }\n"
            "location /cs/ { charset b; source_charset a; sendfile off; }",
            "charset_map a b { 58 59; }\n"))
      << server_.output();
  const std::string t = tens();
  server_.write("html/t.txt", t);
  server_.write("html/cs/t.txt", t);
  // 150 one-byte ranges: more parts than the filters take at once.
  std::string value = "bytes=";
  std::vector<std::pair<std::size_t, std::size_t>> ranges;
  for (std::size_t i = 0; i < 150; ++i) {
    value += (i == 0 ? "" : ",") + std::to_string(i * 6) + "-" + std::to_string(i * 6);
    ranges.emplace_back(i * 6, i * 6);
  }
  expect_parts(range("/t.txt", value), t, "text/plain", ranges);
  // Recoded X -> Y: the parts are the file's ranges, recoded, and the parts'
  // type names the charset.
  std::string recoded = t;
  for (char& ch : recoded) ch = ch == 'X' ? 'Y' : ch;
  expect_parts(range("/cs/t.txt", "bytes=0-9, 10-19"), recoded, "text/plain; charset=b",
               {{0, 9}, {10, 19}});
  expect_parts(range("/cs/t.txt", value), recoded, "text/plain; charset=b", ranges);
}

TEST_F(HttpMultipartRange, KeepAliveGoesOnAfterAMultipartAnswer) {
  ASSERT_TRUE(start("location / { }")) << server_.output();
  const std::string t = tens();
  server_.write("html/t.txt", t);
  Client c(port_);
  ASSERT_TRUE(c.ok());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(c.send(simple_get("/t.txt", "localhost", "Range: bytes=1-2,4-5\r\n")));
    const Response r = c.read_response();
    SCOPED_TRACE(i);
    expect_parts(r, t, "text/plain", {{1, 2}, {4, 5}});
  }
}

}  // namespace
}  // namespace vigil::test
