#include "http/filters/range.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <new>

#include "codec/chars.h"
#include "codec/http_date.h"
#include "codec/parse.h"
#include "http/core/filters.h"
#include "http/core/module.h"
#include "http/core/request.h"
#include "http/core/worker.h"
#include "vigil/core/buffer.h"
#include "vigil/core/clock.h"
#include "vigil/core/log.h"

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

void skip_spaces(std::string_view& s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
}

// One range-spec (spaces around its parts allowed, as nginx allows them):
// false on a syntax error. `suffix` says it was "-n" (first is then -1).
bool take_spec(std::string_view spec, std::int64_t& first, std::int64_t& last, bool& suffix) {
  first = -1;
  last = -1;
  suffix = spec.front() == '-';
  if (!suffix) {
    first = take_number(spec);
    if (first < 0) return false;
    skip_spaces(spec);
    if (spec.empty() || spec.front() != '-') return false;
  }
  spec.remove_prefix(1);
  skip_spaces(spec);
  if (spec.empty()) return !suffix;  // "a-": to the end
  last = take_number(spec);
  if (last < 0) return false;
  skip_spaces(spec);
  return spec.empty();
}

}  // namespace

RangeSet parse_ranges(std::string_view value, std::int64_t size, std::uint64_t max_ranges,
                      ByteRange* out, std::size_t cap) {
  const RangeSet ignore;
  const RangeSet unsatisfiable{RangeKind::kUnsatisfiable, 0, 0};
  // ranges-specifier = range-unit "=" range-set; no whitespace around '='.
  const auto eq = value.find('=');
  if (eq == std::string_view::npos || !iequals(value.substr(0, eq), "bytes")) return ignore;

  RangeSet set{RangeKind::kSatisfiable, 0, 0};
  ListReader elements(value.substr(eq + 1));
  std::string_view spec;
  bool any = false;
  while (elements.next(spec)) {
    any = true;
    std::int64_t first = 0;
    std::int64_t last = 0;
    bool suffix = false;
    if (!take_spec(spec, first, last, suffix)) return unsatisfiable;
    if (suffix) {
      if (size <= 0) return ignore;  // the whole, empty, representation
      if (last == 0) continue;       // "-0" selects nothing
      first = last >= size ? 0 : size - last;
      last = size - 1;
    } else {
      if (last >= 0 && last < first) continue;  // §14.1.1: invalid, selects nothing
      if (first >= size) continue;
      if (last < 0 || last >= size) last = size - 1;
    }
    if (set.count == max_ranges) return ignore;
    if (set.count < cap) out[set.count] = {first, last};
    ++set.count;
    set.total += last - first + 1;
    // Overlapping ranges: more bytes than the whole (nginx answers it whole).
    if (set.total > size) return ignore;
  }
  if (!any) return ignore;
  if (set.count == 0) return unsatisfiable;
  return set;
}

}  // namespace vigil::http

namespace vigil::http {
namespace {

// A multipart/byteranges answer (RFC 9110 §14.6), in one block from the
// worker's buffer cache: this header, the ranges, the links and buffers of
// the parts (three per range: the boundary with the part's Content-Type,
// its Content-Range value, its bytes; then the closing boundary), and the
// text they point at.
struct RangeCtx {
  std::size_t mem_size = 0;
  std::int64_t size = 0;  // the representation's
  std::size_t count = 0;
  ByteRange* ranges = nullptr;
  Buf* bufs = nullptr;
  Chain* links = nullptr;
  std::string_view
      boundary_header;        // CRLF "--" boundary CRLF [Content-Type CRLF] "Content-Range: bytes "
  std::string_view closing;   // CRLF "--" boundary "--" CRLF
  char* text = nullptr;       // each range's "first-last/size" CRLF CRLF, then the above
  bool passed = false;        // the parts are built
  std::size_t next_link = 0;  // the first link not passed on yet
};

constexpr std::size_t kBoundaryLen = 20;  // digits, as nginx's
constexpr std::size_t kRangeTextMax = 3 * 20 + 2 + 4;
constexpr std::string_view kMultipartType = "multipart/byteranges; boundary=";

RangeCtx* ctx_of(const Request& r) {
  return static_cast<RangeCtx*>(r.ctx[range_module().index()]);
}

std::size_t align_up(std::size_t n) {
  constexpr std::size_t a = alignof(std::max_align_t);
  return (n + a - 1) / a * a;
}

// A boundary string for this response: digits that differ from response to
// response (RFC 2046 §5.1.1 wants one absent from the parts; a 20-digit
// number that changes each time makes a clash with a file's bytes unlikely).
void make_boundary(char* out) {
  thread_local std::uint64_t state = [] {
    std::uint64_t s = static_cast<std::uint64_t>(clock::now_sec()) * 0x9e3779b97f4a7c15ULL;
    s ^= static_cast<std::uint64_t>(::getpid()) << 32;
    s ^= reinterpret_cast<std::uintptr_t>(&s);
    return s;
  }();
  // splitmix64: a new well-mixed value per call.
  state += 0x9e3779b97f4a7c15ULL;
  std::uint64_t z = state;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  for (std::size_t i = kBoundaryLen; i-- > 0;) {
    out[i] = static_cast<char>('0' + z % 10);
    z /= 10;
  }
}

// The multipart head: builds the context (ranges from `value`, which gave
// `set`), sets Content-Type and the exact Content-Length. Returns 0, or 500
// when no memory could be had.
int multipart_header(Request& r, std::string_view value, std::int64_t size,
                     std::uint64_t max_ranges, const RangeSet& set) {
  release_range(r);  // a second head (an error page after an internal redirect)
  HeadersOut& h = r.headers_out;
  const std::size_t n = set.count;
  const std::size_t nbufs = 3 * n + 1;
  const std::string_view ctype = h.content_type;
  const std::size_t boundary_header_len =
      2 + 2 + kBoundaryLen + 2 + (ctype.empty() ? 0 : 14 + ctype.size() + 2) + 21;
  const std::size_t closing_len = 2 + 2 + kBoundaryLen + 2 + 2;
  const std::size_t fixed = align_up(sizeof(RangeCtx)) + align_up(n * sizeof(ByteRange)) +
                            align_up(nbufs * sizeof(Buf)) + align_up(nbufs * sizeof(Chain));
  const std::size_t mem_size = fixed + n * kRangeTextMax + boundary_header_len + closing_len +
                               kMultipartType.size() + kBoundaryLen;
  char* mem = r.hc->worker->buffers().get(mem_size);
  if (mem == nullptr) return 500;
  auto* x = new (mem) RangeCtx();
  r.ctx[range_module().index()] = x;
  x->mem_size = mem_size;
  x->size = size;
  x->count = n;
  char* p = mem + align_up(sizeof(RangeCtx));
  x->ranges = new (p) ByteRange[n];
  p += align_up(n * sizeof(ByteRange));
  x->bufs = new (p) Buf[nbufs];
  p += align_up(nbufs * sizeof(Buf));
  x->links = new (p) Chain[nbufs];
  p += align_up(nbufs * sizeof(Chain));
  x->text = p;
  (void)parse_ranges(value, size, max_ranges, x->ranges, n);

  char boundary[kBoundaryLen];
  make_boundary(boundary);
  const std::string_view b(boundary, kBoundaryLen);
  // Each range's Content-Range value, then the shared texts.
  std::int64_t length = 0;
  char* t = x->text;
  for (std::size_t i = 0; i < n; ++i) {
    const ByteRange& br = x->ranges[i];
    const int len = std::snprintf(t, kRangeTextMax + 1, "%lld-%lld/%lld\r\n\r\n",
                                  static_cast<long long>(br.first), static_cast<long long>(br.last),
                                  static_cast<long long>(size));
    x->bufs[3 * i + 1].reset(t, static_cast<std::size_t>(len));
    x->bufs[3 * i + 1].last = t + len;
    t += len;
    length += len + br.length();
  }
  auto put = [&t](std::string_view s) {
    std::memcpy(t, s.data(), s.size());
    t += s.size();
  };
  char* start = t;
  put("\r\n--");
  put(b);
  put("\r\n");
  if (!ctype.empty()) {
    put("Content-Type: ");
    put(ctype);
    put("\r\n");
  }
  put("Content-Range: bytes ");
  x->boundary_header = std::string_view(start, static_cast<std::size_t>(t - start));
  start = t;
  put("\r\n--");
  put(b);
  put("--\r\n");
  x->closing = std::string_view(start, static_cast<std::size_t>(t - start));
  start = t;
  put(kMultipartType);
  put(b);
  h.content_type = std::string_view(start, static_cast<std::size_t>(t - start));
  length += static_cast<std::int64_t>(n * x->boundary_header.size() + x->closing.size());
  h.content_length = length;
  return 0;
}

}  // namespace

// The range filter's header side (nginx's ngx_http_range_header_filter):
// a GET whose Range (and If-Range, RFC 9110 §13.1.5: a strong etag or the
// exact date) selects byte ranges of a 200 that accepts ranges becomes a 206:
// one range is sent as it is (r.body_offset and content_length say which
// bytes the handler sends), several as multipart/byteranges (the body
// filter below); an unsatisfiable Range is 416 with "bytes */size".
int range_header_filter(Request& r) {
  HeadersOut& h = r.headers_out;
  const std::uint64_t max_ranges = loc_conf<RangeConf>(*r.loc, range_module()).max_ranges;
  if (h.accept_ranges && max_ranges == 0) {
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
  ByteRange br;
  const RangeSet set = parse_ranges(r.range, size, max_ranges, &br, 1);
  if (set.kind == RangeKind::kIgnore) return 0;
  if (set.kind == RangeKind::kUnsatisfiable) {
    const int n = std::snprintf(r.content_range, sizeof r.content_range, "bytes */%lld",
                                static_cast<long long>(size));
    r.content_range_len = static_cast<std::uint8_t>(n > 0 ? n : 0);
    return 416;
  }
  if (set.count > 1) {
    if (const int rc = multipart_header(r, r.range, size, max_ranges, set); rc != 0) return rc;
    h.status = 206;
    h.accept_ranges = false;
    return 0;
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

// The body side of a multipart answer (nginx's ngx_http_range_multipart_body):
// the producer passes the whole representation in one buffer; each part
// points into it (a file range stays a file range: nothing is copied), in
// the order the ranges were asked, overlapping or not.
namespace {

// The parts go down the chain kPassAtOnce links at a time, the next ones
// once the filters after this one took all of the last (kBodyOk): a filter
// that reads what it is given (charset) holds a bounded number of buffers.
constexpr std::size_t kPassAtOnce = 96;

int pass_parts(Request& r, RangeCtx& x, BodyFilterNext next) {
  const std::size_t nlinks = 3 * x.count + 1;
  for (;;) {
    const std::size_t end = std::min(x.next_link + kPassAtOnce, nlinks);
    Chain* first = &x.links[x.next_link];
    x.links[end - 1].next = nullptr;
    x.next_link = end;
    const int rc = next(r, first);
    if (rc != kBodyOk || x.next_link == nlinks) return rc;
  }
}

}  // namespace

int range_body_filter(Request& r, Chain* in, BodyFilterNext next) {
  RangeCtx* x = ctx_of(r);
  if (x == nullptr || r.header_only || (in == nullptr && !x->passed)) return next(r, in);
  if (x->passed) {
    // Nothing follows the closing boundary.
    for (Chain* cl = in; cl != nullptr; cl = cl->next) {
      cl->buf->pos = cl->buf->last;
      cl->buf->file_pos = cl->buf->file_last;
    }
    const int rc = next(r, nullptr);
    if (rc != kBodyOk || x->next_link == 3 * x->count + 1) return rc;
    return pass_parts(r, *x, next);
  }
  const Buf& whole = *in->buf;
  if (in->next != nullptr || !whole.last_buf ||
      static_cast<std::int64_t>(whole.size()) != x->size) {
    VIGIL_LOG(*r.c->log, kAlert, 0, "*%llu range filter: the representation is not in one buffer",
              static_cast<unsigned long long>(r.c->number));
    return kBodyError;
  }
  // The texts are only read: the writer moves each buffer's own marks.
  char* header = const_cast<char*>(x->boundary_header.data());
  for (std::size_t i = 0; i < x->count; ++i) {
    const ByteRange& br = x->ranges[i];
    Buf& head = x->bufs[3 * i];
    head = Buf{};
    head.start = head.pos = header;
    head.end = head.last = header + x->boundary_header.size();
    Buf& part = x->bufs[3 * i + 2];
    part = Buf{};
    if (whole.in_file) {
      part.in_file = true;
      part.file_fd = whole.file_fd;
      part.file_pos = whole.file_pos + br.first;
      part.file_last = part.file_pos + br.length();
    } else {
      part.start = part.pos = whole.pos + br.first;
      part.end = part.last = part.pos + br.length();
    }
  }
  Buf& closing = x->bufs[3 * x->count];
  closing = Buf{};
  closing.start = closing.pos = const_cast<char*>(x->closing.data());
  closing.end = closing.last = closing.pos + x->closing.size();
  closing.last_buf = true;
  const std::size_t nbufs = 3 * x->count + 1;
  for (std::size_t i = 0; i < nbufs; ++i) {
    x->links[i].buf = &x->bufs[i];
    x->links[i].next = i + 1 < nbufs ? &x->links[i + 1] : nullptr;
  }
  x->passed = true;
  x->next_link = 0;
  // The parts point into the producer's buffer, which stays valid until the
  // request ends (a file the request holds open, or memory of its own).
  return pass_parts(r, *x, next);
}

bool range_multipart(const Request& r) {
  return ctx_of(r) != nullptr;
}

void release_range(Request& r) {
  void*& slot = r.ctx[range_module().index()];
  auto* x = static_cast<RangeCtx*>(slot);
  if (x == nullptr) return;
  const std::size_t size = x->mem_size;
  x->~RangeCtx();
  r.hc->worker->buffers().put(reinterpret_cast<char*>(x), size);
  slot = nullptr;
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
