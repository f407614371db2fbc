#pragma once
// Test driver for http::RequestParser: feeds a request head in pieces, the way
// the server does, optionally moving the pending bytes to a new buffer before
// every piece (the large-header-buffer path), and records what came out as
// owned strings so results of different feedings can be compared.

#include <cstddef>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "codec/parse.h"

namespace vigil::http::test {

struct ParsedHead {
  ParseStatus status = ParseStatus::kAgain;  // kHeadersDone, an error, or kAgain (input ran out)
  std::string method;
  Method method_id = Method::kOther;
  TargetForm form = TargetForm::kOrigin;
  std::string target, scheme, host, port, path, query;
  bool has_query = false;
  int version = 0;
  std::vector<std::pair<std::string, std::string>> headers;
  std::vector<HeaderId> ids;
  std::size_t consumed = 0;  // bytes of input consumed when the head ended (or failed)

  bool operator==(const ParsedHead&) const = default;
};

inline std::ostream& operator<<(std::ostream& os, const ParsedHead& p) {
  os << "{status " << static_cast<int>(p.status) << ", " << p.method << " [" << p.target << "] v"
     << p.version << ", path [" << p.path << "] query [" << p.query << "] host [" << p.host
     << "] port [" << p.port << "], " << p.headers.size() << " headers, consumed " << p.consumed
     << "}";
  return os;
}

// Buffers a relocated head was parsed in, kept for views handed to the caller.
inline std::vector<std::unique_ptr<char[]>>& kept_buffers() {
  static std::vector<std::unique_ptr<char[]>> keep;
  return keep;
}

// Feeds `input` in pieces ending at `cuts` (increasing offsets; the end of
// the input is always a cut). Without `relocate` the parser reads `input`
// itself. With it, every piece goes into a fresh buffer that first receives
// the parser's pending bytes through move_pending(). `line_out`/`fields_out`
// receive the views: into `input`, or in relocate mode into buffers kept until
// a later relocating call that asks for no views.
inline ParsedHead parse_head(const std::string& input, const std::vector<std::size_t>& cuts,
                             bool relocate = false, ParserLimits limits = {},
                             RequestLine* line_out = nullptr,
                             std::vector<HeaderField>* fields_out = nullptr) {
  RequestParser parser(limits);
  ParsedHead out;
  RequestLine line;
  bool in_headers = false;

  Buf cur;  // in relocate mode: the buffer being parsed
  const char* pos = input.data();
  const char* last = input.data();

  std::size_t fed = 0;
  std::vector<std::size_t> ends = cuts;
  ends.push_back(input.size());
  for (std::size_t end : ends) {
    if (end < fed || end > input.size()) continue;
    if (relocate) {
      const std::size_t piece = end - fed;
      const std::size_t cap = parser.pending() + piece + 1;
      auto mem = std::make_unique<char[]>(cap);
      Buf next;
      next.reset(mem.get(), cap);
      if (cur.start != nullptr) {
        cur.pos = cur.start + (pos - cur.start);
        if (!parser.move_pending(cur, next)) return out;
      }
      for (std::size_t k = 0; k < piece; ++k) *next.last++ = input[fed + k];
      if (line_out == nullptr && fields_out == nullptr) kept_buffers().clear();
      kept_buffers().push_back(std::move(mem));
      cur = next;
      pos = cur.pos;
      last = cur.last;
    } else {
      last = input.data() + end;
    }
    fed = end;

    while (pos < last) {
      std::size_t used = 0;
      ParseStatus st;
      if (!in_headers) {
        st = parser.parse_request_line({pos, last}, used, line);
      } else {
        HeaderField f;
        st = parser.parse_header({pos, last}, used, f);
        if (st == ParseStatus::kOk) {
          out.headers.emplace_back(f.name, f.value);
          out.ids.push_back(f.id);
          if (fields_out != nullptr) fields_out->push_back(f);
        }
      }
      pos += used;
      out.consumed += used;
      if (st == ParseStatus::kAgain) break;
      if (st == ParseStatus::kOk) {
        if (!in_headers) {
          in_headers = true;
          out.method = line.method_name;
          out.method_id = line.method;
          out.form = line.form;
          out.target = line.target;
          out.scheme = line.scheme;
          out.host = line.host;
          out.port = line.port;
          out.path = line.path;
          out.query = line.query;
          out.has_query = line.has_query;
          out.version = line.version;
          if (line_out != nullptr) *line_out = line;
        }
        continue;
      }
      out.status = st;  // kHeadersDone or an error: the head is over
      return out;
    }
  }
  return out;  // kAgain: the input ended inside the head
}

inline ParsedHead parse_whole(const std::string& in, ParserLimits limits = {}) {
  return parse_head(in, {}, false, limits);
}

// Cut points after every byte.
inline std::vector<std::size_t> every_byte(std::size_t n) {
  std::vector<std::size_t> cuts;
  for (std::size_t i = 1; i < n; ++i) cuts.push_back(i);
  return cuts;
}

// The result of parsing `in` whole must equal the result of every other way
// of feeding it: byte by byte, split once at every offset, and in random
// pieces; each with and without moving the pending bytes to a new buffer.
inline void expect_splits_agree(const std::string& in, ParserLimits limits = {}) {
  SCOPED_TRACE(testing::PrintToString(in));
  const auto whole = parse_whole(in, limits);
  EXPECT_EQ(parse_head(in, every_byte(in.size()), false, limits), whole);
  EXPECT_EQ(parse_head(in, every_byte(in.size()), true, limits), whole);
  for (std::size_t k = 1; k < in.size(); ++k) {
    ASSERT_EQ(parse_head(in, {k}, false, limits), whole) << "split at " << k;
    ASSERT_EQ(parse_head(in, {k}, true, limits), whole) << "relocated at " << k;
  }
  std::mt19937 rng(static_cast<unsigned>(in.size()) * 2654435761u);
  for (int round = 0; round < 20; ++round) {
    std::vector<std::size_t> cuts;
    for (std::size_t at = 1 + rng() % 9; at < in.size(); at += 1 + rng() % 9) cuts.push_back(at);
    ASSERT_EQ(parse_head(in, cuts, false, limits), whole);
    ASSERT_EQ(parse_head(in, cuts, true, limits), whole);
  }
}

}  // namespace vigil::http::test
