#pragma once
// The Range header of a GET for a file (RFC 9110 §14.1-§14.2), reduced to
// what a static file server answers: one byte range, or the whole file.

#include <cstdint>
#include <limits>
#include <string_view>

namespace vigil::http {

enum class RangeKind : std::uint8_t {
  kIgnore,         // serve the whole representation with 200
  kSatisfiable,    // serve [first, last] with 206
  kUnsatisfiable,  // 416, with "Content-Range: bytes */size"
};

struct ByteRange {
  RangeKind kind = RangeKind::kIgnore;
  std::int64_t first = 0;
  std::int64_t last = -1;  // inclusive
  std::int64_t length() const { return last - first + 1; }
};

// Evaluates a Range value against a representation of `size` bytes.
// - "bytes=a-b", "bytes=a-", "bytes=-n" (unit case-insensitive, §14.1): one
//   range, whose last-pos is clamped to size - 1 and whose suffix-length is
//   clamped to the size (§14.1.2).
// - first-pos >= size, or "-0": unsatisfiable (§14.1.1), so 416.
// - Syntax errors, a first-pos above the last-pos, another unit, and several
//   ranges: kIgnore. RFC 9110 §14.2 lets a server ignore Range; nginx does
//   for invalid values. We also ignore multiple ranges instead of building a
//   multipart/byteranges answer (nginx would; it is rare and costly).
// - An empty representation has no bytes to select: "bytes=-n" is ignored
//   (the whole, empty, file is served) and any other range is 416.
// Numbers too large for int64 saturate, which keeps their meaning: a huge
// first-pos is unsatisfiable, a huge last-pos or suffix means "to the end".
ByteRange parse_range(std::string_view value, std::int64_t size);

// max_ranges: how many ranges a request may ask for (0: byte ranges are
// off, and the response does not say Accept-Ranges). Vigil answers one
// range, and several with the whole representation, so only 0 changes what
// is sent.
struct RangeConf {
  std::uint64_t max_ranges = std::numeric_limits<std::uint64_t>::max();
};

class HttpModule;
// The range filter's module (its conf: RangeConf).
const HttpModule& range_module();

}  // namespace vigil::http
