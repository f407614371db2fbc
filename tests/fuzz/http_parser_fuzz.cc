// libFuzzer target for the HTTP request parsing path the server runs on
// untrusted bytes: request line and fields, the header-block checks, path
// normalization, the chunked decoder, Range and HTTP-date.
//
// Input: one control byte, then the bytes a client sent. The control byte
// chooses the piece size the input is fed in and the parser limits. Besides
// crashes, hangs and out-of-bounds reads (ASan), the target traps when
// feeding in pieces (moving the pending bytes to a fresh, exactly sized heap
// buffer before every piece) disagrees with feeding everything at once, and
// when a normalized path is not clean.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "codec/chunked.h"
#include "codec/header_check.h"
#include "codec/http_date.h"
#include "codec/parse.h"
#include "http/filters/range.h"
#include "codec/uri.h"

namespace {

using namespace vigil;        // NOLINT
using namespace vigil::http;  // NOLINT

void check(bool ok) {
  if (!ok) __builtin_trap();
}

struct Head {
  ParseStatus status = ParseStatus::kAgain;
  std::size_t consumed = 0;
  RequestLine line;
  std::vector<HeaderField> fields;
  std::string summary;  // everything parsed, as owned text, for comparing feedings
};

// Parses the head of `in` in pieces of at most `piece` bytes (0: all at once).
// Each piece goes into a new exactly sized buffer that first receives the
// parser's pending bytes; `keep` holds the buffers that views point into.
Head parse_head(std::string_view in, std::size_t piece, ParserLimits limits,
                std::vector<std::unique_ptr<char[]>>& keep) {
  RequestParser parser(limits);
  Head h;
  bool in_headers = false;
  Buf cur;
  std::size_t fed = 0;
  while (fed < in.size()) {
    const std::size_t n = piece == 0 ? in.size() - fed : std::min(piece, in.size() - fed);
    const std::size_t cap = parser.pending() + n;
    keep.push_back(std::make_unique<char[]>(cap));
    Buf next;
    next.reset(keep.back().get(), cap);
    if (cur.start != nullptr) check(parser.move_pending(cur, next));
    check(static_cast<std::size_t>(next.end - next.last) == n);
    std::memcpy(next.last, in.data() + fed, n);
    next.last += n;
    fed += n;
    cur = next;

    while (cur.pos < cur.last) {
      std::size_t used = 0;
      ParseStatus st;
      if (!in_headers) {
        st = parser.parse_request_line({cur.pos, cur.last}, used, h.line);
        if (st == ParseStatus::kOk) {
          in_headers = true;
          h.summary.append(h.line.line).append("\n");
          h.summary.append(h.line.path).append("|").append(h.line.query).append("|");
          h.summary.append(h.line.host).append("|").append(h.line.port).append("|");
          h.summary.append(std::to_string(h.line.version)).append("\n");
        }
      } else {
        HeaderField f;
        st = parser.parse_header({cur.pos, cur.last}, used, f);
        if (st == ParseStatus::kOk) {
          h.fields.push_back(f);
          h.summary.append(f.name).append(":").append(f.value).append("\n");
        }
      }
      check(used <= static_cast<std::size_t>(cur.last - cur.pos));
      cur.pos += used;
      h.consumed += used;
      if (st == ParseStatus::kAgain) {
        check(cur.pos == cur.last);
        break;
      }
      if (st == ParseStatus::kOk) continue;
      h.status = st;
      check(st == ParseStatus::kHeadersDone || is_error(st));
      return h;
    }
    check(parser.pending() <= std::max(limits.max_request_line, limits.max_header_line));
  }
  return h;
}

struct Body {
  ChunkStatus status = ChunkStatus::kAgain;
  std::size_t consumed = 0;
  std::string data;
  std::uint64_t size = 0;
};

// Decodes a chunked body; each piece is its own exactly sized heap buffer,
// freed before the next one: the decoder must never look back.
Body decode_chunked(std::string_view in, std::size_t piece, ChunkedLimits limits) {
  ChunkedParser p(limits);
  Body b;
  std::size_t fed = 0;
  while (fed < in.size()) {
    const std::size_t n = piece == 0 ? in.size() - fed : std::min(piece, in.size() - fed);
    auto mem = std::make_unique<char[]>(n);
    std::memcpy(mem.get(), in.data() + fed, n);
    fed += n;
    std::string_view rest(mem.get(), n);
    for (;;) {
      std::size_t used = 0;
      std::string_view data;
      const auto st = p.parse(rest, used, data);
      check(used <= rest.size());
      rest.remove_prefix(used);
      b.consumed += used;
      if (st == ChunkStatus::kData) {
        check(!data.empty() && data.data() + data.size() == rest.data());
        b.data.append(data);
        continue;
      }
      if (st == ChunkStatus::kAgain) {
        check(rest.empty());
        break;
      }
      b.status = st;
      b.size = p.body_size();
      check(b.data.size() <= b.size && b.size <= limits.max_body);
      return b;
    }
  }
  b.size = p.body_size();
  return b;
}

void check_path(const RequestLine& line) {
  if (line.form != TargetForm::kOrigin && line.form != TargetForm::kAbsolute) return;
  // Exactly sized, so ASan sees any write past the promised capacity.
  const std::size_t cap = normalized_path_capacity(line.path);
  auto out = std::make_unique<char[]>(cap);
  const auto r = normalize_path(line.path, out.get(), cap);
  if (!r.ok()) {
    check(r.status == 400);
    return;
  }
  const std::string_view p = r.path;
  check(!p.empty() && p.front() == '/' && p.size() <= cap);
  check(p.find("//") == std::string_view::npos);
  check(p.find("/./") == std::string_view::npos && p.find("/../") == std::string_view::npos);
  check(!p.ends_with("/.") && !p.ends_with("/.."));
  check(p.find('\0') == std::string_view::npos);
  check(r.extension.empty() || (r.extension.data() > p.data() &&
                                r.extension.data() + r.extension.size() == p.data() + p.size()));
  // merge_slashes off: the same containment, "//" may stay; never longer.
  auto kept = std::make_unique<char[]>(cap);
  const auto k = normalize_path(line.path, kept.get(), cap, /*merge_slashes=*/false);
  if (!k.ok()) {
    check(k.status == 400);
    return;
  }
  check(!k.path.empty() && k.path.front() == '/' && k.path.size() <= cap);
  check(k.path.find("/./") == std::string_view::npos && k.path.find("/../") == std::string_view::npos);
  check(!k.path.ends_with("/.") && !k.path.ends_with("/.."));
}

void check_values(const std::vector<HeaderField>& fields, std::int64_t size) {
  for (const auto& f : fields) {
    const auto range = parse_range(f.value, size);
    if (range.kind == RangeKind::kSatisfiable) {
      check(range.first >= 0 && range.first <= range.last && range.last < size);
    }
    (void)parse_http_date(f.value, 1795287812);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint8_t control = data[0];
  const std::string_view in(reinterpret_cast<const char*>(data + 1), size - 1);

  const std::size_t piece = control & 7;  // 0: no split; else pieces of 1..7 bytes
  ParserLimits limits;
  switch ((control >> 3) & 3) {
    case 1:
      limits = {64, 32};
      break;
    case 2:
      limits = {16, 8};
      break;
    default:
      break;
  }

  std::vector<std::unique_ptr<char[]>> keep_whole;
  std::vector<std::unique_ptr<char[]>> keep_split;
  const Head whole = parse_head(in, 0, limits, keep_whole);
  const Head split = parse_head(in, piece == 0 ? 1 : piece, limits, keep_split);
  check(whole.status == split.status);
  check(whole.summary == split.summary);
  check(whole.consumed == split.consumed);

  std::string_view body = in;
  if (whole.status == ParseStatus::kHeadersDone) {
    const HeaderCheck hc = check_headers(whole.line, whole.fields);
    check(hc.status == 0 || hc.status == 400 || hc.status == 501);
    check(hc.ok() || !hc.keep_alive);
    check(!(hc.chunked && hc.content_length >= 0));
    check_path(whole.line);
    check_values(whole.fields, static_cast<std::int64_t>(in.size()));
    body = in.substr(whole.consumed);
  }

  ChunkedLimits climits;
  if (control & 0x20) {
    climits.max_body = 64;
    climits.max_size_line = 24;
    climits.max_trailers = 32;
  }
  const Body b1 = decode_chunked(body, 0, climits);
  const Body b2 = decode_chunked(body, piece == 0 ? 1 : piece, climits);
  check(b1.status == b2.status && b1.data == b2.data && b1.size == b2.size);
  check(b1.consumed == b2.consumed);
  return 0;
}
