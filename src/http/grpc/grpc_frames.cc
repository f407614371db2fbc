// The backend's frames (grpc_frames.h): parsed as they arrive, whatever
// the reads cut. Up to the response head, in the head buffer; after it, in
// the ring buffer the core read into. Header blocks go through nghttp2's
// HPACK decoder piece by piece; their fields go to the owner.
#include "http/grpc/grpc_frames.h"

#include <nghttp2/nghttp2.h>

#include <cstdio>
#include <cstring>

#include "core/conf/values.h"
#include "http/v2/frame_head.h"

namespace vigil::http::grpc {
namespace {

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

using Step = FrameStep;

std::uint32_t be32(const std::uint8_t* p) {
  return (static_cast<std::uint32_t>(p[0]) << 24) | (static_cast<std::uint32_t>(p[1]) << 16) |
         (static_cast<std::uint32_t>(p[2]) << 8) | p[3];
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

}  // namespace

FrameStep FrameParser::fail(const char* what) {
  frame_error(what);
  keep_conn = false;
  return Step::kError;
}

// One decoded field of the response head or its trailers.
FrameStep FrameParser::add_field(std::string_view name, std::string_view value) {
  if (!name.empty() && name[0] == ':') {
    if (head_done || name != ":status" || status_seen || value.size() != 3) {
      return fail("upstream sent invalid http2 pseudo-header");
    }
    int st = 0;
    for (char ch : value) {
      if (ch < '0' || ch > '9') return fail("upstream sent invalid :status");
      st = st * 10 + (ch - '0');
    }
    if (st < 100) return fail("upstream sent invalid :status");
    status = st;
    status_seen = true;
    return Step::kMore;
  }
  if (!valid_name(name) || !valid_value(value)) {
    return fail("upstream sent invalid header");
  }
  if (!head_done && name == "content-length") {  // a name is lower case (valid_name)
    const auto n = parse_number(value);
    if (!n || *n < 0) return fail("upstream sent invalid \"Content-Length\" header");
    content_length = *n;
  }
  if (const char* err = store_field(name, value, head_done); err != nullptr) return fail(err);
  return Step::kMore;
}

// Feeds a piece of a header block to the decoder (`final`: the block ends).
FrameStep FrameParser::inflate(const std::uint8_t* in, std::size_t n, bool final) {
  if (inflater == nullptr && nghttp2_hd_inflate_new(&inflater) != 0) {
    inflater = nullptr;
    return fail("no memory for the HPACK decoder");
  }
  for (;;) {
    nghttp2_nv nv;
    int flags = 0;
    const ssize_t rv = nghttp2_hd_inflate_hd2(inflater, &nv, &flags, in, n, final ? 1 : 0);
    if (rv < 0) return fail("upstream sent invalid http2 table index");
    in += rv;
    n -= static_cast<std::size_t>(rv);
    if (flags & NGHTTP2_HD_INFLATE_EMIT) {
      const Step st = add_field(std::string_view(reinterpret_cast<char*>(nv.name), nv.namelen),
                                std::string_view(reinterpret_cast<char*>(nv.value), nv.valuelen));
      if (st == Step::kError) return st;
    }
    if (flags & NGHTTP2_HD_INFLATE_FINAL) {
      nghttp2_hd_inflate_end_headers(inflater);
      return Step::kMore;
    }
    if (n == 0 && !(flags & NGHTTP2_HD_INFLATE_EMIT)) return Step::kMore;
  }
}

void FrameParser::open_windows(bool stream_too) {
  // Our windows start at the largest; they are topped up once half is used.
  std::uint8_t inc[4];
  if (conn->recv_window < kMaxWindow / 2) {
    const auto v = static_cast<std::uint32_t>(kMaxWindow - conn->recv_window);
    inc[0] = static_cast<std::uint8_t>(v >> 24);
    inc[1] = static_cast<std::uint8_t>(v >> 16);
    inc[2] = static_cast<std::uint8_t>(v >> 8);
    inc[3] = static_cast<std::uint8_t>(v);
    if (queue_frame(kWindowUpdate, 0, 0, inc, 4)) conn->recv_window = kMaxWindow;
  }
  if (stream_too && recv_window < kMaxWindow / 2) {
    const auto v = static_cast<std::uint32_t>(kMaxWindow - recv_window);
    inc[0] = static_cast<std::uint8_t>(v >> 24);
    inc[1] = static_cast<std::uint8_t>(v >> 16);
    inc[2] = static_cast<std::uint8_t>(v >> 8);
    inc[3] = static_cast<std::uint8_t>(v);
    if (queue_frame(kWindowUpdate, 0, id, inc, 4)) recv_window = kMaxWindow;
  }
}

FrameStep FrameParser::setting(std::uint16_t setting_id, std::uint32_t v) {
  switch (setting_id) {
    case 0x2:  // ENABLE_PUSH
      if (v > 1) return fail("upstream sent invalid SETTINGS_ENABLE_PUSH");
      break;
    case 0x4: {  // INITIAL_WINDOW_SIZE
      if (v > kMaxWindow) return fail("upstream sent too large initial window size");
      const std::int64_t delta = static_cast<std::int64_t>(v) - conn->init_window;
      if (delta > kMaxWindow - send_window) {
        return fail("upstream sent too large initial window size");  // §6.9.2
      }
      conn->init_window = v;
      send_window += delta;
      if (delta > 0) window_opened();
      break;
    }
    case 0x5:  // MAX_FRAME_SIZE
      if (v < 16384 || v > 16777215) return fail("upstream sent invalid max frame size");
      conn->max_frame = v;
      break;
    default:
      break;  // the table size (we keep no table), concurrency, field list size
  }
  return Step::kMore;
}

// The current frame is complete.
FrameStep FrameParser::frame_end() {
  fstage = FrameStage::kHeader;
  const std::uint8_t* s = small;
  switch (frame_type) {
    case kData:
      if (frame_stream == id && (frame_flags & kEndStream)) {
        end_stream = true;
        frames_done = true;
        if (body_rest > 0) return fail("upstream prematurely closed stream");
      }
      open_windows(frame_stream == id && !end_stream);
      return Step::kMore;
    case kHeaders:
    case kContinuation: {
      if (!(frame_flags & kEndHeaders)) return Step::kMore;
      in_headers = false;
      if (inflate(nullptr, 0, true) == Step::kError) return Step::kError;
      if (!head_done) {
        if (!status_seen) return fail("upstream sent no :status");
        if (status < 200) {
          // An interim response (100, 103): the final one follows.
          status_seen = false;
          content_length = -1;
          drop_fields();
          if (end_stream) return fail("upstream sent an interim response with END_STREAM");
          return Step::kMore;
        }
        head_done = true;
        body_rest = content_length;
        return Step::kHead;
      }
      trailers_done = true;
      frames_done = true;
      if (body_rest > 0) return fail("upstream prematurely closed stream");
      return Step::kMore;
    }
    case kSettings: {
      if (frame_flags & kAck) return Step::kMore;
      if (!queue_frame(kSettings, kAck, 0, nullptr, 0)) {
        return fail("too many control frames queued for upstream");
      }
      control_queued();
      return Step::kMore;
    }
    case kPing:
      if (frame_flags & kAck) return Step::kMore;
      if (!queue_frame(kPing, kAck, 0, s, 8)) {
        return fail("too many control frames queued for upstream");
      }
      control_queued();
      return Step::kMore;
    case kWindowUpdate: {
      const std::uint32_t inc = be32(s) & 0x7fffffff;
      if (inc == 0) return fail("upstream sent WINDOW_UPDATE frame with zero increment");
      if (frame_stream != 0 && frame_stream != id) return Step::kMore;  // an earlier stream
      // The window is checked before it grows (RFC 9113 §6.9.1: past
      // 2^31-1 is a FLOW_CONTROL_ERROR), so it never holds more.
      std::int64_t& window = frame_stream == 0 ? conn->send_window : send_window;
      if (inc > kMaxWindow - window) return fail("upstream sent too large window update");
      window += inc;
      window_opened();
      return Step::kMore;
    }
    case kRstStream: {
      if (frame_stream != id) return Step::kMore;
      const std::uint32_t code = be32(s);
      if (end_stream && code == 0 && !rst_seen) {  // NO_ERROR after the response, once
        rst_seen = true;
        return Step::kMore;
      }
      if (end_stream && code == 0) {
        char what[96];
        std::snprintf(what, sizeof what, "upstream sent frame for closed stream %u", id);
        return fail(what);
      }
      char what[96];
      std::snprintf(what, sizeof what, "upstream rejected request with error %u", code);
      return fail(what);
    }
    case kGoaway: {
      keep_conn = false;
      const std::uint32_t last = be32(s) & 0x7fffffff;
      if (last < id) {
        char what[96];
        std::snprintf(what, sizeof what, "upstream sent goaway with error %u", be32(s + 4));
        return fail(what);
      }
      return Step::kMore;
    }
    default:
      return Step::kMore;  // PRIORITY, unknown types
  }
}

// The frame head in fh is complete: what its payload will be.
FrameStep FrameParser::frame_start() {
  const std::uint8_t* h = fh;
  const std::uint32_t len = (static_cast<std::uint32_t>(h[0]) << 16) |
                            (static_cast<std::uint32_t>(h[1]) << 8) | h[2];
  frame_type = h[3];
  frame_flags = h[4];
  frame_stream = be32(h + 5) & 0x7fffffff;
  frame_rest = len;
  skip_head = 0;
  padding = 0;
  pad_pending = false;
  small_len = 0;
  fstage = FrameStage::kPayload;
  if (len > kDefaultFrame) return fail("upstream sent frame too large");
  if (in_headers && frame_type != kContinuation) {
    return fail("upstream sent unexpected http2 frame in a header block");
  }
  switch (frame_type) {
    case kData:
      if (frame_stream == 0) return fail("upstream sent DATA frame for stream 0");
      if (frame_stream == id && (!head_done || end_stream)) {
        return fail("upstream sent unexpected DATA frame");
      }
      pad_pending = (frame_flags & kPadded) != 0;
      conn->recv_window -= len;
      if (frame_stream == id) recv_window -= len;
      break;
    case kHeaders:
      if (frame_stream != id) return fail("upstream sent HEADERS frame for unknown stream");
      if (end_stream) return fail("upstream sent HEADERS frame after the end of the stream");
      if (head_done && !(frame_flags & kEndStream)) {
        return fail("upstream sent trailer without END_STREAM flag");
      }
      if (frame_flags & kEndStream) end_stream = true;
      pad_pending = (frame_flags & kPadded) != 0;
      skip_head = (frame_flags & kPriority) ? 5 : 0;
      in_headers = true;
      break;
    case kContinuation:
      if (!in_headers || frame_stream != id) {
        return fail("upstream sent unexpected CONTINUATION frame");
      }
      break;
    case kSettings:
      if (frame_stream != 0 || ((frame_flags & kAck) ? len != 0 : len % 6 != 0)) {
        return fail("upstream sent invalid SETTINGS frame");
      }
      break;
    case kPing:
      if (frame_stream != 0 || len != 8) return fail("upstream sent invalid PING frame");
      break;
    case kWindowUpdate:
      if (len != 4) return fail("upstream sent invalid WINDOW_UPDATE frame");
      break;
    case kRstStream:
      if (len != 4 || frame_stream == 0) return fail("upstream sent invalid RST_STREAM frame");
      break;
    case kGoaway:
      if (len < 8 || frame_stream != 0) return fail("upstream sent invalid GOAWAY frame");
      break;
    case kPushPromise:
      return fail("upstream sent unexpected push promise frame");
    default:
      break;
  }
  if (len == 0) return frame_end();
  return Step::kMore;
}

// Parses [p, end): our DATA payload is moved down to w. Stops after the
// response head (Step::kHead, p after it).
FrameStep FrameParser::parse(char*& p, char* const end, char*& w) {
  while (p < end) {
    if (fstage == FrameStage::kHeader) {
      while (fh_len < 9 && p < end) fh[fh_len++] = static_cast<std::uint8_t>(*p++);
      if (fh_len < 9) return Step::kMore;
      fh_len = 0;
      const Step st = frame_start();
      if (st != Step::kMore) return st;
      continue;
    }
    const auto avail = static_cast<std::uint32_t>(
        static_cast<std::size_t>(end - p) < frame_rest ? end - p : frame_rest);
    std::uint32_t used = avail;
    switch (frame_type) {
      case kData:
      case kHeaders:
      case kContinuation: {
        if (pad_pending) {
          padding = static_cast<std::uint8_t>(*p);
          pad_pending = false;
          used = 1;
          if (padding + skip_head > frame_rest - 1) {
            return fail("upstream sent http2 frame with too long padding");
          }
          break;
        }
        if (skip_head > 0) {
          used = avail < skip_head ? avail : skip_head;
          skip_head -= used;
          break;
        }
        // What is left of the content (none once the padding is reached,
        // which a read may cut as well).
        const std::uint32_t content = frame_rest > padding ? frame_rest - padding : 0;
        if (content == 0) break;  // padding: dropped
        used = avail < content ? avail : content;
        if (frame_type == kData) {
          if (frame_stream == id) {
            if (body_rest >= 0) {
              if (used > body_rest) {
                return fail("upstream sent response body larger than indicated content length");
              }
              body_rest -= used;
            }
            std::memmove(w, p, used);
            w += used;
          }
        } else if (inflate(reinterpret_cast<const std::uint8_t*>(p), used, false) == Step::kError) {
          return Step::kError;
        }
        break;
      }
      case kSettings:
        used = 0;
        while (used < avail) {
          small[small_len++] = static_cast<std::uint8_t>(p[used++]);
          if (small_len < 6) continue;
          small_len = 0;
          const auto setting_id = static_cast<std::uint16_t>((small[0] << 8) | small[1]);
          if (setting(setting_id, be32(small + 2)) == Step::kError) return Step::kError;
        }
        break;
      case kPing:
      case kWindowUpdate:
      case kRstStream:
      case kGoaway:
        used = 0;
        while (used < avail && small_len < sizeof small) {
          small[small_len++] = static_cast<std::uint8_t>(p[used++]);
        }
        if (used < avail) used = avail;  // GOAWAY's debug data: dropped
        break;
      default:
        break;  // skipped
    }
    p += used;
    frame_rest -= used;
    if (frame_rest == 0) {
      const Step st = frame_end();
      if (st != Step::kMore) return st;
    }
  }
  return Step::kMore;
}

bool FrameParser::queue_frame(std::uint8_t type, std::uint8_t flags, std::uint32_t stream,
                              const void* payload, std::uint32_t len) {
  if (ctl_len + 9 + len > sizeof ctl) return false;
  char* p = ctl + ctl_len;
  h2::put_frame_head(p, len, type, flags, stream);
  if (len > 0) std::memcpy(p + 9, payload, len);
  ctl_len += 9 + len;
  return true;
}

void FrameParser::reset_frames() {
  conn = nullptr;
  id = 0;
  ctl_len = 0;
  status = 0;
  content_length = -1;
  body_rest = -1;
  rst_seen = false;
  head_done = false;
  end_stream = false;
  trailers_done = false;
  frames_done = false;
  keep_conn = true;
  fstage = FrameStage::kHeader;
  fh_len = 0;
  frame_rest = 0;
  skip_head = 0;
  padding = 0;
  pad_pending = false;
  small_len = 0;
  in_headers = false;
  status_seen = false;
  free_inflater();
}

void FrameParser::free_inflater() {
  if (inflater != nullptr) {
    nghttp2_hd_inflate_del(inflater);
    inflater = nullptr;
  }
}

}  // namespace vigil::http::grpc
