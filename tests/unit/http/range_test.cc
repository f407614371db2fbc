// Tests for src/http/range.cc: one byte range against a file size, 416, and
// the values we ignore.

#include "http/filters/range.h"

#include <gtest/gtest.h>

#include <string>

namespace vigil::http {
namespace {

constexpr auto kIgnore = RangeKind::kIgnore;
constexpr auto kOk = RangeKind::kSatisfiable;
constexpr auto k416 = RangeKind::kUnsatisfiable;

struct Case {
  const char* value;
  std::int64_t size;
  RangeKind kind;
  std::int64_t first;
  std::int64_t last;
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
    // unit is case-insensitive, list syntax allows OWS and empty elements
    {"BYTES=1-2", 100, kOk, 1, 2},
    {"Bytes= 1-2 ", 100, kOk, 1, 2},
    {"bytes=1-2,", 100, kOk, 1, 2},
    {"bytes=, ,1-2", 100, kOk, 1, 2},
    // unsatisfiable: 416 (RFC 9110 §14.1.1, §15.5.17)
    {"bytes=100-", 100, k416, 0, -1},
    {"bytes=100-200", 100, k416, 0, -1},
    {"bytes=99999999999999999999999-", 100, k416, 0, -1},
    {"bytes=-0", 100, k416, 0, -1},
    {"bytes=0-0", 0, k416, 0, -1},
    {"bytes=0-", 0, k416, 0, -1},
    {"bytes=-5", 0, kIgnore, 0, -1},  // empty file: serve it whole
    // ignored: 200 with the whole file (RFC 9110 §14.2 allows it)
    {"bytes=0-1,3-4", 100, kIgnore, 0, -1},  // several ranges
    {"bytes=0-1, -5", 100, kIgnore, 0, -1},
    {"bytes=5-4", 100, kIgnore, 0, -1},  // last < first: invalid
    {"bytes=", 100, kIgnore, 0, -1},
    {"bytes=,", 100, kIgnore, 0, -1},
    {"bytes=-", 100, kIgnore, 0, -1},
    {"bytes=--5", 100, kIgnore, 0, -1},
    {"bytes=a-b", 100, kIgnore, 0, -1},
    {"bytes=1-2x", 100, kIgnore, 0, -1},
    {"bytes=1x-2", 100, kIgnore, 0, -1},
    {"bytes=1 -2", 100, kIgnore, 0, -1},
    {"bytes=1- 2", 100, kIgnore, 0, -1},
    {"bytes=+1-2", 100, kIgnore, 0, -1},
    {"bytes=-+5", 100, kIgnore, 0, -1},
    {"bytes=1", 100, kIgnore, 0, -1},
    {"bytes =1-2", 100, kIgnore, 0, -1},
    {"bytes1-2", 100, kIgnore, 0, -1},
    {"items=1-2", 100, kIgnore, 0, -1},
    {"", 100, kIgnore, 0, -1},
    {"=1-2", 100, kIgnore, 0, -1},
};
// clang-format on

TEST(Range, Table) {
  for (const auto& c : kCases) {
    SCOPED_TRACE(std::string(c.value) + " of " + std::to_string(c.size));
    const auto got = parse_range(c.value, c.size);
    EXPECT_EQ(got.kind, c.kind);
    if (c.kind != kOk) continue;
    EXPECT_EQ(got.first, c.first);
    EXPECT_EQ(got.last, c.last);
    EXPECT_EQ(got.length(), c.last - c.first + 1);
  }
}

TEST(Range, SatisfiableRangesStayInsideTheFile) {
  for (std::int64_t size = 0; size < 20; ++size) {
    for (int a = -1; a < 25; ++a) {
      for (int b = -1; b < 25; ++b) {
        std::string v = "bytes=";
        if (a >= 0) v += std::to_string(a);
        v += "-";
        if (b >= 0) v += std::to_string(b);
        const auto got = parse_range(v, size);
        if (got.kind != kOk) continue;
        ASSERT_GE(got.first, 0) << v;
        ASSERT_LE(got.first, got.last) << v;
        ASSERT_LT(got.last, size) << v;
      }
    }
  }
}

}  // namespace
}  // namespace vigil::http
