#pragma once
// The Range header of a GET (RFC 9110 §14.1-§14.2): the byte ranges a
// representation of a known size is answered with, one (a 206 with
// Content-Range) or several (a 206 multipart/byteranges, §14.6).

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string_view>

namespace vigil {
struct Chain;
}

namespace vigil::http {

enum class RangeKind : std::uint8_t {
  kIgnore,         // serve the whole representation with 200
  kSatisfiable,    // serve the ranges with 206
  kUnsatisfiable,  // 416, with "Content-Range: bytes */size"
};

struct ByteRange {
  std::int64_t first = 0;
  std::int64_t last = -1;  // inclusive
  std::int64_t length() const { return last - first + 1; }
};

struct RangeSet {
  RangeKind kind = RangeKind::kIgnore;
  std::size_t count = 0;   // satisfiable ranges (kSatisfiable)
  std::int64_t total = 0;  // their bytes together
};

// Evaluates a Range value against a representation of `size` bytes, as
// nginx 1.22 does, storing the satisfiable ranges, in the order asked, in
// out[0, min(count, cap)) (call again with room for `count` to have them all).
// - "bytes=" (unit case-insensitive, §14.1) then a list of "a-b", "a-", "-n";
//   spaces around the numbers and the '-' are accepted, and empty list
//   elements skipped (RFC 9110 §5.6.1.2). Last-pos is clamped to size - 1 and
//   a suffix-length to the size (§14.1.2).
// - A range starting at or after the end, "-0", or one whose first-pos is
//   above its last-pos selects nothing and is left out; none left: 416.
// - A syntax error anywhere is 416 (RFC 9110 §15.5.17 lets a server reject an
//   invalid ranges-specifier; nginx does).
// - Another unit, no range at all, more ranges than `max_ranges`, or ranges
//   adding up to more than the representation (overlapping, §14.2's "many
//   small or overlapping ranges"): kIgnore.
// - An empty representation has no bytes to select (§14.1.2): "bytes=-n" is
//   ignored (the whole, empty, representation is served) and any other
//   range is 416.
// Numbers too large for int64 saturate, which keeps their meaning: a huge
// first-pos is unsatisfiable, a huge last-pos or suffix means "to the end".
RangeSet parse_ranges(std::string_view value, std::int64_t size, std::uint64_t max_ranges,
                      ByteRange* out, std::size_t cap);

// max_ranges: how many ranges a request may ask for (0: byte ranges are
// off, and the response does not say Accept-Ranges); asking for more is
// answered with the whole representation.
struct RangeConf {
  std::uint64_t max_ranges = std::numeric_limits<std::uint64_t>::max();
};

struct Request;
// Whether the head became a multipart/byteranges 206: the producer then
// passes the whole representation (headers_out.content_length is the
// multipart body's) in one buffer, memory or a file range, with last_buf;
// the range body filter sends the parts of it.
bool range_multipart(const Request& r);
// The body filter of a multipart answer (the first body filter: what
// recodes the body, charset, sees the parts, as in nginx).
class BodyFilterNext;
int range_body_filter(Request& r, Chain* in, BodyFilterNext next);
// Gives back the memory of a multipart answer (when the request ends).
void release_range(Request& r);

class HttpModule;
// The range filter's module (its conf: RangeConf).
const HttpModule& range_module();

}  // namespace vigil::http
