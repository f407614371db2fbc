// Cached time (seed 002, 9.7.1-9.7.2; nginx's ngx_times.c).
//
// Every thread keeps its own cache, so several loops may run in one process
// without locks. The cache is only ever written by the thread that owns it
// (signal handlers never touch it; timer_resolution's tick is each loop's own
// timerfd, read on the loop's thread), so
// unlike nginx we need no ring of slots: the strings are rewritten in place and,
// since every format has a fixed length, a string_view taken earlier keeps
// pointing at a valid string of the right shape.

#include "vigil/core/clock.h"

#include <sys/time.h>

#include <cerrno>
#include <cstring>

namespace vigil::clock {
namespace {

constexpr std::size_t kImfFixdateLen = sizeof("Sat, 21 Nov 2026 19:03:32 GMT") - 1;
constexpr std::size_t kErrLogTimeLen = sizeof("2026/11/21 19:03:32") - 1;
constexpr std::size_t kCommonLogTimeLen = sizeof("21/Nov/2026:19:03:32 +0000") - 1;
constexpr std::size_t kIso8601Len = sizeof("2026-11-21T19:03:32+00:00") - 1;
constexpr std::size_t kSyslogTimeLen = sizeof("Nov  1 19:03:32") - 1;

constexpr const char kWeekDays[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
constexpr const char kMonths[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                       "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

struct CachedTime {
  bool initialised = false;
  Msec mono_msec = 0;
  std::time_t sec = 0;
  unsigned msec = 0;
  int gmtoff_minutes = 0;
  // The second and offset the strings were built for; `formatted` false until
  // the first build, so second 0 is not mistaken for "already built".
  bool formatted = false;
  std::time_t formatted_sec = 0;
  int formatted_gmtoff = 0;

  char imf_fixdate[kImfFixdateLen + 1] = {};
  char err_log_time[kErrLogTimeLen + 1] = {};
  char common_log_time[kCommonLogTimeLen + 1] = {};
  char iso8601[kIso8601Len + 1] = {};
  char syslog_time[kSyslogTimeLen + 1] = {};
};

thread_local CachedTime t_cache;


// Broken-down civil time, without the C library (which would take its tz lock).
struct Civil {
  long long year;
  unsigned month;  // 1..12
  unsigned day;    // 1..31
  unsigned hour, min, sec;
  unsigned wday;  // 0 = Sunday
};

long long floor_div(long long a, long long b) {
  long long q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian
// calendar: Howard Hinnant's civil_from_days, which counts in 400-year eras
// starting on March 1st so that the leap day is the last day of the year.
Civil civil_from_seconds(long long t) {
  const long long days = floor_div(t, 86400);
  const long long secs = t - days * 86400;  // 0..86399

  Civil c;
  c.hour = static_cast<unsigned>(secs / 3600);
  c.min = static_cast<unsigned>(secs % 3600 / 60);
  c.sec = static_cast<unsigned>(secs % 60);
  // 1970-01-01 was a Thursday.
  c.wday = static_cast<unsigned>(days - floor_div(days + 4, 7) * 7 + 4);

  const long long z = days + 719468;  // days since 0000-03-01
  const long long era = floor_div(z, 146097);
  const long long doe = z - era * 146097;                                       // [0, 146096]
  const long long yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;  // [0, 399]
  const long long doy = doe - (365 * yoe + yoe / 4 - yoe / 100);                // [0, 365]
  const long long mp = (5 * doy + 2) / 153;  // [0, 11], March = 0
  c.day = static_cast<unsigned>(doy - (153 * mp + 2) / 5 + 1);
  c.month = static_cast<unsigned>(mp < 10 ? mp + 3 : mp - 9);
  c.year = yoe + era * 400 + (c.month <= 2 ? 1 : 0);
  return c;
}

// Fixed-width decimal writers: the formats never need printf's generality,
// and avoiding it keeps the once-a-second rebuild cheap.
char* put2(char* p, unsigned v) {
  *p++ = static_cast<char>('0' + v / 10 % 10);
  *p++ = static_cast<char>('0' + v % 10);
  return p;
}

char* put4(char* p, long long year) {
  // Years outside 0..9999 cannot be written in these formats; clamp rather
  // than overflow the fixed-size buffers.
  unsigned v = year < 0 ? 0 : (year > 9999 ? 9999 : static_cast<unsigned>(year));
  p = put2(p, v / 100);
  return put2(p, v % 100);
}

char* put3(char* p, const char* s) {
  std::memcpy(p, s, 3);
  return p + 3;
}

// "+0530" or, with `colon`, "+05:30".
char* put_offset(char* p, int minutes, bool colon) {
  *p++ = minutes < 0 ? '-' : '+';
  unsigned m = static_cast<unsigned>(minutes < 0 ? -minutes : minutes);
  p = put2(p, m / 60);
  if (colon) *p++ = ':';
  return put2(p, m % 60);
}

std::size_t write_imf_fixdate(const Civil& g, char* out) {
  char* p = out;
  p = put3(p, kWeekDays[g.wday]);
  *p++ = ',';
  *p++ = ' ';
  p = put2(p, g.day);
  *p++ = ' ';
  p = put3(p, kMonths[g.month - 1]);
  *p++ = ' ';
  p = put4(p, g.year);
  *p++ = ' ';
  p = put2(p, g.hour);
  *p++ = ':';
  p = put2(p, g.min);
  *p++ = ':';
  p = put2(p, g.sec);
  std::memcpy(p, " GMT", 4);
  p += 4;
  *p = '\0';
  return static_cast<std::size_t>(p - out);
}

void format_strings(CachedTime& t) {
  write_imf_fixdate(civil_from_seconds(t.sec), t.imf_fixdate);

  const Civil l = civil_from_seconds(static_cast<long long>(t.sec) + t.gmtoff_minutes * 60LL);

  char* p = t.err_log_time;  // 2026/11/21 19:03:32
  p = put4(p, l.year);
  *p++ = '/';
  p = put2(p, l.month);
  *p++ = '/';
  p = put2(p, l.day);
  *p++ = ' ';
  p = put2(p, l.hour);
  *p++ = ':';
  p = put2(p, l.min);
  *p++ = ':';
  p = put2(p, l.sec);
  *p = '\0';

  p = t.common_log_time;  // 21/Nov/2026:19:03:32 +0000
  p = put2(p, l.day);
  *p++ = '/';
  p = put3(p, kMonths[l.month - 1]);
  *p++ = '/';
  p = put4(p, l.year);
  *p++ = ':';
  p = put2(p, l.hour);
  *p++ = ':';
  p = put2(p, l.min);
  *p++ = ':';
  p = put2(p, l.sec);
  *p++ = ' ';
  p = put_offset(p, t.gmtoff_minutes, false);
  *p = '\0';

  p = t.iso8601;  // 2026-11-21T19:03:32+00:00
  p = put4(p, l.year);
  *p++ = '-';
  p = put2(p, l.month);
  *p++ = '-';
  p = put2(p, l.day);
  *p++ = 'T';
  p = put2(p, l.hour);
  *p++ = ':';
  p = put2(p, l.min);
  *p++ = ':';
  p = put2(p, l.sec);
  p = put_offset(p, t.gmtoff_minutes, true);
  *p = '\0';

  p = t.syslog_time;  // Nov  1 19:03:32 (RFC 3164 4.1.2: the day padded with a space)
  p = put3(p, kMonths[l.month - 1]);
  *p++ = ' ';
  *p++ = l.day < 10 ? ' ' : static_cast<char>('0' + l.day / 10);
  *p++ = static_cast<char>('0' + l.day % 10);
  *p++ = ' ';
  p = put2(p, l.hour);
  *p++ = ':';
  p = put2(p, l.min);
  *p++ = ':';
  p = put2(p, l.sec);
  *p = '\0';

  t.formatted = true;
  t.formatted_sec = t.sec;
  t.formatted_gmtoff = t.gmtoff_minutes;
}

// Sets the cache and rebuilds the strings when the second or offset moved.
void store(CachedTime& t, std::time_t sec, unsigned msec, Msec mono, int gmtoff_minutes) {
  t.sec = sec;
  t.msec = msec;
  t.mono_msec = mono;
  t.gmtoff_minutes = gmtoff_minutes;
  t.initialised = true;
  if (!t.formatted || t.formatted_sec != sec || t.formatted_gmtoff != gmtoff_minutes) {
    format_strings(t);
  }
}

// The system's UTC offset at `sec`, in minutes east. localtime_r is called at
// most once a second (when the second changed), which is cheap enough, and it
// follows DST changes without restarting.
int system_gmtoff_minutes(std::time_t sec) {
  struct tm tm;
  if (localtime_r(&sec, &tm) == nullptr) return 0;
  return static_cast<int>(tm.tm_gmtoff / 60);
}

void refresh(CachedTime& t) {
  timespec wall{};
  timespec mono{};
  // Both go through the vDSO on Linux: no kernel entry. They only fail with
  // EINVAL/EFAULT, which would be a programming error; keep the old cache then.
  if (clock_gettime(CLOCK_REALTIME, &wall) != 0 || clock_gettime(CLOCK_MONOTONIC, &mono) != 0) {
    return;
  }
  const Msec mono_ms =
      static_cast<Msec>(mono.tv_sec) * 1000 + static_cast<Msec>(mono.tv_nsec / 1000000);
  const int gmtoff = (t.formatted && t.formatted_sec == wall.tv_sec)
                         ? t.gmtoff_minutes
                         : system_gmtoff_minutes(wall.tv_sec);
  store(t, wall.tv_sec, static_cast<unsigned>(wall.tv_nsec / 1000000), mono_ms, gmtoff);
}

// Every reader goes through here so that a thread's first use initialises its
// cache; afterwards this is one predictable branch on a thread-local.
inline CachedTime& cache() {
  CachedTime& t = t_cache;
  if (__builtin_expect(!t.initialised, 0)) refresh(t);
  return t;
}

}  // namespace

Msec current_msec() {
  return cache().mono_msec;
}
std::time_t now_sec() {
  return cache().sec;
}
unsigned now_msec_part() {
  return cache().msec;
}

std::string_view imf_fixdate() {
  return {cache().imf_fixdate, kImfFixdateLen};
}
std::string_view err_log_time() {
  return {cache().err_log_time, kErrLogTimeLen};
}
std::string_view common_log_time() {
  return {cache().common_log_time, kCommonLogTimeLen};
}
std::string_view iso8601() {
  return {cache().iso8601, kIso8601Len};
}
std::string_view syslog_time() {
  return {cache().syslog_time, kSyslogTimeLen};
}

void time_update() {
  refresh(t_cache);
}

void time_update_fixed(std::time_t sec, unsigned msec, Msec mono_msec, int gmtoff_minutes) {
  store(t_cache, sec, msec, mono_msec, gmtoff_minutes);
}

std::size_t format_imf_fixdate(std::time_t sec, char* out) {
  return write_imf_fixdate(civil_from_seconds(sec), out);
}


}  // namespace vigil::clock
