// Tests for src/http/http_date.cc: the three HTTP-date formats, calendar
// edges, the rfc850 century rule, and what is refused.

#include "codec/http_date.h"

#include <gtest/gtest.h>

#include <ctime>
#include <random>
#include <string>

namespace vigil::http {
namespace {

// 2026-11-21 19:03:32 UTC, a fixed "now" for the rfc850 two-digit year.
constexpr std::time_t kNow = 1795287812;

std::time_t utc(int y, int mon, int d, int h, int mi, int s) {
  std::tm tm{};
  tm.tm_year = y - 1900;
  tm.tm_mon = mon - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = s;
  return ::timegm(&tm);
}

TEST(HttpDate, TheThreeFormatsOfRfc9110) {
  // RFC 9110 §5.6.7's example instant, 784111777.
  EXPECT_EQ(parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT", kNow), 784111777);
  EXPECT_EQ(parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT", kNow), 784111777);
  EXPECT_EQ(parse_http_date("Sun Nov  6 08:49:37 1994", kNow), 784111777);
}

TEST(HttpDate, CalendarEdges) {
  EXPECT_EQ(parse_http_date("Thu, 01 Jan 1970 00:00:00 GMT", kNow), 0);
  EXPECT_EQ(parse_http_date("Wed, 31 Dec 1969 23:59:59 GMT", kNow), -1);
  EXPECT_EQ(parse_http_date("Thu, 29 Feb 2024 12:00:00 GMT", kNow), utc(2024, 2, 29, 12, 0, 0));
  EXPECT_EQ(parse_http_date("Tue, 29 Feb 2000 00:00:00 GMT", kNow), utc(2000, 2, 29, 0, 0, 0));
  EXPECT_EQ(parse_http_date("Fri, 31 Dec 9999 23:59:59 GMT", kNow), utc(9999, 12, 31, 23, 59, 59));
  EXPECT_EQ(parse_http_date("Tue, 19 Jan 2038 03:14:08 GMT", kNow), 2147483648);
  // A leap second counts as the next second.
  EXPECT_EQ(parse_http_date("Sat, 31 Dec 2016 23:59:60 GMT", kNow), utc(2017, 1, 1, 0, 0, 0));
  // asctime with a two-digit day.
  EXPECT_EQ(parse_http_date("Sat Nov 21 19:03:32 2026", kNow), kNow);
  EXPECT_EQ(parse_http_date("Sat, 21 Nov 2026 19:03:32 GMT", kNow), kNow);
}

TEST(HttpDate, Rfc850TwoDigitYears) {
  // RFC 9110 §5.6.7: more than 50 years in the future means the past century.
  EXPECT_EQ(parse_http_date("Monday, 01-Jan-76 00:00:00 GMT", kNow), utc(2076, 1, 1, 0, 0, 0));
  EXPECT_EQ(parse_http_date("Tuesday, 01-Jan-77 00:00:00 GMT", kNow), utc(1977, 1, 1, 0, 0, 0));
  EXPECT_EQ(parse_http_date("Saturday, 21-Nov-26 19:03:32 GMT", kNow), kNow);
  EXPECT_EQ(parse_http_date("Friday, 31-Dec-99 23:59:59 GMT", kNow), utc(1999, 12, 31, 23, 59, 59));
  EXPECT_EQ(parse_http_date("Saturday, 01-Jan-00 00:00:00 GMT", kNow), utc(2000, 1, 1, 0, 0, 0));
  // Seen from 1990: 2049 would be more than 50 years ahead, 2040 is not.
  const std::time_t y1990 = utc(1990, 6, 1, 0, 0, 0);
  EXPECT_EQ(parse_http_date("Saturday, 01-Jan-49 00:00:00 GMT", y1990), utc(1949, 1, 1, 0, 0, 0));
  EXPECT_EQ(parse_http_date("Saturday, 01-Jan-40 00:00:00 GMT", y1990), utc(2040, 1, 1, 0, 0, 0));
}

TEST(HttpDate, Refused) {
  const char* bad[] = {
      "",
      "Sun, 06 Nov 1994 08:49:37 GMT ",              // trailing space
      " Sun, 06 Nov 1994 08:49:37 GMT",              // leading space
      "Sun, 06 Nov 1994 08:49:37 UTC",               // only GMT
      "Sun, 06 Nov 1994 08:49:37 gmt",               // case-sensitive
      "sun, 06 Nov 1994 08:49:37 GMT",               //
      "Sun, 06 nov 1994 08:49:37 GMT",               //
      "Sun, 06 Nov 1994 08:49:37",                   // no zone
      "Sun, 6 Nov 1994 08:49:37 GMT",                // two-digit day
      "Sun, 06 Nov 94 08:49:37 GMT",                 // four-digit year
      "Sun, 06  Nov 1994 08:49:37 GMT",              // single spaces
      "Sun,06 Nov 1994 08:49:37 GMT",                //
      "Sun, 06 Nov 1994 8:49:37 GMT",                //
      "Sun, 06 Nov 1994 08:49 GMT",                  //
      "Sun, 06 Nov 1994 24:00:00 GMT",               // hour range
      "Sun, 06 Nov 1994 08:60:00 GMT",               // minute range
      "Sun, 06 Nov 1994 08:49:61 GMT",               // second range
      "Sun, 00 Nov 1994 08:49:37 GMT",               // day range
      "Sun, 31 Nov 1994 08:49:37 GMT",               // no Nov 31
      "Thu, 29 Feb 2023 00:00:00 GMT",               // not a leap year
      "Mon, 29 Feb 2100 00:00:00 GMT",               // century rule
      "Sun, 06 Xyz 1994 08:49:37 GMT",               // month name
      "Foo, 06 Nov 1994 08:49:37 GMT",               // day name
      "Sunday, 06 Nov 1994 08:49:37 GMT",            // long day name with IMF date
      "Sun, 06-Nov-94 08:49:37 GMT",                 // short day name with rfc850 date
      "Sunday, 06-Nov-1994 08:49:37 GMT",            // rfc850 has two digits
      "Sunday, 06-Nov-94 08:49:37",                  //
      "Sun Nov 6 08:49:37 1994",                     // asctime pads the day with a space
      "Sun Nov  6 08:49:37 94",                      //
      "Sun Nov 06 08:49:37 1994 ",                   //
      "Sun Nov  6 08:49:37 1994 GMT",                //
      "Sun, 06 Nov 1994 08:49:37 GMT; length=1234",  // old MSIE addition: ignored whole
      "1994-11-06T08:49:37Z",
      "784111777",
  };
  for (const char* s : bad) {
    EXPECT_FALSE(parse_http_date(s, kNow).has_value()) << s;
  }
}

// Every second formatted by strftime in each format parses back to itself.
TEST(HttpDate, RoundTripsRandomInstants) {
  std::mt19937_64 rng(42);
  for (int i = 0; i < 5000; ++i) {
    const std::time_t t = static_cast<std::time_t>(rng() % 253402300800ull);  // to 9999
    std::tm tm{};
    ASSERT_NE(::gmtime_r(&t, &tm), nullptr);
    char buf[64];
    std::strftime(buf, sizeof buf, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    ASSERT_EQ(parse_http_date(buf, kNow), t) << buf;
    std::strftime(buf, sizeof buf, "%a %b %e %H:%M:%S %Y", &tm);
    ASSERT_EQ(parse_http_date(buf, kNow), t) << buf;
  }
}

}  // namespace
}  // namespace vigil::http
