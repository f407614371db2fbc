#include "core/conf/values.h"

namespace vigil {

namespace {

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

// Reads the digits at s[*i...] into *out; false when there are none or the
// value passes kMaxConfValue.
bool read_digits(std::string_view s, std::size_t* i, std::uint64_t* out) {
  std::size_t start = *i;
  std::uint64_t value = 0;
  while (*i < s.size() && is_digit(s[*i])) {
    auto digit = static_cast<std::uint64_t>(s[*i] - '0');
    if (value > (kMaxConfValue - digit) / 10) return false;
    value = value * 10 + digit;
    ++*i;
  }
  *out = value;
  return *i != start;
}

// Time units from largest to smallest; a component's unit must come later in
// this list than the previous component's, so "1h1h" and "30s1m" are rejected.
enum TimeUnit : int { kYear, kMonth, kWeek, kDay, kHour, kMinute, kSecond, kMillisecond };
constexpr std::uint64_t kDayMs = 24ull * 60 * 60 * 1000;
constexpr std::uint64_t kUnitMs[] = {365 * kDayMs,      30 * kDayMs,  7 * kDayMs, kDayMs,
                                     60ull * 60 * 1000, 60ull * 1000, 1000,       1};

std::optional<std::uint64_t> parse_time_ms(std::string_view s, bool allow_ms) {
  std::uint64_t total = 0;
  int last_unit = -1;
  std::size_t i = 0;
  for (;;) {
    std::uint64_t value = 0;
    if (!read_digits(s, &i, &value)) return std::nullopt;  // also catches "", " 1s", "1s  2ms"
    int unit = kSecond;                                    // a bare trailing number means seconds
    bool bare = i == s.size();
    if (!bare) {
      switch (s[i]) {
        case 'y':
          unit = kYear;
          break;
        case 'M':
          unit = kMonth;
          break;
        case 'w':
          unit = kWeek;
          break;
        case 'd':
          unit = kDay;
          break;
        case 'h':
          unit = kHour;
          break;
        case 'm':
          if (i + 1 < s.size() && s[i + 1] == 's') {
            unit = kMillisecond;
            ++i;
          } else {
            unit = kMinute;
          }
          break;
        case 's':
          unit = kSecond;
          break;
        default:
          return std::nullopt;
      }
      ++i;
    }
    if (unit <= last_unit) return std::nullopt;
    if (unit == kMillisecond && !allow_ms) return std::nullopt;
    last_unit = unit;
    if (value > kMaxConfValue / kUnitMs[unit]) return std::nullopt;
    value *= kUnitMs[unit];
    if (total > kMaxConfValue - value) return std::nullopt;
    total += value;
    if (i == s.size()) return total;
    if (s[i] == ' ') {
      ++i;  // one space between components; read_digits rejects anything else
    }
  }
}

}  // namespace

std::optional<std::int64_t> parse_number(std::string_view s) {
  std::size_t i = 0;
  std::uint64_t value = 0;
  if (!read_digits(s, &i, &value) || i != s.size()) return std::nullopt;
  return static_cast<std::int64_t>(value);
}

std::optional<std::uint64_t> parse_size(std::string_view s) {
  std::size_t i = 0;
  std::uint64_t value = 0;
  if (!read_digits(s, &i, &value)) return std::nullopt;
  std::uint64_t scale = 1;
  if (i < s.size()) {
    switch (s[i]) {
      case 'k':
      case 'K':
        scale = 1024;
        break;
      case 'm':
      case 'M':
        scale = 1024 * 1024;
        break;
      case 'g':
      case 'G':
        scale = 1024 * 1024 * 1024;
        break;
      default:
        return std::nullopt;
    }
    if (++i != s.size()) return std::nullopt;
  }
  if (value > kMaxConfValue / scale) return std::nullopt;
  return value * scale;
}

std::optional<Msec> parse_msec(std::string_view s) {
  return parse_time_ms(s, true);
}

std::optional<std::int64_t> parse_sec(std::string_view s) {
  auto ms = parse_time_ms(s, false);
  if (!ms) return std::nullopt;
  return static_cast<std::int64_t>(*ms / 1000);
}

std::optional<bool> parse_flag(std::string_view s) {
  if (conf::iequals(s, "on")) return true;
  if (conf::iequals(s, "off")) return false;
  return std::nullopt;
}

}  // namespace vigil
