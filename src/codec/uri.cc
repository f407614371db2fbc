#include "codec/uri.h"

#include "codec/chars.h"

namespace vigil::http {
namespace {

NormalizedPath refuse(int status, const char* why) {
  NormalizedPath r;
  r.status = status;
  r.error = why;
  return r;
}

}  // namespace

std::string_view path_extension(std::string_view path) {
  const std::string_view segment = path.substr(path.rfind('/') + 1);
  const auto dot = segment.rfind('.');
  if (dot == std::string_view::npos || dot == 0) return {};
  return segment.substr(dot + 1);
}

NormalizedPath normalize_path(std::string_view raw, char* out, std::size_t out_size,
                              bool merge_slashes) {
  if (out_size < normalized_path_capacity(raw)) return refuse(500, "path buffer too small");
  if (!raw.empty() && raw.front() != '/') return refuse(400, "path does not start with /");

  // out[0, len) is the result so far; out[seg, len) the segment being built,
  // always preceded by a '/'.
  std::size_t len = 0;
  out[len++] = '/';
  std::size_t seg = len;
  std::size_t i = raw.empty() ? 0 : 1;
  for (;;) {
    const bool end = i >= raw.size();
    char c = '/';
    if (!end) {
      c = raw[i++];
      if (c == '%') {
        if (raw.size() - i < 2 || !chars::is_hex(raw[i]) || !chars::is_hex(raw[i + 1])) {
          return refuse(400, "invalid percent-encoding in path");
        }
        c = static_cast<char>(chars::hex_value(raw[i]) * 16 + chars::hex_value(raw[i + 1]));
        i += 2;
        if (c == '\0') return refuse(400, "%00 in path");
      }
    }
    if (!end && c != '/') {
      out[len++] = c;
      continue;
    }

    // A segment ended (at a '/', decoded or not, or at the end of the path).
    const std::string_view segment(out + seg, len - seg);
    if (segment == ".") {
      len = seg;
    } else if (segment == "..") {
      if (seg == 1) return refuse(400, "path climbs above the root");
      len = seg - 1;                      // drop "/.." ...
      while (out[len - 1] != '/') --len;  // ... and the segment before it
    } else if ((!segment.empty() || !merge_slashes) && !end) {
      out[len++] = '/';
    }
    // An empty segment ("//", or the end after a '/') adds nothing, unless
    // slashes are kept as they came.
    seg = len;
    if (end) break;
  }

  NormalizedPath r;
  r.path = {out, len};
  r.extension = path_extension(r.path);
  return r;
}

}  // namespace vigil::http
