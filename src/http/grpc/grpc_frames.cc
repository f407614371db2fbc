// The backend's frames (nginx's ngx_http_grpc_process_header and
// ngx_http_grpc_filter): parsed as they arrive, whatever the reads cut.
// Up to the response head, in the head buffer; after it, in the ring
// buffer the core read into, where each DATA payload of our stream is moved
// down over the frame heads and padding before it, so the buffer ends up
// holding the body alone. Header blocks go through nghttp2's HPACK decoder
// piece by piece; their fields are copied into a worker buffer.
#include <nghttp2/nghttp2.h>

#include <cstdio>
#include <cstring>

#include "codec/tokens.h"
#include "core/conf/values.h"
#include "http/core/worker.h"
#include "http/grpc/grpc.h"
#include "vigil/core/log.h"

namespace vigil::http::grpc {
namespace {

using upstream_core::HeadResult;
using upstream_core::kMaxResponseFields;
using upstream_core::log_error;

constexpr std::uint8_t kData = 0x0;
constexpr std::uint8_t kHeaders = 0x1;
constexpr std::uint8_t kRstStream = 0x3;
constexpr std::uint8_t kSettings = 0x4;
constexpr std::uint8_t kPushPromise = 0x5;
constexpr std::uint8_t kPing = 0x6;
constexpr std::uint8_t kGoaway = 0x7;
constexpr std::uint8_t kWindowUpdate = 0x8;
constexpr std::uint8_t kContinuation = 0x9;

constexpr std::uint8_t kEndStream = 0x1;
constexpr std::uint8_t kAck = 0x1;
constexpr std::uint8_t kEndHeaders = 0x4;
constexpr std::uint8_t kPadded = 0x8;
constexpr std::uint8_t kPriority = 0x20;

enum class Step : std::uint8_t { kMore, kHead, kError };

std::uint32_t be32(const std::uint8_t* p) {
  return (static_cast<std::uint32_t>(p[0]) << 24) | (static_cast<std::uint32_t>(p[1]) << 16) |
         (static_cast<std::uint32_t>(p[2]) << 8) | p[3];
}

Step fail(GrpcState& gs, const char* what) {
  log_error(gs, static_cast<int>(LogLevel::kError), 0, what);
  gs.upstream_reusable = false;
  return Step::kError;
}

bool valid_name(std::string_view n) {
  if (n.empty()) return false;
  for (unsigned char ch : n) {
    if (ch <= 0x20 || ch >= 0x7f || (ch >= 'A' && ch <= 'Z') || ch == ':') return false;
  }
  return true;
}

bool valid_value(std::string_view v) {
  for (char ch : v) {
    if (ch == '\r' || ch == '\n' || ch == '\0') return false;
  }
  return true;
}

// One decoded field of the response head or its trailers.
Step add_field(GrpcState& gs, std::string_view name, std::string_view value) {
  if (!name.empty() && name[0] == ':') {
    if (gs.head_done || name != ":status" || gs.status_seen || value.size() != 3) {
      return fail(gs, "upstream sent invalid http2 pseudo-header");
    }
    int status = 0;
    for (char ch : value) {
      if (ch < '0' || ch > '9') return fail(gs, "upstream sent invalid :status");
      status = status * 10 + (ch - '0');
    }
    if (status < 100) return fail(gs, "upstream sent invalid :status");
    gs.resp.status = status;
    gs.status_seen = true;
    return Step::kMore;
  }
  if (!valid_name(name) || !valid_value(value)) {
    return fail(gs, "upstream sent invalid header");
  }
  if (gs.fields_mem == nullptr) {
    const std::size_t size = gs.conf->buffer_size;
    gs.fields_mem = gs.r->hc->worker->buffers().get(size);
    if (gs.fields_mem == nullptr) return fail(gs, "no memory for the upstream's header");
    gs.fields_cap = static_cast<std::uint32_t>(size);
  }
  if (gs.fields_used + name.size() + value.size() > gs.fields_cap) {
    return fail(gs, "upstream sent too big header");
  }
  char* at = gs.fields_mem + gs.fields_used;
  std::memcpy(at, name.data(), name.size());
  std::memcpy(at + name.size(), value.data(), value.size());
  gs.fields_used += static_cast<std::uint32_t>(name.size() + value.size());
  HeaderField f;
  f.name = std::string_view(at, name.size());
  f.value = std::string_view(at + name.size(), value.size());
  f.id = header_id(f.name);
  if (!gs.head_done) {
    if (gs.nfields == kMaxResponseFields) return fail(gs, "upstream sent too many header fields");
    if (f.id == HeaderId::kContentLength) {
      const auto n = parse_number(f.value);
      if (!n || *n < 0) return fail(gs, "upstream sent invalid \"Content-Length\" header");
      gs.resp.content_length = *n;
    }
    gs.fields[gs.nfields++] = f;
  } else {
    if (gs.ntrailers == kMaxTrailers) return fail(gs, "upstream sent too many trailers");
    gs.trailers[gs.ntrailers++] = f;
  }
  return Step::kMore;
}

// Feeds a piece of a header block to the decoder (`final`: the block ends).
Step inflate(GrpcState& gs, const std::uint8_t* in, std::size_t n, bool final) {
  if (gs.inflater == nullptr && nghttp2_hd_inflate_new(&gs.inflater) != 0) {
    gs.inflater = nullptr;
    return fail(gs, "no memory for the HPACK decoder");
  }
  for (;;) {
    nghttp2_nv nv;
    int flags = 0;
    const ssize_t rv = nghttp2_hd_inflate_hd2(gs.inflater, &nv, &flags, in, n, final ? 1 : 0);
    if (rv < 0) return fail(gs, "upstream sent invalid http2 table index");
    in += rv;
    n -= static_cast<std::size_t>(rv);
    if (flags & NGHTTP2_HD_INFLATE_EMIT) {
      const Step st = add_field(gs, std::string_view(reinterpret_cast<char*>(nv.name), nv.namelen),
                                std::string_view(reinterpret_cast<char*>(nv.value), nv.valuelen));
      if (st == Step::kError) return st;
    }
    if (flags & NGHTTP2_HD_INFLATE_FINAL) {
      nghttp2_hd_inflate_end_headers(gs.inflater);
      return Step::kMore;
    }
    if (n == 0 && !(flags & NGHTTP2_HD_INFLATE_EMIT)) return Step::kMore;
  }
}

void open_windows(GrpcState& gs, bool stream_too) {
  // Our windows start at the largest; they are topped up once half is used.
  std::uint8_t inc[4];
  if (gs.conn->recv_window < kMaxWindow / 2) {
    const auto v = static_cast<std::uint32_t>(kMaxWindow - gs.conn->recv_window);
    inc[0] = static_cast<std::uint8_t>(v >> 24);
    inc[1] = static_cast<std::uint8_t>(v >> 16);
    inc[2] = static_cast<std::uint8_t>(v >> 8);
    inc[3] = static_cast<std::uint8_t>(v);
    if (queue_frame(gs, kWindowUpdate, 0, 0, inc, 4)) gs.conn->recv_window = kMaxWindow;
  }
  if (stream_too && gs.recv_window < kMaxWindow / 2) {
    const auto v = static_cast<std::uint32_t>(kMaxWindow - gs.recv_window);
    inc[0] = static_cast<std::uint8_t>(v >> 24);
    inc[1] = static_cast<std::uint8_t>(v >> 16);
    inc[2] = static_cast<std::uint8_t>(v >> 8);
    inc[3] = static_cast<std::uint8_t>(v);
    if (queue_frame(gs, kWindowUpdate, 0, gs.id, inc, 4)) gs.recv_window = kMaxWindow;
  }
}

Step setting(GrpcState& gs, std::uint16_t id, std::uint32_t v) {
  switch (id) {
    case 0x2:  // ENABLE_PUSH
      if (v > 1) return fail(gs, "upstream sent invalid SETTINGS_ENABLE_PUSH");
      break;
    case 0x4: {  // INITIAL_WINDOW_SIZE
      if (v > kMaxWindow) return fail(gs, "upstream sent too large initial window size");
      const std::int64_t delta = static_cast<std::int64_t>(v) - gs.conn->init_window;
      gs.conn->init_window = v;
      gs.send_window += delta;
      if (delta > 0 && gs.body_blocked) upstream_core::want_send(gs);
      break;
    }
    case 0x5:  // MAX_FRAME_SIZE
      if (v < 16384 || v > 16777215) return fail(gs, "upstream sent invalid max frame size");
      gs.conn->max_frame = v;
      break;
    default:
      break;  // the table size (we keep no table), concurrency, field list size
  }
  return Step::kMore;
}

// The current frame is complete.
Step frame_end(GrpcState& gs) {
  gs.fstage = FrameStage::kHeader;
  const std::uint8_t* s = gs.small;
  switch (gs.frame_type) {
    case kData:
      if (gs.frame_stream == gs.id && (gs.frame_flags & kEndStream)) {
        gs.end_stream = true;
        gs.resp_done = true;
      }
      open_windows(gs, gs.frame_stream == gs.id && !gs.end_stream);
      return Step::kMore;
    case kHeaders:
    case kContinuation: {
      if (!(gs.frame_flags & kEndHeaders)) return Step::kMore;
      gs.in_headers = false;
      if (inflate(gs, nullptr, 0, true) == Step::kError) return Step::kError;
      if (!gs.head_done) {
        if (!gs.status_seen) return fail(gs, "upstream sent no :status");
        if (gs.resp.status < 200) {
          // An interim response (100, 103): the final one follows.
          gs.status_seen = false;
          gs.nfields = 0;
          gs.fields_used = 0;
          if (gs.end_stream) return fail(gs, "upstream sent an interim response with END_STREAM");
          return Step::kMore;
        }
        gs.head_done = true;
        return Step::kHead;
      }
      gs.trailers_done = true;
      gs.r->headers_out.trailers = gs.trailers;
      gs.r->headers_out.ntrailers = gs.ntrailers;
      gs.resp_trailers = gs.trailers;
      gs.nresp_trailers = gs.ntrailers;
      gs.resp_done = true;
      return Step::kMore;
    }
    case kSettings: {
      if (gs.frame_flags & kAck) return Step::kMore;
      if (!queue_frame(gs, kSettings, kAck, 0, nullptr, 0)) {
        return fail(gs, "too many control frames queued for upstream");
      }
      upstream_core::want_send(gs);
      return Step::kMore;
    }
    case kPing:
      if (gs.frame_flags & kAck) return Step::kMore;
      if (!queue_frame(gs, kPing, kAck, 0, s, 8)) {
        return fail(gs, "too many control frames queued for upstream");
      }
      upstream_core::want_send(gs);
      return Step::kMore;
    case kWindowUpdate: {
      const std::uint32_t inc = be32(s) & 0x7fffffff;
      if (inc == 0) return fail(gs, "upstream sent WINDOW_UPDATE frame with zero increment");
      if (gs.frame_stream == 0) {
        gs.conn->send_window += inc;
      } else if (gs.frame_stream == gs.id) {
        gs.send_window += inc;
      } else {
        return Step::kMore;  // a stream of an earlier request
      }
      if (gs.send_window > kMaxWindow || gs.conn->send_window > kMaxWindow) {
        return fail(gs, "upstream sent too large window update");
      }
      if (gs.body_blocked) upstream_core::want_send(gs);
      return Step::kMore;
    }
    case kRstStream: {
      if (gs.frame_stream != gs.id) return Step::kMore;
      const std::uint32_t code = be32(s);
      if (gs.end_stream && code == 0) return Step::kMore;  // NO_ERROR after the response
      char what[96];
      std::snprintf(what, sizeof what, "upstream rejected request with error %u", code);
      return fail(gs, what);
    }
    case kGoaway: {
      gs.upstream_reusable = false;
      const std::uint32_t last = be32(s) & 0x7fffffff;
      if (last < gs.id) {
        char what[96];
        std::snprintf(what, sizeof what, "upstream sent goaway with error %u", be32(s + 4));
        return fail(gs, what);
      }
      return Step::kMore;
    }
    default:
      return Step::kMore;  // PRIORITY, unknown types
  }
}

// The frame head in gs.fh is complete: what its payload will be.
Step frame_start(GrpcState& gs) {
  const std::uint8_t* h = gs.fh;
  const std::uint32_t len = (static_cast<std::uint32_t>(h[0]) << 16) |
                            (static_cast<std::uint32_t>(h[1]) << 8) | h[2];
  gs.frame_type = h[3];
  gs.frame_flags = h[4];
  gs.frame_stream = be32(h + 5) & 0x7fffffff;
  gs.frame_rest = len;
  gs.skip_head = 0;
  gs.padding = 0;
  gs.pad_pending = false;
  gs.small_len = 0;
  gs.fstage = FrameStage::kPayload;
  if (len > kDefaultFrame) return fail(gs, "upstream sent frame too large");
  if (gs.in_headers && gs.frame_type != kContinuation) {
    return fail(gs, "upstream sent unexpected http2 frame in a header block");
  }
  switch (gs.frame_type) {
    case kData:
      if (gs.frame_stream == 0) return fail(gs, "upstream sent DATA frame for stream 0");
      if (gs.frame_stream == gs.id && (!gs.head_done || gs.end_stream)) {
        return fail(gs, "upstream sent unexpected DATA frame");
      }
      gs.pad_pending = (gs.frame_flags & kPadded) != 0;
      gs.conn->recv_window -= len;
      if (gs.frame_stream == gs.id) gs.recv_window -= len;
      break;
    case kHeaders:
      if (gs.frame_stream != gs.id) return fail(gs, "upstream sent HEADERS frame for unknown stream");
      if (gs.end_stream) return fail(gs, "upstream sent HEADERS frame after the end of the stream");
      if (gs.head_done && !(gs.frame_flags & kEndStream)) {
        return fail(gs, "upstream sent trailer without END_STREAM flag");
      }
      if (gs.frame_flags & kEndStream) gs.end_stream = true;
      gs.pad_pending = (gs.frame_flags & kPadded) != 0;
      gs.skip_head = (gs.frame_flags & kPriority) ? 5 : 0;
      gs.in_headers = true;
      break;
    case kContinuation:
      if (!gs.in_headers || gs.frame_stream != gs.id) {
        return fail(gs, "upstream sent unexpected CONTINUATION frame");
      }
      break;
    case kSettings:
      if (gs.frame_stream != 0 || ((gs.frame_flags & kAck) ? len != 0 : len % 6 != 0)) {
        return fail(gs, "upstream sent invalid SETTINGS frame");
      }
      break;
    case kPing:
      if (gs.frame_stream != 0 || len != 8) return fail(gs, "upstream sent invalid PING frame");
      break;
    case kWindowUpdate:
      if (len != 4) return fail(gs, "upstream sent invalid WINDOW_UPDATE frame");
      break;
    case kRstStream:
      if (len != 4 || gs.frame_stream == 0) return fail(gs, "upstream sent invalid RST_STREAM frame");
      break;
    case kGoaway:
      if (len < 8 || gs.frame_stream != 0) return fail(gs, "upstream sent invalid GOAWAY frame");
      break;
    case kPushPromise:
      return fail(gs, "upstream sent unexpected push promise frame");
    default:
      break;
  }
  if (len == 0) return frame_end(gs);
  return Step::kMore;
}

// Parses [p, end): our DATA payload is moved down to w. Stops after the
// response head (Step::kHead, p after it).
Step parse(GrpcState& gs, char*& p, char* const end, char*& w) {
  while (p < end) {
    if (gs.fstage == FrameStage::kHeader) {
      while (gs.fh_len < 9 && p < end) gs.fh[gs.fh_len++] = static_cast<std::uint8_t>(*p++);
      if (gs.fh_len < 9) return Step::kMore;
      gs.fh_len = 0;
      const Step st = frame_start(gs);
      if (st != Step::kMore) return st;
      continue;
    }
    const auto avail = static_cast<std::uint32_t>(
        static_cast<std::size_t>(end - p) < gs.frame_rest ? end - p : gs.frame_rest);
    std::uint32_t used = avail;
    switch (gs.frame_type) {
      case kData:
      case kHeaders:
      case kContinuation: {
        if (gs.pad_pending) {
          gs.padding = static_cast<std::uint8_t>(*p);
          gs.pad_pending = false;
          used = 1;
          if (gs.padding + gs.skip_head > gs.frame_rest - 1) {
            return fail(gs, "upstream sent http2 frame with too long padding");
          }
          break;
        }
        if (gs.skip_head > 0) {
          used = avail < gs.skip_head ? avail : gs.skip_head;
          gs.skip_head -= used;
          break;
        }
        const std::uint32_t content = gs.frame_rest - gs.padding;
        if (content == 0) break;  // padding: dropped
        used = avail < content ? avail : content;
        if (gs.frame_type == kData) {
          if (gs.frame_stream == gs.id) {
            std::memmove(w, p, used);
            w += used;
          }
        } else if (inflate(gs, reinterpret_cast<const std::uint8_t*>(p), used, false) ==
                   Step::kError) {
          return Step::kError;
        }
        break;
      }
      case kSettings:
        used = 0;
        while (used < avail) {
          gs.small[gs.small_len++] = static_cast<std::uint8_t>(p[used++]);
          if (gs.small_len < 6) continue;
          gs.small_len = 0;
          const auto id = static_cast<std::uint16_t>((gs.small[0] << 8) | gs.small[1]);
          if (setting(gs, id, be32(gs.small + 2)) == Step::kError) return Step::kError;
        }
        break;
      case kPing:
      case kWindowUpdate:
      case kRstStream:
      case kGoaway:
        used = 0;
        while (used < avail && gs.small_len < sizeof gs.small) {
          gs.small[gs.small_len++] = static_cast<std::uint8_t>(p[used++]);
        }
        if (used < avail) used = avail;  // GOAWAY's debug data: dropped
        break;
      default:
        break;  // skipped
    }
    p += used;
    gs.frame_rest -= used;
    if (gs.frame_rest == 0) {
      const Step st = frame_end(gs);
      if (st != Step::kMore) return st;
    }
  }
  return Step::kMore;
}

// Sends the control frames still queued when the response is complete, so
// the connection goes back to the cache with nothing owed to the backend;
// what does not go at once costs the connection its reuse.
void flush_at_end(GrpcState& gs) {
  if (gs.fstage != FrameStage::kHeader || gs.fh_len != 0) gs.upstream_reusable = false;
  if (gs.ctl_len == 0 || gs.u == nullptr) return;
  if (gs.ctl_pending != nullptr) {
    gs.upstream_reusable = false;
    return;
  }
  Connection& c = *gs.u;
  const long n = c.send(c, gs.ctl, gs.ctl_len);
  if (n != static_cast<long>(gs.ctl_len)) gs.upstream_reusable = false;
  gs.ctl_len = 0;
}

}  // namespace

HeadResult process_header(Upstream& u, Buf& b) {
  auto& gs = static_cast<GrpcState&>(u);
  char* w = b.pos;  // no DATA of ours before the head
  const Step st = parse(gs, b.pos, b.last, w);
  if (st == Step::kError) return HeadResult::kInvalid;
  if (st == Step::kHead) {
    ResponseHead& h = gs.resp;
    h.version = 1001;
    h.keep_alive = true;
    if (gs.r->line.method == Method::kHead || h.status == 204 || h.status == 304) {
      h.body = BodyKind::kNone;
    } else if (gs.end_stream) {
      h.body = BodyKind::kLength;
      h.content_length = 0;
    } else if (h.content_length >= 0) {
      h.body = BodyKind::kLength;
    } else {
      h.body = BodyKind::kChunked;
    }
    return HeadResult::kDone;
  }
  // All taken: the next read starts the buffer over.
  b.pos = b.last = b.start;
  return HeadResult::kAgain;
}

bool input_filter_init(Upstream& u) {
  auto& gs = static_cast<GrpcState&>(u);
  if (gs.end_stream) {
    gs.resp_done = true;
    flush_at_end(gs);
  }
  return true;
}

bool input_filter(Upstream& u, Buf& b, char* p, std::size_t n) {
  auto& gs = static_cast<GrpcState&>(u);
  char* w = p;
  char* in = p;
  const Step st = parse(gs, in, p + n, w);
  b.last = w;
  if (st == Step::kError || (st == Step::kHead)) {
    // Logged: the response ends here, short of its end.
    gs.premature = true;
    gs.upstream_eof = true;
    gs.upstream_reusable = false;
    return true;
  }
  if (gs.resp_done) {
    flush_at_end(gs);
  } else if (gs.ctl_len > 0) {
    upstream_core::want_send(gs);
  }
  return true;
}

}  // namespace vigil::http::grpc
