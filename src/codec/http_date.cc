#include "codec/http_date.h"

#include <cstdint>

#include "codec/chars.h"

namespace vigil::http {
namespace {

constexpr std::string_view kDays[] = {"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"};
constexpr std::string_view kLongDays[] = {"Monday", "Tuesday",  "Wednesday", "Thursday",
                                          "Friday", "Saturday", "Sunday"};
constexpr std::string_view kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                        "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

struct Civil {
  std::int64_t year = 0;
  int month = 0;  // 1..12
  int day = 0;
  int hour = 0;
  int minute = 0;
  int second = 0;
};

// A cursor over the value; every take_* consumes only on success.
class Reader {
 public:
  explicit Reader(std::string_view s) : s_(s) {}
  bool empty() const { return s_.empty(); }
  bool literal(std::string_view lit) {
    if (s_.substr(0, lit.size()) != lit) return false;
    s_.remove_prefix(lit.size());
    return true;
  }
  // Exactly `digits` DIGITs.
  bool number(int digits, int& out) {
    if (s_.size() < static_cast<std::size_t>(digits)) return false;
    int n = 0;
    for (int i = 0; i < digits; ++i) {
      if (!chars::is_digit(s_[static_cast<std::size_t>(i)])) return false;
      n = n * 10 + (s_[static_cast<std::size_t>(i)] - '0');
    }
    s_.remove_prefix(static_cast<std::size_t>(digits));
    out = n;
    return true;
  }
  template <std::size_t N>
  bool name(const std::string_view (&names)[N], int& index) {
    for (std::size_t i = 0; i < N; ++i) {
      if (literal(names[i])) {
        index = static_cast<int>(i);
        return true;
      }
    }
    return false;
  }
  // time-of-day = hour ":" minute ":" second
  bool time_of_day(Civil& c) {
    return number(2, c.hour) && literal(":") && number(2, c.minute) && literal(":") &&
           number(2, c.second);
  }

 private:
  std::string_view s_;
};

bool is_leap(std::int64_t y) {
  return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

int days_in_month(std::int64_t y, int m) {
  static constexpr int kDaysIn[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && is_leap(y) ? 29 : kDaysIn[m - 1];
}

// Days since 1970-01-01 of a proleptic Gregorian date (the era arithmetic of
// Howard Hinnant's "chrono-Compatible Low-Level Date Algorithms").
std::int64_t days_from_civil(std::int64_t y, int m, int d) {
  y -= m <= 2 ? 1 : 0;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const std::int64_t yoe = y - era * 400;
  const std::int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const std::int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

std::optional<std::time_t> to_time(const Civil& c) {
  if (c.month < 1 || c.month > 12 || c.day < 1 || c.day > days_in_month(c.year, c.month)) {
    return std::nullopt;
  }
  if (c.hour > 23 || c.minute > 59 || c.second > 60) return std::nullopt;
  const std::int64_t days = days_from_civil(c.year, c.month, c.day);
  const std::int64_t seconds = std::int64_t{c.hour} * 3600 + std::int64_t{c.minute} * 60 + c.second;
  return static_cast<std::time_t>(days * 86400 + seconds);
}

// The year of `now` in UTC.
std::int64_t current_year(std::time_t now) {
  std::tm tm{};
  if (::gmtime_r(&now, &tm) == nullptr) return 1970;
  return static_cast<std::int64_t>(tm.tm_year) + 1900;
}

}  // namespace

std::optional<std::time_t> parse_http_date(std::string_view s, std::time_t now) {
  Civil c;
  int index = 0;
  int year = 0;

  {  // IMF-fixdate = day-name "," SP date1 SP time-of-day SP GMT
    Reader r(s);
    if (r.name(kDays, index) && r.literal(", ")) {
      if (!(r.number(2, c.day) && r.literal(" ") && r.name(kMonths, c.month) && r.literal(" ") &&
            r.number(4, year) && r.literal(" ") && r.time_of_day(c) && r.literal(" GMT") &&
            r.empty())) {
        return std::nullopt;
      }
      c.month += 1;
      c.year = year;
      return to_time(c);
    }
  }
  {  // rfc850-date = day-name-l "," SP date2 SP time-of-day SP GMT
    Reader r(s);
    if (r.name(kLongDays, index) && r.literal(", ")) {
      if (!(r.number(2, c.day) && r.literal("-") && r.name(kMonths, c.month) && r.literal("-") &&
            r.number(2, year) && r.literal(" ") && r.time_of_day(c) && r.literal(" GMT") &&
            r.empty())) {
        return std::nullopt;
      }
      c.month += 1;
      // RFC 9110 §5.6.7: a year that appears to be more than 50 years in the
      // future is the most recent past year with the same last two digits.
      const std::int64_t this_year = current_year(now);
      // So the year is the one with these digits in (this_year - 50, this_year + 50].
      c.year = this_year - this_year % 100 + year;
      if (c.year > this_year + 50) c.year -= 100;
      if (c.year <= this_year - 50) c.year += 100;
      return to_time(c);
    }
  }
  {  // asctime-date = day-name SP date3 SP time-of-day SP year
    Reader r(s);
    if (r.name(kDays, index) && r.literal(" ")) {
      if (!(r.name(kMonths, c.month) && r.literal(" "))) return std::nullopt;
      // date3 = month SP ( 2DIGIT / ( SP DIGIT ) )
      if (!(r.literal(" ") ? r.number(1, c.day) : r.number(2, c.day))) return std::nullopt;
      if (!(r.literal(" ") && r.time_of_day(c) && r.literal(" ") && r.number(4, year) &&
            r.empty())) {
        return std::nullopt;
      }
      c.month += 1;
      c.year = year;
      return to_time(c);
    }
  }
  return std::nullopt;
}

}  // namespace vigil::http
