#pragma once
// Request path normalization for an origin server mapping paths to files:
// percent-decoding (RFC 3986 §2.1), dot-segment removal (RFC 3986 §5.2.4) and
// merging of "//", into a caller-provided buffer; and the file extension.

#include <cstddef>
#include <string_view>

namespace vigil::http {

struct NormalizedPath {
  int status = 0;              // 0, or 400 for a path we refuse (500: `out` too small)
  const char* error = "";      // why, for the error log
  std::string_view path;       // inside `out`; always starts with '/'
  std::string_view extension;  // inside `out`: after the last '.' of the last segment
  bool ok() const { return status == 0; }
};

// The output never needs more than this many bytes (decoding only shrinks; an
// empty path, absolute-form's "http://host", becomes "/").
inline std::size_t normalized_path_capacity(std::string_view raw) {
  return raw.empty() ? 1 : raw.size();
}

// Normalizes the raw path of a request (RequestLine::path; the query was
// split off by the parser and is never decoded). Choices, all made so the
// result can safely be appended to a document root:
// - Decoding happens before segment processing, so "%2e%2e" is ".." and "%2F"
//   is a separator, as the filesystem would see them (nginx does the same).
// - An invalid escape ("%", "%4", "%zz") and "%00" (would truncate a C string)
//   are refused with 400.
// - "." segments vanish; ".." removes the previous segment; a ".." that would
//   climb above "/" is refused with 400 (nginx's choice, rather than clamping
//   "/../x" to "/x": such a request is an attack or a bug, not a link).
// - Empty segments ("//") merge into one '/' when `merge_slashes` (nginx's
//   merge_slashes on, the default); otherwise they stay, and ".." after one
//   removes it as it would any other segment.
// - The extension is empty for a path ending in '/', a last segment without a
//   '.', or a dot file (".profile": the leading dot names no type).
// `out` must hold normalized_path_capacity(raw) bytes.
NormalizedPath normalize_path(std::string_view raw, char* out, std::size_t out_size,
                              bool merge_slashes = true);

// The extension of a normalised path, by the rule above.
std::string_view path_extension(std::string_view path);

}  // namespace vigil::http
