#include "http/filters/range.h"

#include <limits>

#include "codec/chars.h"
#include "codec/parse.h"

namespace vigil::http {
namespace {

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();

// 1*DIGIT at the front of `s`, saturating at kMax; -1 when there is none.
std::int64_t take_number(std::string_view& s) {
  std::size_t i = 0;
  std::int64_t n = 0;
  for (; i < s.size() && chars::is_digit(s[i]); ++i) {
    const int d = s[i] - '0';
    n = n > (kMax - d) / 10 ? kMax : n * 10 + d;
  }
  if (i == 0) return -1;
  s.remove_prefix(i);
  return n;
}

}  // namespace

ByteRange parse_range(std::string_view value, std::int64_t size) {
  ByteRange ignore;
  // ranges-specifier = range-unit "=" range-set; no whitespace around '='.
  const auto eq = value.find('=');
  if (eq == std::string_view::npos || !iequals(value.substr(0, eq), "bytes")) return ignore;

  // range-set = 1#range-spec: exactly one non-empty element for us.
  ListReader elements(value.substr(eq + 1));
  std::string_view spec;
  std::string_view another;
  if (!elements.next(spec) || elements.next(another)) return ignore;

  std::int64_t first = -1;
  std::int64_t last = -1;
  if (spec.front() != '-') {
    first = take_number(spec);
    if (first < 0 || spec.empty() || spec.front() != '-') return ignore;
    spec.remove_prefix(1);
    if (!spec.empty()) {
      last = take_number(spec);
      if (last < 0 || !spec.empty() || last < first) return ignore;  // §14.1.1: invalid
    }
  } else {
    spec.remove_prefix(1);
    const std::int64_t suffix = take_number(spec);
    if (suffix < 0 || !spec.empty()) return ignore;
    if (suffix == 0) return {RangeKind::kUnsatisfiable, 0, -1};
    if (size <= 0) return ignore;
    first = suffix >= size ? 0 : size - suffix;
    return {RangeKind::kSatisfiable, first, size - 1};
  }

  if (first >= size) return {RangeKind::kUnsatisfiable, 0, -1};
  if (last < 0 || last >= size) last = size - 1;
  return {RangeKind::kSatisfiable, first, last};
}

}  // namespace vigil::http
