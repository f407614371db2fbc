#include "http/filters/range.h"

#include <cstdio>
#include <limits>

#include "codec/chars.h"
#include "codec/http_date.h"
#include "codec/parse.h"
#include "http/core/filters.h"
#include "http/core/module.h"
#include "http/core/request.h"
#include "vigil/core/clock.h"

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

namespace vigil::http {

// The range filter's header side (nginx's ngx_http_range_header_filter):
// a GET whose Range (and If-Range, RFC 9110 §13.1.5: a strong etag or the
// exact date) selects one byte range of a 200 that accepts ranges becomes a
// 206 of that range (r.body_offset and content_length say which bytes the
// handler sends); an unsatisfiable one is 416 with "bytes */size".
int range_header_filter(Request& r) {
  HeadersOut& h = r.headers_out;
  if (h.accept_ranges && loc_conf<RangeConf>(*r.loc, range_module()).max_ranges == 0) {
    h.accept_ranges = false;
    return 0;
  }
  if (h.status != 200 || !h.accept_ranges || r.range.empty() || r.line.method != Method::kGet ||
      h.content_length < 0) {
    return 0;
  }
  if (!r.if_range.empty()) {
    if (r.if_range.starts_with("\"") || r.if_range.starts_with("W/")) {
      if (r.if_range != h.etag) return 0;
    } else {
      auto t = parse_http_date(r.if_range, clock::now_sec());
      if (!t || *t != h.last_modified) return 0;
    }
  }
  const std::int64_t size = h.content_length;
  const ByteRange br = parse_range(r.range, size);
  if (br.kind == RangeKind::kIgnore) return 0;
  if (br.kind == RangeKind::kUnsatisfiable) {
    const int n = std::snprintf(r.content_range, sizeof r.content_range, "bytes */%lld",
                                static_cast<long long>(size));
    r.content_range_len = static_cast<std::uint8_t>(n > 0 ? n : 0);
    return 416;
  }
  const int n = std::snprintf(r.content_range, sizeof r.content_range, "bytes %lld-%lld/%lld",
                              static_cast<long long>(br.first), static_cast<long long>(br.last),
                              static_cast<long long>(size));
  r.content_range_len = static_cast<std::uint8_t>(n > 0 ? n : 0);
  h.status = 206;
  h.content_range = std::string_view(r.content_range, r.content_range_len);
  h.accept_ranges = false;  // as nginx: only the whole representation says it
  h.content_length = br.length();
  r.body_offset = br.first;
  return 0;
}

const HttpModule& range_module() {
  static const HttpModule* module = [] {
    auto* m = new HttpModule("http_range");  // never destroyed: used until exit
    auto conf = m->add_loc_conf<RangeConf>();
    m->conf().add("max_ranges", kHttpMainConf | kHttpSrvConf | kHttpLocConf, Arity::exactly(1),
                  conf.number(&RangeConf::max_ranges, std::numeric_limits<std::uint64_t>::max()));
    return m;
  }();
  return *module;
}

}  // namespace vigil::http
