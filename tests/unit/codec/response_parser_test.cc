// The response head parser: status lines, fields, framing decisions, and the
// malformed responses a proxy must refuse; every input also split at every
// byte boundary.
#include "codec/response_parser.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace vigil::http {
namespace {

struct Parsed {
  ResponseParse result = ResponseParse::kAgain;  // kOk: head + finish succeeded
  ResponseHead head;
  std::vector<std::pair<std::string, std::string>> fields;
  std::size_t body_offset = 0;
  std::string error;
  std::string reason;  // a copy: head.reason points into the input
};

// Feeds `in` in pieces of `step` bytes (the unconsumed rest is carried over,
// as a proxy's buffer would keep it).
Parsed parse(const std::string& in, bool head_request = false, std::size_t step = 0) {
  Parsed out;
  ResponseParser p;
  std::size_t pos = 0;
  std::size_t avail = step == 0 ? in.size() : std::min(step, in.size());
  bool line_done = false;
  for (;;) {
    std::string_view view(in.data() + pos, avail - pos);
    std::size_t used = 0;
    ResponseParse st;
    if (!line_done) {
      st = p.parse_status_line(view, used, out.head);
      pos += used;
      if (st == ResponseParse::kOk) {
        out.reason = std::string(out.head.reason);
        line_done = true;
        continue;
      }
    } else {
      HeaderField f;
      st = p.parse_header(view, used, f);
      pos += used;
      if (st == ResponseParse::kOk) {
        out.fields.emplace_back(std::string(f.name), std::string(f.value));
        continue;
      }
      if (st == ResponseParse::kHeadersDone) {
        out.body_offset = pos;
        out.result = p.finish(out.head, head_request);
        out.error = p.error();
        return out;
      }
    }
    if (st == ResponseParse::kInvalid) {
      out.result = st;
      out.error = p.error();
      return out;
    }
    if (avail == in.size()) return out;  // kAgain at the end
    avail = std::min(in.size(), avail + (step == 0 ? in.size() : step));
  }
}

Parsed parse_all_ways(const std::string& in, bool head_request = false) {
  Parsed whole = parse(in, head_request);
  for (std::size_t step = 1; step < in.size(); ++step) {
    Parsed split = parse(in, head_request, step);
    EXPECT_EQ(split.result, whole.result) << "step " << step;
    EXPECT_EQ(split.fields, whole.fields) << "step " << step;
    EXPECT_EQ(split.head.status, whole.head.status) << "step " << step;
    EXPECT_EQ(split.reason, whole.reason) << "step " << step;
  }
  return whole;
}

TEST(ResponseParser, SimpleWithLength) {
  Parsed r = parse_all_ways("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A:  b c \r\n\r\nhello");
  ASSERT_EQ(r.result, ResponseParse::kOk) << r.error;
  EXPECT_EQ(r.head.version, 1001);
  EXPECT_EQ(r.head.status, 200);
  EXPECT_EQ(r.reason, "OK");
  EXPECT_EQ(r.head.body, BodyKind::kLength);
  EXPECT_EQ(r.head.content_length, 5);
  EXPECT_TRUE(r.head.keep_alive);
  ASSERT_EQ(r.fields.size(), 2u);
  EXPECT_EQ(r.fields[1].second, "b c");
  EXPECT_EQ(r.body_offset, 50u);  // "hello" follows
}

TEST(ResponseParser, Chunked) {
  Parsed r = parse_all_ways("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
  ASSERT_EQ(r.result, ResponseParse::kOk) << r.error;
  EXPECT_EQ(r.head.body, BodyKind::kChunked);
  r = parse_all_ways("HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n");
  ASSERT_EQ(r.result, ResponseParse::kOk) << r.error;
  EXPECT_EQ(r.head.body, BodyKind::kChunked);
}

// A transfer coding other than chunked cannot be taken off by a proxy, and
// its name (a hop-by-hop field) does not reach the client: the body would
// arrive still coded, as if it were the content. Invalid (502), as nginx's
// "upstream sent unknown Transfer-Encoding".
TEST(ResponseParser, OtherTransferCodingsAreInvalid) {
  for (const char* te : {"foo", "gzip, chunked", "chunked, gzip", "identity"}) {
    Parsed r = parse_all_ways(std::string("HTTP/1.1 200 OK\r\nTransfer-Encoding: ") + te +
                              "\r\n\r\n");
    EXPECT_EQ(r.result, ResponseParse::kInvalid) << te;
    EXPECT_NE(r.error.find("Transfer-Encoding"), std::string::npos) << te << ": " << r.error;
  }
}

TEST(ResponseParser, CloseDelimited) {
  Parsed r = parse_all_ways("HTTP/1.1 200 OK\r\n\r\n");
  ASSERT_EQ(r.result, ResponseParse::kOk);
  EXPECT_EQ(r.head.body, BodyKind::kClose);
  EXPECT_FALSE(r.head.keep_alive);
}

TEST(ResponseParser, NoBodyStatusesAndHead) {
  for (const char* s :
       {"HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n",
        "HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n", "HTTP/1.1 100 Continue\r\n\r\n",
        "HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\n"
        "Upgrade: websocket\r\n\r\n"}) {
    Parsed r = parse_all_ways(s);
    ASSERT_EQ(r.result, ResponseParse::kOk) << s;
    EXPECT_EQ(r.head.body, BodyKind::kNone) << s;
  }
  Parsed r = parse_all_ways("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n", true);
  EXPECT_EQ(r.head.body, BodyKind::kNone);
  EXPECT_TRUE(r.head.keep_alive);
  r = parse(
      "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n");
  EXPECT_TRUE(r.head.connection_upgrade);
  EXPECT_TRUE(r.head.has_upgrade);
}

TEST(ResponseParser, Persistence) {
  EXPECT_FALSE(
      parse("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n").head.keep_alive);
  EXPECT_FALSE(parse("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n").head.keep_alive);
  EXPECT_TRUE(parse("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n")
                  .head.keep_alive);
}

TEST(ResponseParser, LenientStatusLines) {
  Parsed r = parse_all_ways("HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n");
  ASSERT_EQ(r.result, ResponseParse::kOk) << r.error;
  EXPECT_EQ(r.reason, "");
  r = parse_all_ways("HTTP/1.1 404 \r\n\r\n");
  ASSERT_EQ(r.result, ResponseParse::kOk) << r.error;
  EXPECT_EQ(r.reason, "");
  r = parse_all_ways("HTTP/1.1 200 OK\nContent-Length: 0\n\n");
  ASSERT_EQ(r.result, ResponseParse::kOk) << r.error;
  EXPECT_EQ(r.reason, "OK");
}

TEST(ResponseParser, Invalid) {
  const char* bad[] = {
      "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
      "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n",
      "HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\n\r\n",
      "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
      "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n",
      "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n",
      "HTTP/1.1 200 OK\r\nX-A: a\r\n folded\r\n\r\n",
      "HTTP/1.1 200 OK\r\nX-A : a\r\n\r\n",
      "HTTP/1.1 200 OK\r\nX-A: a\x01\r\n\r\n",
      "HTTP/1.1 200 OK\r\nX-A: a\rb\r\n\r\n",
      "HTTP/1.1 200 OK\r\nX A: a\r\n\r\n",
      "HTTP/2.0 200 OK\r\n\r\n",
      "HTTP/1.1 99 Low\r\n\r\n",
      "HTTP/1.1 600 High\r\n\r\n",
      "HTTP/1.1 20 OK\r\n\r\n",
      "HTTP/1.1 2000 OK\r\n\r\n",
      "HTTP/1.1  200 OK\r\n\r\n",
      "http/1.1 200 OK\r\n\r\n",
      "HTTP/1.1 200 O\x01K\r\n\r\n",
      "HTTP/1.1 200 OK\r\r\n\r\n",
      "\r\nHTTP/1.1 200 OK\r\n\r\n",
      "ICY 200 OK\r\n\r\n",
  };
  for (const char* s : bad) {
    Parsed r = parse_all_ways(s);
    EXPECT_EQ(r.result, ResponseParse::kInvalid) << s;
    EXPECT_FALSE(r.error.empty()) << s;
  }
}

TEST(ResponseParser, TooLongLine) {
  ResponseParser p(64);
  ResponseHead h;
  std::size_t used = 0;
  std::string line = "HTTP/1.1 200 " + std::string(100, 'x');
  EXPECT_EQ(p.parse_status_line(line, used, h), ResponseParse::kInvalid);
}

TEST(ResponseParser, ResetForTheFinalResponseAfter1xx) {
  std::string in =
      "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok";
  ResponseParser p;
  ResponseHead h;
  std::size_t used = 0, pos = 0;
  ASSERT_EQ(p.parse_status_line(in, used, h), ResponseParse::kOk);
  pos += used;
  HeaderField f;
  ASSERT_EQ(p.parse_header(std::string_view(in).substr(pos), used, f), ResponseParse::kHeadersDone);
  pos += used;
  ASSERT_EQ(p.finish(h, false), ResponseParse::kOk);
  EXPECT_EQ(h.status, 100);
  p.reset();
  ASSERT_EQ(p.parse_status_line(std::string_view(in).substr(pos), used, h), ResponseParse::kOk);
  pos += used;
  ASSERT_EQ(p.parse_header(std::string_view(in).substr(pos), used, f), ResponseParse::kOk);
  pos += used;
  ASSERT_EQ(p.parse_header(std::string_view(in).substr(pos), used, f), ResponseParse::kHeadersDone);
  pos += used;
  ASSERT_EQ(p.finish(h, false), ResponseParse::kOk);
  EXPECT_EQ(h.status, 201);
  EXPECT_EQ(h.body, BodyKind::kLength);
  EXPECT_EQ(in.substr(pos), "ok");
}

}  // namespace
}  // namespace vigil::http
