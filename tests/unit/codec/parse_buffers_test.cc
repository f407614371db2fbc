// Tests for src/http/parse.cc as the server drives it: moving the pending
// bytes to a large buffer, and pipelined requests, each starting exactly
// where the previous head (and body) ended.

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "codec/chunked.h"
#include "codec/header_check.h"
#include "codec/parse.h"
#include "parse_driver.h"

namespace vigil::http {
namespace {

using test::every_byte;
using test::parse_head;

TEST(RequestParser, MovePendingToALargeBuffer) {
  // A 16-byte client buffer, as client_header_buffer_size, then 64-byte ones.
  const std::string in = "GET /0123456789abcdef HTTP/1.1\r\nHost: example.com\r\nX: y\r\n\r\n";
  char small_mem[16];
  // The first large buffer ends two bytes into the second field line.
  char large_mem[2][53];
  Buf b;
  b.reset(small_mem, sizeof small_mem);
  std::size_t fed = 0;
  auto fill = [&] {
    while (b.last < b.end && fed < in.size()) *b.last++ = in[fed++];
  };
  fill();

  RequestParser p;
  RequestLine line;
  std::size_t used = 0;
  ParseStatus st = p.parse_request_line({b.pos, b.last}, used, line);
  b.pos += used;
  ASSERT_EQ(st, ParseStatus::kAgain);
  ASSERT_EQ(p.pending(), 16u);  // the whole buffer is the unfinished line

  Buf tiny;
  char tiny_mem[8];
  tiny.reset(tiny_mem, sizeof tiny_mem);
  EXPECT_FALSE(p.move_pending(b, tiny));  // does not fit: the server answers 414

  Buf large;
  large.reset(large_mem[0], sizeof large_mem[0]);
  ASSERT_TRUE(p.move_pending(b, large));
  EXPECT_EQ(large.pos - large.start, 16);
  EXPECT_EQ(std::string(large.start, large.last), in.substr(0, 16));
  b = large;
  fill();
  st = p.parse_request_line({b.pos, b.last}, used, line);
  b.pos += used;
  ASSERT_EQ(st, ParseStatus::kOk);
  EXPECT_EQ(line.target, "/0123456789abcdef");
  EXPECT_EQ(line.line.data(), large_mem[0]);

  // The first field fits, the second is cut: move only it.
  HeaderField host;
  st = p.parse_header({b.pos, b.last}, used, host);
  b.pos += used;
  ASSERT_EQ(st, ParseStatus::kOk);
  EXPECT_EQ(host.value, "example.com");
  HeaderField f;
  st = p.parse_header({b.pos, b.last}, used, f);
  b.pos += used;
  ASSERT_EQ(st, ParseStatus::kAgain);
  Buf large2;
  large2.reset(large_mem[1], sizeof large_mem[1]);
  ASSERT_TRUE(p.move_pending(b, large2));
  b = large2;
  fill();
  st = p.parse_header({b.pos, b.last}, used, f);
  b.pos += used;
  ASSERT_EQ(st, ParseStatus::kOk);
  EXPECT_EQ(f.name, "X");
  EXPECT_EQ(f.value, "y");
  EXPECT_EQ(f.name.data(), large_mem[1]);
  st = p.parse_header({b.pos, b.last}, used, f);
  EXPECT_EQ(st, ParseStatus::kHeadersDone);
  // Completed views still point into the buffers they completed in.
  EXPECT_EQ(line.target, "/0123456789abcdef");
  EXPECT_EQ(host.value, "example.com");
}

TEST(RequestParser, NothingPendingBetweenItems) {
  // One contiguous buffer, fed in three calls: the pending bytes of a call
  // are the ones right before the next call's input.
  const std::string_view in = "\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n";
  RequestParser p;
  RequestLine line;
  std::size_t used = 0;
  EXPECT_EQ(p.parse_request_line(in.substr(0, 4), used, line), ParseStatus::kAgain);
  EXPECT_EQ(p.pending(), 0u);  // empty lines are not kept
  EXPECT_EQ(p.parse_request_line(in.substr(4, 15), used, line), ParseStatus::kAgain);
  EXPECT_EQ(p.pending(), 15u);
  EXPECT_EQ(p.parse_request_line(in.substr(19), used, line), ParseStatus::kOk);
  EXPECT_EQ(used, 1u);
  EXPECT_EQ(p.pending(), 0u);
  EXPECT_EQ(line.line.data(), in.data() + 4);
  HeaderField f;
  EXPECT_EQ(p.parse_header(in.substr(20, 4), used, f), ParseStatus::kAgain);
  EXPECT_EQ(p.pending(), 4u);
}

// Parses one head from `in` starting at `at` with `p` (reset first).
std::size_t parse_one(RequestParser& p, std::string_view in, std::size_t at, RequestLine& line,
                      std::vector<HeaderField>& fields) {
  p.reset();
  fields.clear();
  std::size_t used = 0;
  if (p.parse_request_line(in.substr(at), used, line) != ParseStatus::kOk) return 0;
  at += used;
  for (;;) {
    HeaderField f;
    auto st = p.parse_header(in.substr(at), used, f);
    at += used;
    if (st == ParseStatus::kHeadersDone) return at;
    if (st != ParseStatus::kOk) return 0;
    fields.push_back(f);
  }
}

TEST(RequestParser, PipelinedRequestsStartRightAfterTheHead) {
  const std::string a = "GET /a HTTP/1.1\r\nHost: x\r\n\r\n";
  const std::string b = "GET /b HTTP/1.1\r\nHost: y\r\n\r\n";
  const std::string in = a + b;
  RequestParser p;
  RequestLine line;
  std::vector<HeaderField> fields;
  std::size_t end = parse_one(p, in, 0, line, fields);
  ASSERT_EQ(end, a.size());
  EXPECT_EQ(line.target, "/a");
  end = parse_one(p, in, end, line, fields);
  ASSERT_EQ(end, in.size());
  EXPECT_EQ(line.target, "/b");
  EXPECT_EQ(fields[0].value, "y");
  // The driver agrees, however the input is split.
  EXPECT_EQ(parse_head(in, every_byte(in.size())).consumed, a.size());
}

TEST(RequestParser, PipelinedAfterAContentLengthBody) {
  const std::string in =
      "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
      "GET /b HTTP/1.1\r\nHost: x\r\n\r\n";
  RequestParser p;
  RequestLine line;
  std::vector<HeaderField> fields;
  std::size_t end = parse_one(p, in, 0, line, fields);
  ASSERT_NE(end, 0u);
  auto check = check_headers(line, fields);
  ASSERT_TRUE(check.ok());
  ASSERT_EQ(check.content_length, 5);
  EXPECT_EQ(in.substr(end, 5), "hello");
  end = parse_one(p, in, end + 5, line, fields);
  EXPECT_EQ(end, in.size());
  EXPECT_EQ(line.target, "/b");
}

TEST(RequestParser, PipelinedAfterAChunkedBody) {
  const std::string in =
      "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nTrailer: t\r\n\r\n"
      "GET /b HTTP/1.1\r\nHost: x\r\n\r\n";
  RequestParser p;
  RequestLine line;
  std::vector<HeaderField> fields;
  std::size_t end = parse_one(p, in, 0, line, fields);
  ASSERT_NE(end, 0u);
  auto check = check_headers(line, fields);
  ASSERT_TRUE(check.ok());
  ASSERT_TRUE(check.chunked);
  ChunkedParser cp;
  std::string body;
  for (;;) {
    std::size_t used = 0;
    std::string_view data;
    auto st = cp.parse(std::string_view(in).substr(end), used, data);
    end += used;
    if (st == ChunkStatus::kData) {
      body.append(data);
      continue;
    }
    ASSERT_EQ(st, ChunkStatus::kDone);
    break;
  }
  EXPECT_EQ(body, "hello world");
  EXPECT_EQ(in.substr(end, 3), "GET");
  end = parse_one(p, in, end, line, fields);
  EXPECT_EQ(end, in.size());
  EXPECT_EQ(line.target, "/b");
}

}  // namespace
}  // namespace vigil::http
