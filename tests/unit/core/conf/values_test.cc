// Tests src/core/conf/values.cc: numbers, sizes, times, flags.

#include "core/conf/values.h"

#include <gtest/gtest.h>

#include <optional>

namespace vigil {
namespace {

constexpr std::uint64_t kK = 1024;
constexpr std::uint64_t kSec = 1000;
constexpr std::uint64_t kMin = 60 * kSec;
constexpr std::uint64_t kHour = 60 * kMin;
constexpr std::uint64_t kDay = 24 * kHour;

TEST(ParseNumber, AcceptsDecimalDigits) {
  EXPECT_EQ(parse_number("0"), 0);
  EXPECT_EQ(parse_number("512"), 512);
  EXPECT_EQ(parse_number("007"), 7);
  EXPECT_EQ(parse_number("9223372036854775807"), INT64_MAX);
}

TEST(ParseNumber, RejectsGarbageAndOverflow) {
  for (const char* s : {"", "-1", "+1", " 1", "1 ", "12x", "0x10", "1.5", "1k", "x",
                        "9223372036854775808", "99999999999999999999"}) {
    EXPECT_EQ(parse_number(s), std::nullopt) << s;
  }
}

TEST(ParseSize, Units) {
  EXPECT_EQ(parse_size("0"), 0u);
  EXPECT_EQ(parse_size("512"), 512u);
  EXPECT_EQ(parse_size("16k"), 16 * kK);
  EXPECT_EQ(parse_size("16K"), 16 * kK);
  EXPECT_EQ(parse_size("1m"), kK * kK);
  EXPECT_EQ(parse_size("3M"), 3 * kK * kK);
  EXPECT_EQ(parse_size("2g"), 2 * kK * kK * kK);
  EXPECT_EQ(parse_size("2G"), 2 * kK * kK * kK);
  // The largest size that still fits int64.
  EXPECT_EQ(parse_size("8589934591g"), 8589934591ull * kK * kK * kK);
}

TEST(ParseSize, RejectsGarbageAndOverflow) {
  for (const char* s : {"", "k", "10kb", "10 k", "1.5m", "-1k", "10t", "10kk", "k10",
                        "99999999999999999999k", "9007199254740992k", "8589934592g"}) {
    EXPECT_EQ(parse_size(s), std::nullopt) << s;
  }
}

TEST(ParseMsec, SingleUnits) {
  EXPECT_EQ(parse_msec("500ms"), 500u);
  EXPECT_EQ(parse_msec("0"), 0u);
  EXPECT_EQ(parse_msec("1s"), kSec);
  EXPECT_EQ(parse_msec("30"), 30 * kSec);  // a bare number is seconds
  EXPECT_EQ(parse_msec("2m"), 2 * kMin);
  EXPECT_EQ(parse_msec("1h"), kHour);
  EXPECT_EQ(parse_msec("1d"), kDay);
  EXPECT_EQ(parse_msec("1w"), 7 * kDay);
  EXPECT_EQ(parse_msec("1M"), 30 * kDay);
  EXPECT_EQ(parse_msec("1y"), 365 * kDay);
}

TEST(ParseMsec, Combined) {
  EXPECT_EQ(parse_msec("1m30s"), 90 * kSec);
  EXPECT_EQ(parse_msec("1m30"), 90 * kSec);  // trailing bare number = seconds
  EXPECT_EQ(parse_msec("1s500ms"), 1500u);
  EXPECT_EQ(parse_msec("1d2h3m4s5ms"), kDay + 2 * kHour + 3 * kMin + 4 * kSec + 5);
  EXPECT_EQ(parse_msec("1y1M1w1d"), 365 * kDay + 30 * kDay + 7 * kDay + kDay);
  // A quoted argument may hold spaces between components, as in nginx.
  EXPECT_EQ(parse_msec("1h 30m"), kHour + 30 * kMin);
}

TEST(ParseMsec, RejectsGarbage) {
  for (const char* s : {"",      "ms",  "s",       "m",    "1x",   "1.5s",  "-1s",  "+1s",
                        " 1s",   "1s ", "1h  30m", "1s1m", "1m1m", "30s1h", "1s30", "1ms5",
                        "1ms1s", "1S",  "1H",      "1sm",  "1mss", "1 ",    "s1"}) {
    EXPECT_EQ(parse_msec(s), std::nullopt) << s;
  }
}

TEST(ParseMsec, RejectsOverflow) {
  EXPECT_EQ(parse_msec("99999999999999999999s"), std::nullopt);
  EXPECT_EQ(parse_msec("99999999999999999999"), std::nullopt);
  // INT64_MAX ms is about 106751991167 days.
  EXPECT_EQ(parse_msec("106751991167d"), 106751991167ull * kDay);
  EXPECT_EQ(parse_msec("106751991168d"), std::nullopt);
  // Each component fits; the sum does not.
  EXPECT_EQ(parse_msec("106751991167d23h"), std::nullopt);
  EXPECT_EQ(parse_msec("9223372036854775807ms"), static_cast<std::uint64_t>(INT64_MAX));
  EXPECT_EQ(parse_msec("9223372036854775807ms1"), std::nullopt);  // also out of order
}

TEST(ParseSec, WholeSeconds) {
  EXPECT_EQ(parse_sec("30"), 30);
  EXPECT_EQ(parse_sec("1m30s"), 90);
  EXPECT_EQ(parse_sec("1h"), 3600);
  EXPECT_EQ(parse_sec("1d"), 86400);
  EXPECT_EQ(parse_sec("500ms"), std::nullopt);  // nginx's is_sec mode has no ms
  EXPECT_EQ(parse_sec("1s500ms"), std::nullopt);
  EXPECT_EQ(parse_sec("abc"), std::nullopt);
}

TEST(ParseFlag, OnOff) {
  EXPECT_EQ(parse_flag("on"), true);
  EXPECT_EQ(parse_flag("ON"), true);
  EXPECT_EQ(parse_flag("oN"), true);
  EXPECT_EQ(parse_flag("off"), false);
  EXPECT_EQ(parse_flag("Off"), false);
  for (const char* s : {"", "yes", "no", "1", "0", "true", "onn", "of", " on"}) {
    EXPECT_EQ(parse_flag(s), std::nullopt) << s;
  }
}

}  // namespace
}  // namespace vigil
