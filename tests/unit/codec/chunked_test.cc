// Tests for src/http/chunked.cc: chunked bodies decoded whole, byte by byte
// and split at every offset; extensions, trailers, size overflow, limits, and
// the exact end of the body for a pipelined request.

#include "codec/chunked.h"

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

namespace vigil::http {
namespace {

struct Decoded {
  ChunkStatus status = ChunkStatus::kAgain;
  std::string body;
  std::size_t consumed = 0;
  std::uint64_t body_size = 0;
  bool operator==(const Decoded&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Decoded& d) {
  return os << "{status " << static_cast<int>(d.status) << ", body "
            << testing::PrintToString(d.body) << ", consumed " << d.consumed << "}";
}

// Feeds `in` in pieces ending at `cuts`. Each piece lives in its own heap
// buffer freed right after it is parsed: the decoder must never look back.
Decoded decode(const std::string& in, const std::vector<std::size_t>& cuts = {},
               ChunkedLimits limits = {}) {
  ChunkedParser p(limits);
  Decoded out;
  std::size_t fed = 0;
  std::vector<std::size_t> ends = cuts;
  ends.push_back(in.size());
  for (std::size_t end : ends) {
    const std::size_t n = end - fed;
    auto piece = std::make_unique<char[]>(n + 1);
    in.copy(piece.get(), n, fed);
    fed = end;
    std::string_view rest(piece.get(), n);
    while (true) {
      std::size_t used = 0;
      std::string_view data;
      const auto st = p.parse(rest, used, data);
      rest.remove_prefix(used);
      out.consumed += used;
      if (st == ChunkStatus::kData) {
        EXPECT_FALSE(data.empty());
        EXPECT_EQ(data.data() + data.size(), rest.data());  // data ends where `used` ends
        out.body.append(data);
        continue;
      }
      if (st == ChunkStatus::kAgain) break;
      out.status = st;
      out.body_size = p.body_size();
      return out;
    }
  }
  out.body_size = p.body_size();
  return out;
}

std::vector<std::size_t> every_byte(std::size_t n) {
  std::vector<std::size_t> cuts;
  for (std::size_t i = 1; i < n; ++i) cuts.push_back(i);
  return cuts;
}

void expect_splits_agree(const std::string& in, ChunkedLimits limits = {}) {
  SCOPED_TRACE(testing::PrintToString(in));
  const auto whole = decode(in, {}, limits);
  EXPECT_EQ(decode(in, every_byte(in.size()), limits), whole);
  for (std::size_t k = 1; k < in.size(); ++k) {
    ASSERT_EQ(decode(in, {k}, limits), whole) << "split at " << k;
  }
  std::mt19937 rng(static_cast<unsigned>(in.size()));
  for (int round = 0; round < 20; ++round) {
    std::vector<std::size_t> cuts;
    for (std::size_t at = 1 + rng() % 7; at < in.size(); at += 1 + rng() % 7) cuts.push_back(at);
    ASSERT_EQ(decode(in, cuts, limits), whole);
  }
}

struct Valid {
  std::string in;
  std::string body;
};

// Each is followed by the start of a pipelined request, which must not be consumed.
const std::string kNext = "GET / HTTP/1.1\r\n";

std::vector<Valid> valid() {
  return {
      {"0\r\n\r\n", ""},
      {"5\r\nhello\r\n0\r\n\r\n", "hello"},
      {"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", "hello world"},
      {"a\r\n0123456789\r\nA\r\nabcdefghij\r\nF\r\n0123456789abcde\r\n0\r\n\r\n",
       "0123456789abcdefghij0123456789abcde"},
      {"0005\r\nhello\r\n000\r\n\r\n", "hello"},
      {"5;a=b;c=\"d e\"\r\nhello\r\n0;last\r\n\r\n", "hello"},
      {"5 ;a\r\nhello\r\n0\t;x\r\n\r\n", "hello"},  // BWS before ';'
      {"5\r\nhello\r\n0\r\nX-Trailer: v\r\nY:\r\nZ: \t a b \r\n\r\n", "hello"},
      {"4\r\n\r\n\r\n\r\n0\r\n\r\n", "\r\n\r\n"},  // data is opaque
      {std::string("1\r\n\0\r\n0\r\n\r\n", 11), std::string(1, '\0')},
      {"3\r\n\xff\xfe\x80\r\n0\r\n\r\n", "\xff\xfe\x80"},
  };
}

TEST(ChunkedParser, Valid) {
  for (const auto& v : valid()) {
    SCOPED_TRACE(testing::PrintToString(v.in));
    const auto got = decode(v.in + kNext);
    EXPECT_EQ(got.status, ChunkStatus::kDone);
    EXPECT_EQ(got.body, v.body);
    EXPECT_EQ(got.body_size, v.body.size());
    EXPECT_EQ(got.consumed, v.in.size());  // the next request starts right there
  }
}

TEST(ChunkedParser, ValidAnySplit) {
  for (const auto& v : valid()) expect_splits_agree(v.in + kNext);
}

TEST(ChunkedParser, IncompleteIsAgain) {
  for (const auto& v : valid()) {
    for (std::size_t n = 0; n < v.in.size(); ++n) {
      ASSERT_EQ(decode(v.in.substr(0, n)).status, ChunkStatus::kAgain)
          << testing::PrintToString(v.in.substr(0, n));
    }
  }
}

TEST(ChunkedParser, DataRangesPointIntoTheInput) {
  const std::string in = "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
  ChunkedParser p;
  std::string_view rest = in;
  std::size_t used = 0;
  std::string_view data;
  ASSERT_EQ(p.parse(rest, used, data), ChunkStatus::kData);
  EXPECT_EQ(data.data(), in.data() + 3);
  EXPECT_EQ(data, "abc");
  rest.remove_prefix(used);
  ASSERT_EQ(p.parse(rest, used, data), ChunkStatus::kData);
  EXPECT_EQ(data.data(), in.data() + 11);
  rest.remove_prefix(used);
  ASSERT_EQ(p.parse(rest, used, data), ChunkStatus::kDone);
  EXPECT_TRUE(p.done());
  rest.remove_prefix(used);
  EXPECT_TRUE(rest.empty());
  EXPECT_EQ(p.parse("more", used, data), ChunkStatus::kDone);  // stays done
  EXPECT_EQ(used, 0u);
  p.reset();
  EXPECT_FALSE(p.done());
  EXPECT_EQ(p.body_size(), 0u);
}

struct Invalid {
  std::string in;
  ChunkStatus status;
};

std::vector<Invalid> invalid() {
  const auto bad = ChunkStatus::kBadRequest;
  return {
      {"\r\n", bad},  // no size
      {"x\r\n", bad},
      {";a\r\n", bad},
      {"-5\r\n", bad},
      {"+5\r\n", bad},
      {"0x5\r\n", bad},
      {" 5\r\n", bad},
      {"5 \r\nhello\r\n", bad},  // BWS must lead to ';'
      {"5 x\r\n", bad},
      {"5\nhello\r\n0\r\n\r\n", bad},  // bare LF: refused inside a chunked body
      {"5\r\nhello\n0\r\n\r\n", bad},
      {"5\r\nhello\r0\r\n\r\n", bad},
      {"5\r\nhelloX\r\n0\r\n\r\n", bad},
      {"5\r\nhello0\r\n\r\n", bad},
      {"5\rx", bad},
      {"5;a\x01\r\nhello\r\n", bad},
      {"5;a\nhello\r\n", bad},
      {"0\r\nBad Trailer: x\r\n\r\n", bad},
      {"0\r\nX\r\n\r\n", bad},
      {"0\r\nX : y\r\n\r\n", bad},
      {"0\r\n: y\r\n\r\n", bad},
      {"0\r\nX: a\r\n b\r\n\r\n", bad},  // obs-fold in a trailer
      {"0\r\nX: a\x7f\r\n\r\n", bad},
      {"0\r\nX: a\rb\r\n\r\n", bad},
      {"0\r\n\r\r\n", bad},
      {"0\r\n\n", bad},
      {"0\r\nX: y\n\r\n", bad},
      // chunk sizes must stay below 2^63
      {"8000000000000000\r\n", bad},
      {"10000000000000000\r\n", bad},
      {"ffffffffffffffffffff\r\n", bad},
  };
}

TEST(ChunkedParser, Invalid) {
  for (const auto& v : invalid()) {
    SCOPED_TRACE(testing::PrintToString(v.in));
    ChunkedParser p;
    std::string_view rest = v.in;
    std::size_t used = 0;
    std::string_view data;
    ChunkStatus st;
    while ((st = p.parse(rest, used, data)) == ChunkStatus::kData) rest.remove_prefix(used);
    EXPECT_EQ(st, v.status);
    EXPECT_STRNE(p.error(), "");
    EXPECT_EQ(p.parse("0\r\n\r\n", used, data), v.status);  // errors are sticky
  }
}

TEST(ChunkedParser, InvalidAnySplit) {
  for (const auto& v : invalid()) expect_splits_agree(v.in);
}

TEST(ChunkedParser, LargestChunkSizeIsAccepted) {
  const auto got = decode("7fffffffffffffff\r\nabc");
  EXPECT_EQ(got.status, ChunkStatus::kAgain);
  EXPECT_EQ(got.body, "abc");
  EXPECT_EQ(got.body_size, 0x7fffffffffffffffu);
  EXPECT_EQ(decode("00000000000000007fffffffffffffff\r\n").status, ChunkStatus::kAgain);
}

TEST(ChunkedParser, BodyLimitGives413) {
  ChunkedLimits limits;
  limits.max_body = 10;
  auto got = decode("5\r\nhello\r\n5\r\nworld\r\n0\r\n\r\n", {}, limits);
  EXPECT_EQ(got.status, ChunkStatus::kDone);
  EXPECT_EQ(got.body, "helloworld");
  got = decode("5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", {}, limits);
  EXPECT_EQ(got.status, ChunkStatus::kTooLarge);
  EXPECT_EQ(got.body, "hello");  // refused before any byte of the chunk that overflows
  got = decode("7fffffffffffffff\r\n", {}, limits);
  EXPECT_EQ(got.status, ChunkStatus::kTooLarge);
  expect_splits_agree("5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", limits);
}

TEST(ChunkedParser, ExtensionsAndTrailersAreBounded) {
  ChunkedLimits limits;
  limits.max_size_line = 16;
  limits.max_trailers = 32;
  // The size line counts digits, extensions and the CRLF.
  EXPECT_EQ(decode("5;" + std::string(12, 'x') + "\r\nhello\r\n0\r\n\r\n", {}, limits).status,
            ChunkStatus::kDone);
  EXPECT_EQ(decode("5;" + std::string(13, 'x') + "\r\nhello\r\n0\r\n\r\n", {}, limits).status,
            ChunkStatus::kBadRequest);
  EXPECT_EQ(decode(std::string(20, '0') + "5\r\n", {}, limits).status, ChunkStatus::kBadRequest);
  // The trailer section counts every byte after the last chunk's line.
  const std::string t30 = "X: " + std::string(25, 'v') + "\r\n";  // 30 bytes
  EXPECT_EQ(decode("0\r\n" + t30 + "\r\n", {}, limits).status, ChunkStatus::kDone);
  EXPECT_EQ(decode("0\r\n" + t30 + "Y\r\n", {}, limits).status, ChunkStatus::kBadRequest);
  // A long extension is bounded even without any CR.
  EXPECT_EQ(decode("5;" + std::string(100000, 'x')).status, ChunkStatus::kBadRequest);
}

}  // namespace
}  // namespace vigil::http
