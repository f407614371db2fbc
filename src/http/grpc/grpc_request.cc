// The request to the backend (nginx's ngx_http_grpc_create_request and
// ngx_http_grpc_body_output_filter): the connection preface and the header
// block are built once, HPACK-coded without the dynamic table (literal
// fields, never added to a table: nothing is kept between requests on a
// connection but the stream ids and windows); the body goes as DATA frames
// as the core reads it, within the backend's windows; control frames wait
// in a small queue and go between them.
#include <cstring>

#include "codec/head_writer.h"
#include "http/core/request_body.h"
#include "http/core/worker.h"
#include "http/grpc/grpc.h"
#include "http/v2/frame_head.h"
#include "vigil/core/log.h"

namespace vigil::http::grpc {
namespace {

using upstream_core::hop_by_hop;
using upstream_core::named_by_connection;

constexpr std::uint8_t kData = 0x0;
constexpr std::uint8_t kHeaders = 0x1;
constexpr std::uint8_t kContinuation = 0x9;
constexpr std::uint8_t kEndStream = 0x1;
constexpr std::uint8_t kEndHeaders = 0x4;

// The connection preface, our SETTINGS (no dynamic table, no push, the
// largest stream window) and the connection window opened to the largest.
constexpr unsigned char kPreface[] =
    "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
    "\x00\x00\x12\x04\x00\x00\x00\x00\x00"
    "\x00\x01\x00\x00\x00\x00"
    "\x00\x02\x00\x00\x00\x00"
    "\x00\x04\x7f\xff\xff\xff"
    "\x00\x00\x04\x08\x00\x00\x00\x00\x00"
    "\x7f\xff\x00\x00";
static_assert(sizeof kPreface - 1 == kPrefaceLen);

// An HPACK integer (RFC 7541 §5.1) with an N-bit prefix; `first` holds the
// bits above the prefix.
char* put_int(char* p, std::uint8_t first, unsigned prefix_bits, std::size_t v) {
  const std::size_t max = (std::size_t{1} << prefix_bits) - 1;
  if (v < max) {
    *p++ = static_cast<char>(first | v);
    return p;
  }
  *p++ = static_cast<char>(first | max);
  v -= max;
  while (v >= 128) {
    *p++ = static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<char>(v);
  return p;
}

// A string literal, not Huffman-coded.
char* put_str(char* p, std::string_view s) {
  p = put_int(p, 0, 7, s.size());
  std::memcpy(p, s.data(), s.size());
  return p + s.size();
}

char* put_lower_str(char* p, std::string_view s) {
  p = put_int(p, 0, 7, s.size());
  for (char ch : s) *p++ = (ch >= 'A' && ch <= 'Z') ? static_cast<char>(ch - 'A' + 'a') : ch;
  return p;
}

// A literal field without indexing whose name is static table entry `index`.
char* put_indexed_name(char* p, unsigned index, std::string_view value) {
  p = put_int(p, 0x00, 4, index);
  return put_str(p, value);
}

bool dropped(const Request& r, const GrpcConf& g, const HeaderField& f) {
  if (hop_by_hop(f.name) || iequals(f.name, "host") || f.name.empty() || f.name[0] == ':') {
    return true;
  }
  for (const auto& h : g.set_headers) {
    if (iequals(h.name, f.name)) return true;
  }
  return named_by_connection(r.fields, r.nfields, f.name);
}

}  // namespace

int create_request(Upstream& u) {
  auto& gs = static_cast<GrpcState&>(u);
  Request& r = *gs.r;
  const GrpcConf& g = gs.gconf();

  // :path — the client's target as it came, or after an internal redirect
  // the new URI, escaped, with the arguments.
  std::string_view raw = r.line.target;
  if (r.line.form == TargetForm::kAbsolute) {
    raw = r.line.path.empty() ? std::string_view("/") : r.line.path;
  }
  std::size_t path_len = r.uri_redirected ? 3 * r.uri.size() + 1 + r.line.query.size()
                                          : raw.size() + 1 + r.line.query.size();
  const std::size_t authority_len = g.host_set ? 0 : gs.authority.size();
  std::size_t need = kPrefaceLen + 9 + 32 + r.line.method_name.size() + path_len + authority_len +
                     16;
  for (const auto& h : g.set_headers) need += h.name.size() + 10 + h.value.length(r);
  for (std::uint32_t i = 0; i < r.nfields; ++i) {
    need += r.fields[i].name.size() + r.fields[i].value.size() + 10;
  }
  // Room for a CONTINUATION frame head per 16 KiB of the block.
  need += 9 * (need / kDefaultFrame + 1);
  const std::size_t cap = (need + 1023) & ~std::size_t{1023};
  char* mem = r.hc->worker->buffers().get(cap);
  if (mem == nullptr) return 500;
  gs.head.reset(mem, cap);
  gs.head_cap = static_cast<std::uint32_t>(cap);
  std::memcpy(mem, kPreface, kPrefaceLen);
  gs.headers_off = kPrefaceLen;

  // The header block goes after a gap for the first frame head, then is
  // cut into frames of at most 16384 bytes (the frame size every server
  // takes before its SETTINGS).
  char* block = mem + kPrefaceLen + 9;
  char* p = block;
  if (r.line.method == Method::kGet) {
    *p++ = static_cast<char>(0x82);
  } else if (r.line.method == Method::kPost) {
    *p++ = static_cast<char>(0x83);
  } else {
    p = put_indexed_name(p, 2, r.line.method_name);
  }
  *p++ = static_cast<char>(gs.https ? 0x87 : 0x86);
  // :path (static entry 4), written in place after its length.
  {
    HeadWriter w{p + 6};  // the index and the length take at most 6 bytes
    char* const value = w.p;
    if (r.uri_redirected) {
      w.put_escaped_path(r.uri);
      if (!r.line.query.empty()) {  // nginx: args.len > 0
        *w.p++ = '?';
        w.put(r.line.query);
      }
    } else {
      w.put(raw);
      if (r.line.form == TargetForm::kAbsolute && r.line.has_query) {
        *w.p++ = '?';
        w.put(r.line.query);
      }
    }
    const std::size_t n = static_cast<std::size_t>(w.p - value);
    char len_bytes[8];
    char* le = put_int(put_int(len_bytes, 0x00, 4, 4), 0, 7, n);
    const auto nl = static_cast<std::size_t>(le - len_bytes);
    std::memmove(p + nl, value, n);
    std::memcpy(p, len_bytes, nl);
    gs.uri_off = static_cast<std::uint32_t>(p + nl - mem);
    gs.uri_len = static_cast<std::uint32_t>(n);
    p += nl + n;
  }
  // :authority (static entry 1), unless grpc_set_header names Host: then
  // a "host" field goes with the other set headers instead (nginx).
  if (!g.host_set) {
    p = put_int(p, 0x00, 4, 1);
    p = put_str(p, gs.authority);
  }
  for (const auto& h : g.set_headers) {
    if (h.value.length(r) == 0) continue;  // an empty value: not sent (nginx)
    char* const field = p;
    *p++ = 0x00;
    p = put_lower_str(p, h.name);
    char* const len_at = p;
    char* const value = p + 6;
    char* const end = h.value.write(r, value);
    const auto n = static_cast<std::size_t>(end - value);
    if (n == 0) {
      p = field;
      continue;
    }
    char len_bytes[8];
    char* le = put_int(len_bytes, 0, 7, n);
    const auto nl = static_cast<std::size_t>(le - len_bytes);
    std::memmove(len_at + nl, value, n);
    std::memcpy(len_at, len_bytes, nl);
    p = len_at + nl + n;
  }
  for (std::uint32_t i = 0; i < r.nfields; ++i) {
    const HeaderField& f = r.fields[i];
    if (dropped(r, g, f)) continue;
    *p++ = 0x00;
    p = put_lower_str(p, f.name);
    p = put_str(p, f.value);
  }
  // Frames: HEADERS, then CONTINUATION for what does not fit, each with its
  // 9-byte head in front (the block moved up to make room); the stream id
  // is written by attach once the connection is known.
  const auto block_len = static_cast<std::size_t>(p - block);
  const std::size_t nframes = block_len == 0 ? 1 : (block_len + kDefaultFrame - 1) / kDefaultFrame;
  if (nframes > 1) {
    // Spread the pieces apart from the last one down.
    for (std::size_t f = nframes - 1; f > 0; --f) {
      const std::size_t off = f * kDefaultFrame;
      const std::size_t len = block_len - off < kDefaultFrame ? block_len - off : kDefaultFrame;
      std::memmove(block + off + 9 * f, block + off, len);
    }
  }
  const bool end_stream = !gs.body_out;
  for (std::size_t f = 0; f < nframes; ++f) {
    const std::size_t off = f * kDefaultFrame;
    const std::size_t len = block_len - off < kDefaultFrame ? block_len - off : kDefaultFrame;
    std::uint8_t flags = f + 1 == nframes ? kEndHeaders : 0;
    if (f == 0 && end_stream) flags |= kEndStream;
    h2::put_frame_head(block - 9 + off + 9 * f, static_cast<std::uint32_t>(len),
                       f == 0 ? kHeaders : kContinuation, flags, 0);
  }
  gs.head.last = block + block_len + 9 * (nframes - 1);
  if (nframes > 1 && gs.uri_off + gs.uri_len > kPrefaceLen + 9 + kDefaultFrame) {
    gs.uri_len = 0;  // cut by the split: not logged
  }
  return 0;
}

std::size_t body_output(Upstream& u, Chain* out, std::size_t k) {
  auto& gs = static_cast<GrpcState&>(u);
  Request& r = *gs.r;
  gs.body_blocked = false;
  if (Buf* ctl = control_output(u); ctl != nullptr) out[k++].buf = ctl;
  if (gs.end_sent || gs.conn == nullptr) return k;
  Buf& b = request_body_data(r);
  const bool done = r.body.done;
  std::size_t n = b.size();
  if (n == 0 && !done) return k;
  // What the windows and the backend's frame size let go now.
  std::int64_t allowed = gs.send_window < gs.conn->send_window ? gs.send_window
                                                                : gs.conn->send_window;
  if (allowed > static_cast<std::int64_t>(gs.conn->max_frame)) allowed = gs.conn->max_frame;
  if (n > 0 && allowed <= 0) {
    gs.body_blocked = true;
    return k;
  }
  if (static_cast<std::int64_t>(n) > allowed) n = static_cast<std::size_t>(allowed);
  const bool last = done && n == b.size();
  h2::put_frame_head(gs.data_head, static_cast<std::uint32_t>(n), kData, last ? kEndStream : 0,
                     gs.id);
  gs.data_head_buf.reset(gs.data_head, sizeof gs.data_head);
  gs.data_head_buf.last = gs.data_head + sizeof gs.data_head;
  out[k++].buf = &gs.data_head_buf;
  if (n > 0) {
    // A view of the body buffer: the core refills that buffer only once
    // this send is complete.
    gs.data_buf.reset(b.pos, n);
    gs.data_buf.last = b.pos + n;
    b.pos += n;
    out[k++].buf = &gs.data_buf;
    gs.send_window -= static_cast<std::int64_t>(n);
    gs.conn->send_window -= static_cast<std::int64_t>(n);
  }
  if (last) gs.end_sent = true;
  return k;
}

Buf* control_output(Upstream& u) {
  auto& gs = static_cast<GrpcState&>(u);
  if (gs.ctl_len == 0) return nullptr;
  // The queue's bytes move to the piece in flight, so frames queued while
  // it is sent wait their turn.
  std::memcpy(gs.ctl_flight, gs.ctl, gs.ctl_len);
  gs.ctl_buf.reset(gs.ctl_flight, gs.ctl_len);
  gs.ctl_buf.last = gs.ctl_flight + gs.ctl_len;
  gs.ctl_len = 0;
  return &gs.ctl_buf;
}

}  // namespace vigil::http::grpc
