// The chunked body filter (RFC 9112 §7.1; nginx's ngx_http_chunked_filter):
// when HTTP/1's head writer chose chunked framing for the response (a body of
// unknown length to an HTTP/1.1 client: body_framing in http/v1/response.cc),
// the buffers of each call become one chunk, and the last buffer brings the
// last chunk. The size line and the CRLFs are the request's own memory
// (r.chunk_frame; the trailer section, when headers_out has trailers or
// add_trailer has fields for the response, in a worker buffer it keeps), so one chunk's framing is in flight at a time: a producer
// calls again once the writer has sent what it was given (kBodyOk), as every
// producer in the tree does.
#include <cstring>

#include "http/core/filters.h"
#include "http/core/request.h"
#include "http/core/worker.h"
#include "http/filters/add_header.h"
#include "http/filters/trailers.h"
#include "vigil/core/log.h"

namespace vigil::http {
namespace {

constexpr char kCrlf[] = "\r\n";
constexpr char kCrlfLast[] = "\r\n0\r\n\r\n";
constexpr char kLast[] = "0\r\n\r\n";

// The buffer over constant framing bytes: the writer only reads them.
void point_at(Buf& b, const char* text, std::size_t n) {
  char* p = const_cast<char*>(text);
  b.reset(p, n);
  b.last = p + n;
}

bool sendable(const HeaderField& f) {
  return !f.omit && !f.name.empty() && f.value.find_first_of("\r\n") == std::string_view::npos;
}

// The trailer section as it is built in a worker buffer the request keeps
// (ChunkFrame::trailer_mem): grown, keeping what is written, as add_trailer's
// values are evaluated one after the other ($sent_trailer_NAME in a value
// sees the fields before it, so each value's length is known only then).
class TrailerWriter {
 public:
  explicit TrailerWriter(Request& r) : r_(r), f_(r.chunk_frame) {}
  // Room for `n` more bytes; false when no buffer could be had.
  bool room(std::size_t n) {
    const std::size_t need = used_ + n;
    if (need <= f_.trailer_size) return true;
    BufferCache& cache = r_.hc->worker->buffers();
    const std::size_t size = (need + 4095) & ~std::size_t{4095};
    char* mem = cache.get(size);
    if (mem == nullptr) return false;
    if (used_ > 0) std::memcpy(mem, f_.trailer_mem, used_);
    if (f_.trailer_mem != nullptr) cache.put(f_.trailer_mem, f_.trailer_size);
    f_.trailer_mem = mem;
    f_.trailer_size = static_cast<std::uint32_t>(size);
    return true;
  }
  void put(std::string_view s) {
    std::memcpy(f_.trailer_mem + used_, s.data(), s.size());
    used_ += s.size();
  }
  char* at() const { return f_.trailer_mem + used_; }
  void set_end(char* p) { used_ = static_cast<std::size_t>(p - f_.trailer_mem); }
  std::size_t used() const { return used_; }

 private:
  Request& r_;
  ChunkFrame& f_;
  std::size_t used_ = 0;
};

// The end of the body with the trailer section (RFC 9112 §7.1.2): [CRLF]
// "0" CRLF, the producer's fields, add_trailer's, CRLF. False when no
// buffer could be had.
bool frame_trailers(Request& r, bool after_data) {
  const HeadersOut& h = r.headers_out;
  ChunkFrame& f = r.chunk_frame;
  std::size_t need = 2 + 3 + 2;
  for (std::uint32_t i = 0; i < h.ntrailers; ++i) {
    if (sendable(h.trailers[i])) need += h.trailers[i].name.size() + h.trailers[i].value.size() + 4;
  }
  TrailerWriter w(r);
  if (!w.room(need)) return false;
  if (after_data) w.put("\r\n");
  w.put("0\r\n");
  f.fields_begin = f.fields_end = static_cast<std::uint32_t>(w.used());
  for (std::uint32_t i = 0; i < h.ntrailers; ++i) {
    const HeaderField& t = h.trailers[i];
    if (!sendable(t)) continue;
    w.put(t.name);
    w.put(": ");
    w.put(t.value);
    w.put("\r\n");
  }
  f.fields_end = static_cast<std::uint32_t>(w.used());
  if (h.expect_trailers && h.add_trailers != nullptr) {
    for (const AddHeader& t : h.add_trailers->headers) {
      if (!adds_for(t, h.status)) continue;
      // name ": " value CRLF, and the section's final CRLF.
      if (!w.room(t.name.size() + 2 + t.value.length(r) + 4)) return false;
      const std::size_t start = w.used();
      w.put(t.name);
      w.put(": ");
      char* const value = w.at();
      char* const end = t.value.write(r, value);
      if (end == value) {  // empty: not sent
        w.set_end(f.trailer_mem + start);
        continue;
      }
      // A CR, LF or NUL a variable brought in would end the field early.
      for (char* q = value; q != end; ++q) {
        if (*q == '\r' || *q == '\n' || *q == '\0') *q = ' ';
      }
      w.set_end(end);
      w.put("\r\n");
      f.fields_end = static_cast<std::uint32_t>(w.used());
    }
  }
  w.put("\r\n");
  f.tail.reset(f.trailer_mem, f.trailer_size);
  f.tail.last = f.trailer_mem + w.used();
  return true;
}

}  // namespace

bool write_trailer_fields(Request& r) {
  return frame_trailers(r, false);
}

bool has_trailers(const Request& r) {
  return r.headers_out.ntrailers > 0 ||
         (r.headers_out.expect_trailers && r.headers_out.add_trailers != nullptr);
}

int chunked_body_filter(Request& r, Chain* in, BodyFilterNext next) {
  if (!r.chunked_out || in == nullptr) return next(r, in);
  ChunkFrame& f = r.chunk_frame;
  if (!f.head.empty() || !f.tail.empty()) {
    VIGIL_LOG(*r.c->log, kAlert, 0,
              "*%llu chunked body: a chunk was passed before the last one was sent",
              static_cast<unsigned long long>(r.c->number));
    return kBodyError;
  }
  std::uint64_t size = 0;
  bool end = false;
  Chain* last = in;
  for (Chain* cl = in; cl != nullptr; cl = cl->next) {
    size += cl->buf->size();
    end = end || cl->buf->last_buf;
    last = cl;
  }
  if (r.obuf != nullptr && r.fd != -1 && r.file_pos < r.file_end) {
    // sendfile off: the writer reads the rest of a file range into r.obuf
    // as it drains (writer.cc), after the filters. A file's length is known,
    // so it is never chunked; a producer that gets here is wrong.
    VIGIL_LOG(*r.c->log, kAlert, 0, "*%llu chunked body: a file range read by the writer",
              static_cast<unsigned long long>(r.c->number));
    return kBodyError;
  }
  Chain* out = in;
  if (size > 0) {
    static constexpr char kHex[] = "0123456789abcdef";
    char digits[16];
    std::size_t n = 0;
    for (std::uint64_t v = size; v != 0; v >>= 4) digits[n++] = kHex[v & 0xf];
    char* p = f.line;
    while (n > 0) *p++ = digits[--n];
    *p++ = '\r';
    *p++ = '\n';
    f.head.reset(f.line, sizeof f.line);
    f.head.last = p;
    f.head_link.buf = &f.head;
    f.head_link.next = in;
    out = &f.head_link;
  }
  if (end && (r.headers_out.ntrailers > 0 || r.headers_out.expect_trailers)) {
    if (!frame_trailers(r, size > 0)) return kBodyError;
  } else if (size > 0 && end) {
    point_at(f.tail, kCrlfLast, sizeof kCrlfLast - 1);
  } else if (size > 0) {
    point_at(f.tail, kCrlf, sizeof kCrlf - 1);
  } else if (end) {
    point_at(f.tail, kLast, sizeof kLast - 1);
  } else {
    return next(r, in);  // nothing to frame (empty buffers)
  }
  f.tail_link.buf = &f.tail;
  f.tail_link.next = nullptr;
  last->next = &f.tail_link;
  return next(r, out);
}

}  // namespace vigil::http
