#pragma once
// Parsers for the scalar values directives take: numbers, sizes, times and
// flags, with nginx's spellings (ngx_atoi, ngx_parse_size, ngx_parse_time).
// Each returns std::nullopt on garbage or overflow; the caller words the error
// because only it knows the directive name and location.

#include <cstdint>
#include <optional>
#include <string_view>

#include "vigil/core/clock.h"

namespace vigil {

// Largest value any of these parsers returns. Keeping results within int64
// lets callers store them in signed types (off_t, time_t, MsecDiff) safely.
inline constexpr std::uint64_t kMaxConfValue = INT64_MAX;

// Decimal digits only: no sign, no spaces, no suffix. "007" is 7.
std::optional<std::int64_t> parse_number(std::string_view s);

// A number with an optional unit suffix: k/K (1024), m/M (1024^2), g/G (1024^3).
std::optional<std::uint64_t> parse_size(std::string_view s);

// A time as milliseconds: components "<digits><unit>" in strictly decreasing
// unit order, units y (365d), M (30d), w, d, h, m, s, ms; a trailing bare
// number means seconds ("1m30" is 90s, "30" is 30s). Components may be
// separated by single spaces (only reachable through a quoted argument, since
// tokens are whitespace-split). "1m30s", "500ms", "1d", "1h 30m".
std::optional<Msec> parse_msec(std::string_view s);

// The same grammar in whole seconds; "ms" is rejected (nginx's is_sec mode).
std::optional<std::int64_t> parse_sec(std::string_view s);

// "on" / "off", case-insensitive like nginx's flag slot.
std::optional<bool> parse_flag(std::string_view s);

namespace conf {
// ASCII case-insensitive equality (nginx's ngx_strcasecmp for keywords).
inline bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}
}  // namespace conf

}  // namespace vigil
