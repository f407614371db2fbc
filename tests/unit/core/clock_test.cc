// Tests for src/core/clock.cc: the cached time and its preformatted strings.

#include "vigil/core/clock.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <regex>
#include <string>
#include <thread>

namespace vigil {
namespace {

struct Expect {
  std::time_t sec;
  int gmtoff;
  const char* http_date;
  const char* err_log;
  const char* http_log;
  const char* iso;
};

void expect_strings(const Expect& e) {
  SCOPED_TRACE(std::to_string(e.sec) + " offset " + std::to_string(e.gmtoff));
  clock::time_update_fixed(e.sec, 0, 1000, e.gmtoff);
  EXPECT_EQ(clock::imf_fixdate(), e.http_date);
  EXPECT_EQ(clock::err_log_time(), e.err_log);
  EXPECT_EQ(clock::common_log_time(), e.http_log);
  EXPECT_EQ(clock::iso8601(), e.iso);
}

TEST(Clock, FormatsTheReferenceTime) {
  expect_strings({1795287812, 0, "Sat, 21 Nov 2026 19:03:32 GMT", "2026/11/21 19:03:32",
                  "21/Nov/2026:19:03:32 +0000", "2026-11-21T19:03:32+00:00"});
}

TEST(Clock, FormatsTheEpoch) {
  expect_strings({0, 0, "Thu, 01 Jan 1970 00:00:00 GMT", "1970/01/01 00:00:00",
                  "01/Jan/1970:00:00:00 +0000", "1970-01-01T00:00:00+00:00"});
}

TEST(Clock, LeapDay2024) {
  expect_strings({1709164799, 0, "Wed, 28 Feb 2024 23:59:59 GMT", "2024/02/28 23:59:59",
                  "28/Feb/2024:23:59:59 +0000", "2024-02-28T23:59:59+00:00"});
  expect_strings({1709164800, 0, "Thu, 29 Feb 2024 00:00:00 GMT", "2024/02/29 00:00:00",
                  "29/Feb/2024:00:00:00 +0000", "2024-02-29T00:00:00+00:00"});
  expect_strings({1709251199, 0, "Thu, 29 Feb 2024 23:59:59 GMT", "2024/02/29 23:59:59",
                  "29/Feb/2024:23:59:59 +0000", "2024-02-29T23:59:59+00:00"});
  expect_strings({1709251200, 0, "Fri, 01 Mar 2024 00:00:00 GMT", "2024/03/01 00:00:00",
                  "01/Mar/2024:00:00:00 +0000", "2024-03-01T00:00:00+00:00"});
}

TEST(Clock, CenturyIsNotALeapYearUnlessDivisibleBy400) {
  // 2100-02-28 23:59:59 is followed by March 1st; 2000 had a Feb 29.
  expect_strings({4107542399, 0, "Sun, 28 Feb 2100 23:59:59 GMT", "2100/02/28 23:59:59",
                  "28/Feb/2100:23:59:59 +0000", "2100-02-28T23:59:59+00:00"});
  expect_strings({4107542400, 0, "Mon, 01 Mar 2100 00:00:00 GMT", "2100/03/01 00:00:00",
                  "01/Mar/2100:00:00:00 +0000", "2100-03-01T00:00:00+00:00"});
  expect_strings({951782400, 0, "Tue, 29 Feb 2000 00:00:00 GMT", "2000/02/29 00:00:00",
                  "29/Feb/2000:00:00:00 +0000", "2000-02-29T00:00:00+00:00"});
}

TEST(Clock, YearAndMonthBoundaries) {
  expect_strings({946684799, 0, "Fri, 31 Dec 1999 23:59:59 GMT", "1999/12/31 23:59:59",
                  "31/Dec/1999:23:59:59 +0000", "1999-12-31T23:59:59+00:00"});
  expect_strings({946684800, 0, "Sat, 01 Jan 2000 00:00:00 GMT", "2000/01/01 00:00:00",
                  "01/Jan/2000:00:00:00 +0000", "2000-01-01T00:00:00+00:00"});
  expect_strings({1769903999, 0, "Sat, 31 Jan 2026 23:59:59 GMT", "2026/01/31 23:59:59",
                  "31/Jan/2026:23:59:59 +0000", "2026-01-31T23:59:59+00:00"});
  expect_strings({1769904000, 0, "Sun, 01 Feb 2026 00:00:00 GMT", "2026/02/01 00:00:00",
                  "01/Feb/2026:00:00:00 +0000", "2026-02-01T00:00:00+00:00"});
  // Past 2^31: no 32-bit overflow in the day arithmetic.
  expect_strings({2147483648, 0, "Tue, 19 Jan 2038 03:14:08 GMT", "2038/01/19 03:14:08",
                  "19/Jan/2038:03:14:08 +0000", "2038-01-19T03:14:08+00:00"});
}

TEST(Clock, PositiveOffsetMovesLocalTimeButNotHttpDate) {
  // +05:30 puts the local time past midnight: the date changes too.
  expect_strings({1795287812, 330, "Sat, 21 Nov 2026 19:03:32 GMT", "2026/11/22 00:33:32",
                  "22/Nov/2026:00:33:32 +0530", "2026-11-22T00:33:32+05:30"});
}

TEST(Clock, NegativeOffset) {
  expect_strings({1795287812, -480, "Sat, 21 Nov 2026 19:03:32 GMT", "2026/11/21 11:03:32",
                  "21/Nov/2026:11:03:32 -0800", "2026-11-21T11:03:32-08:00"});
  // New Year in UTC is still the old year in California.
  expect_strings({946684800, -480, "Sat, 01 Jan 2000 00:00:00 GMT", "1999/12/31 16:00:00",
                  "31/Dec/1999:16:00:00 -0800", "1999-12-31T16:00:00-08:00"});
}

TEST(Clock, HttpDateAgreesWithTheCLibrary) {
  // Days-from-civil against gmtime_r over four centuries, on a stride that
  // visits every weekday, month and time of day.
  char ours[32];
  char theirs[64];
  for (long long t = -2208988800LL; t < 7258118400LL; t += 86400LL * 13 + 3607) {
    const std::time_t sec = static_cast<std::time_t>(t);
    struct tm tm;
    ASSERT_NE(gmtime_r(&sec, &tm), nullptr);
    const std::size_t n = strftime(theirs, sizeof(theirs), "%a, %d %b %Y %H:%M:%S GMT", &tm);
    ASSERT_EQ(clock::format_imf_fixdate(sec, ours), 29u);
    ASSERT_EQ(std::string(ours, 29), std::string(theirs, n)) << "t=" << t;
  }
}

TEST(Clock, StringsStayWithinASecondAndChangeWithIt) {
  clock::time_update_fixed(1795287812, 100, 5000, 0);
  const std::string_view date = clock::imf_fixdate();
  const std::string before(date);
  const std::string iso_before(clock::iso8601());

  clock::time_update_fixed(1795287812, 999, 5899, 0);
  EXPECT_EQ(clock::imf_fixdate(), before);
  EXPECT_EQ(clock::iso8601(), iso_before);
  EXPECT_EQ(clock::now_msec_part(), 999u);
  EXPECT_EQ(clock::current_msec(), 5899u);
  // The view is into the cache itself: no copy, same storage.
  EXPECT_EQ(clock::imf_fixdate().data(), date.data());

  clock::time_update_fixed(1795287813, 0, 5900, 0);
  EXPECT_EQ(clock::imf_fixdate(), "Sat, 21 Nov 2026 19:03:33 GMT");
  EXPECT_EQ(clock::err_log_time(), "2026/11/21 19:03:33");
  EXPECT_EQ(clock::now_sec(), 1795287813);
  EXPECT_EQ(clock::now_msec_part(), 0u);
  // A view taken earlier now shows the new second (the buffer was rewritten).
  EXPECT_EQ(date, "Sat, 21 Nov 2026 19:03:33 GMT");
}

TEST(Clock, RealTimeUpdateTracksTheSystem) {
  clock::time_update();
  const std::time_t sys = std::time(nullptr);
  EXPECT_LE(std::llabs(static_cast<long long>(clock::now_sec() - sys)), 1);
  EXPECT_LT(clock::now_msec_part(), 1000u);
  EXPECT_TRUE(std::regex_match(
      std::string(clock::imf_fixdate()),
      std::regex(R"([A-Z][a-z]{2}, \d\d [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d GMT)")));
  EXPECT_TRUE(std::regex_match(std::string(clock::err_log_time()),
                               std::regex(R"(\d{4}/\d\d/\d\d \d\d:\d\d:\d\d)")));
  EXPECT_TRUE(std::regex_match(std::string(clock::common_log_time()),
                               std::regex(R"(\d\d/[A-Z][a-z]{2}/\d{4}:\d\d:\d\d:\d\d [+-]\d{4})")));
  EXPECT_TRUE(std::regex_match(std::string(clock::iso8601()),
                               std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d)")));
}

TEST(Clock, RealTimeUpdateUsesTheSystemOffset) {
  // A POSIX TZ string: "XST-5:30" is 5 h 30 min east of UTC, with no DST.
  ASSERT_EQ(setenv("TZ", "XST-5:30", 1), 0);
  tzset();
  clock::time_update_fixed(0, 0, 0, 0);  // forget any offset cached for this second
  clock::time_update();
  const std::string iso(clock::iso8601());
  const std::string log_time(clock::common_log_time());
  ASSERT_EQ(setenv("TZ", "UTC0", 1), 0);
  tzset();
  EXPECT_EQ(iso.substr(iso.size() - 6), "+05:30") << iso;
  EXPECT_EQ(log_time.substr(log_time.size() - 5), "+0530") << log_time;
}

TEST(Clock, CurrentMsecIsCachedAndMonotonic) {
  clock::time_update();
  const Msec a = clock::current_msec();
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  // No time_update: the cache does not move by itself.
  EXPECT_EQ(clock::current_msec(), a);
  clock::time_update();
  const Msec b = clock::current_msec();
  EXPECT_GE(msec_diff(b, a), 25);

  Msec prev = b;
  for (int i = 0; i < 10000; ++i) {
    clock::time_update();
    const Msec now = clock::current_msec();
    ASSERT_GE(msec_diff(now, prev), 0);
    prev = now;
  }
}

TEST(Clock, EveryThreadHasItsOwnInitialisedCache) {
  clock::time_update_fixed(1795287812, 0, 42, 0);
  Msec other_msec = 0;
  std::string other_date;
  std::thread t([&] {
    // First use in this thread: initialised from the real clocks, not zero.
    other_msec = clock::current_msec();
    other_date = std::string(clock::imf_fixdate());
  });
  t.join();
  EXPECT_GT(other_msec, 0u);
  EXPECT_NE(other_date, "Sat, 21 Nov 2026 19:03:32 GMT");
  EXPECT_EQ(other_date.size(), 29u);
  // This thread's cache is untouched.
  EXPECT_EQ(clock::current_msec(), 42u);
}

}  // namespace
}  // namespace vigil
