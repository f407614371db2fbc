// Tests for src/http/filters/range.cc: byte ranges against a size, 416,
// the values we ignore, and several ranges.

#include "http/filters/range.h"

#include <gtest/gtest.h>

#include <limits>
#include <string>

namespace vigil::http {
namespace {

constexpr auto kIgnore = RangeKind::kIgnore;
constexpr auto kOk = RangeKind::kSatisfiable;
constexpr auto k416 = RangeKind::kUnsatisfiable;
constexpr std::uint64_t kAny = std::numeric_limits<std::uint64_t>::max();

struct Case {
  const char* value;
  std::int64_t size;
  RangeKind kind;
  std::int64_t first;  // of the first range
  std::int64_t last;
  std::size_t count = 1;
};

// clang-format off
const Case kCases[] = {
    // int-range (RFC 9110 §14.1.2)
    {"bytes=0-0", 100, kOk, 0, 0},
    {"bytes=0-99", 100, kOk, 0, 99},
    {"bytes=10-19", 100, kOk, 10, 19},
    {"bytes=10-1000", 100, kOk, 10, 99},  // last-pos clamped
    {"bytes=99-99", 100, kOk, 99, 99},
    {"bytes=50-", 100, kOk, 50, 99},
    {"bytes=0-", 100, kOk, 0, 99},
    {"bytes=0-9223372036854775807", 100, kOk, 0, 99},
    {"bytes=0-99999999999999999999999", 100, kOk, 0, 99},  // saturates
    {"bytes=007-008", 100, kOk, 7, 8},
    // suffix-range
    {"bytes=-1", 100, kOk, 99, 99},
    {"bytes=-10", 100, kOk, 90, 99},
    {"bytes=-100", 100, kOk, 0, 99},
    {"bytes=-1000", 100, kOk, 0, 99},  // longer than the file: all of it
    {"bytes=-99999999999999999999999", 100, kOk, 0, 99},
    // unit is case-insensitive, list syntax allows OWS and empty elements,
    // and spaces inside an element are taken as nginx takes them
    {"BYTES=1-2", 100, kOk, 1, 2},
    {"Bytes= 1-2 ", 100, kOk, 1, 2},
    {"bytes=1-2,", 100, kOk, 1, 2},
    {"bytes=, ,1-2", 100, kOk, 1, 2},
    {"bytes=1 -2", 100, kOk, 1, 2},
    {"bytes=1- 2", 100, kOk, 1, 2},
    // several ranges, in the order asked (RFC 9110 §14.6)
    {"bytes=0-1,3-4", 100, kOk, 0, 1, 2},
    {"bytes=0-1, -5", 100, kOk, 0, 1, 2},
    {"bytes=90-99, 0-9", 100, kOk, 90, 99, 2},
    {"bytes=0-9, 5-14", 100, kOk, 0, 9, 2},  // overlapping, within the size
    {"bytes=100-, 0-0", 100, kOk, 0, 0, 1},  // the unsatisfiable one is left out
    {"bytes=5-4, 1-2", 100, kOk, 1, 2, 1},
    // unsatisfiable: 416 (RFC 9110 §14.1.1, §15.5.17)
    {"bytes=100-", 100, k416, 0, -1, 0},
    {"bytes=100-200", 100, k416, 0, -1, 0},
    {"bytes=99999999999999999999999-", 100, k416, 0, -1, 0},
    {"bytes=-0", 100, k416, 0, -1, 0},
    {"bytes=5-4", 100, k416, 0, -1, 0},  // last < first: invalid, selects nothing
    {"bytes=0-0", 0, k416, 0, -1, 0},
    {"bytes=0-", 0, k416, 0, -1, 0},
    {"bytes=-5", 0, kIgnore, 0, -1, 0},  // empty file: serve it whole
    // syntax errors: 416, as nginx
    {"bytes=,", 100, kIgnore, 0, -1, 0},  // no range at all
    {"bytes=", 100, kIgnore, 0, -1, 0},
    {"bytes=-", 100, k416, 0, -1, 0},
    {"bytes=--5", 100, k416, 0, -1, 0},
    {"bytes=a-b", 100, k416, 0, -1, 0},
    {"bytes=alpha", 100, k416, 0, -1, 0},
    {"bytes=10-alpha", 100, k416, 0, -1, 0},
    {"bytes=1-2x", 100, k416, 0, -1, 0},
    {"bytes=1x-2", 100, k416, 0, -1, 0},
    {"bytes=+1-2", 100, k416, 0, -1, 0},
    {"bytes=-+5", 100, k416, 0, -1, 0},
    {"bytes=1", 100, k416, 0, -1, 0},
    {"bytes=10-11 12-", 100, k416, 0, -1, 0},
    {"bytes=0-1, x", 100, k416, 0, -1, 0},
    // ignored: 200 with the whole file
    {"bytes=0-1000, 0-0", 100, kIgnore, 0, -1, 0},  // more than the whole
    {"bytes =1-2", 100, kIgnore, 0, -1, 0},
    {"bytes1-2", 100, kIgnore, 0, -1, 0},
    {"items=1-2", 100, kIgnore, 0, -1, 0},
    {"", 100, kIgnore, 0, -1, 0},
    {"=1-2", 100, kIgnore, 0, -1, 0},
};
// clang-format on

TEST(Range, Table) {
  for (const auto& c : kCases) {
    SCOPED_TRACE(std::string(c.value) + " of " + std::to_string(c.size));
    ByteRange br;
    const auto got = parse_ranges(c.value, c.size, kAny, &br, 1);
    EXPECT_EQ(got.kind, c.kind);
    if (c.kind != kOk) continue;
    EXPECT_EQ(got.count, c.count);
    EXPECT_EQ(br.first, c.first);
    EXPECT_EQ(br.last, c.last);
  }
}

TEST(Range, SeveralRangesAreAllStoredWithTheirTotal) {
  ByteRange out[4];
  const auto got = parse_ranges("bytes=0-9, -10, 100000-, 10-19", 1000, kAny, out, 4);
  ASSERT_EQ(got.kind, kOk);
  ASSERT_EQ(got.count, 3u);
  EXPECT_EQ(got.total, 30);
  EXPECT_EQ(out[0].first, 0);
  EXPECT_EQ(out[0].last, 9);
  EXPECT_EQ(out[1].first, 990);
  EXPECT_EQ(out[1].last, 999);
  EXPECT_EQ(out[2].first, 10);
  EXPECT_EQ(out[2].last, 19);
  // Counted past the room given.
  EXPECT_EQ(parse_ranges("bytes=0-0,2-2,4-4", 10, kAny, out, 1).count, 3u);
}

TEST(Range, MoreThanMaxRangesIsIgnored) {
  ByteRange out[3];
  EXPECT_EQ(parse_ranges("bytes=0-9, -10", 1000, 2, out, 3).kind, kOk);
  EXPECT_EQ(parse_ranges("bytes=0-9, -10, 10000-", 1000, 2, out, 3).kind, kOk);
  EXPECT_EQ(parse_ranges("bytes=0-9, -10, 10-19", 1000, 2, out, 3).kind, kIgnore);
  EXPECT_EQ(parse_ranges("bytes=0-9", 1000, 1, out, 3).kind, kOk);
}

TEST(Range, SatisfiableRangesStayInsideTheFile) {
  for (std::int64_t size = 0; size < 20; ++size) {
    for (int a = -1; a < 25; ++a) {
      for (int b = -1; b < 25; ++b) {
        std::string v = "bytes=";
        if (a >= 0) v += std::to_string(a);
        v += "-";
        if (b >= 0) v += std::to_string(b);
        ByteRange br;
        const auto got = parse_ranges(v, size, kAny, &br, 1);
        if (got.kind != kOk) continue;
        ASSERT_EQ(got.count, 1u) << v;
        ASSERT_GE(br.first, 0) << v;
        ASSERT_LE(br.first, br.last) << v;
        ASSERT_LT(br.last, size) << v;
      }
    }
  }
}

}  // namespace
}  // namespace vigil::http
