// An HTTP/2 stream's request (nginx's ngx_http_v2_state_header_complete,
// ngx_http_v2_read_request_body, ngx_http_v2_header_filter and
// ngx_http_v2_send_chain): its head handed to HTTP/1's parser, its body
// read through the request-body API, its response as HEADERS and DATA.
#include <algorithm>
#include <cstring>

#include "event/file_read.h"
#include "http/core/counters.h"
#include "http/core/filters.h"
#include "http/core/phases.h"
#include "http/core/worker.h"
#include "http/filters/trailers.h"
#include "http/v2/h2.h"
#include "http/v2/session.h"
#include "vigil/core/log.h"
#include "vigil/event/loop.h"
#include "vigil/event/posted.h"

namespace vigil::http::h2 {
namespace {

// Head fields kept on the stack for the HEADERS frame; more take a buffer.
constexpr std::size_t kStackFields = 64;

Stream& stream_of(const Request& r) {
  return *r.hc->stream;
}

// Memory of at least `need` bytes from the worker, rounded up to 1 KiB.
char* get_buffer(Session& s, std::size_t need, std::uint32_t& size) {
  const std::size_t n = (need + 1023) & ~std::size_t{1023};
  char* mem = s.worker->buffers().get(n);
  if (mem != nullptr) size = static_cast<std::uint32_t>(n);
  return mem;
}

// Room for `more` bytes after scratch_len, within the head's limit.
bool scratch_room(Stream& st, std::size_t more) {
  Session& s = *st.session;
  const HttpSrvConf& srv = *s.hc->srv;
  const std::size_t need = st.scratch_len + more;
  if (need > srv.large_buffers_size * srv.large_buffers_num) return false;
  if (need <= st.scratch_size) return true;
  std::uint32_t size = 0;
  char* mem = get_buffer(s, std::max<std::size_t>(need, 2 * std::size_t{st.scratch_size}), size);
  if (mem == nullptr) return false;
  if (st.scratch != nullptr) {
    std::memcpy(mem, st.scratch, st.scratch_len);
    s.worker->buffers().put(st.scratch, st.scratch_size);
  }
  st.scratch = mem;
  st.scratch_size = size;
  return true;
}

void append(Stream& st, std::string_view text) {
  std::memcpy(st.scratch + st.scratch_len, text.data(), text.size());
  st.scratch_len += static_cast<std::uint32_t>(text.size());
}

std::string_view scratch_view(const Stream& st, std::uint32_t at, std::uint32_t len) {
  return {st.scratch + at, len};
}

// Wakes the producer of the response: its buffers were taken, or it must
// find out that the stream is gone.
void wake_writer(Stream& st) {
  Event& wev = st.wev;
  if (!wev.active && wev.ready) return;  // not waiting
  wev.active = 0;
  wev.ready = 1;
  if (wev.timer_set) st.fc.loop->del_timer(wev);
  st.fc.loop->post(wev);
}

void wake_reader(Stream& st) {
  if (!st.body_wait) return;
  st.body_wait = false;
  if (st.rev.timer_set) st.fc.loop->del_timer(st.rev);
  st.fc.loop->post(st.rev);
}

// A response that cannot be a Request's: the stream is answered directly.
void answer_directly(Stream& st, const char* status) {
  Session& s = *st.session;
  const nghttp2_nv nv[] = {
      {reinterpret_cast<std::uint8_t*>(const_cast<char*>(":status")),
       reinterpret_cast<std::uint8_t*>(const_cast<char*>(status)), 7, 3, NGHTTP2_NV_FLAG_NONE},
  };
  st.out_eof = true;
  if (nghttp2_submit_response(s.ng, st.id, nv, 1, nullptr) != 0) {
    (void)nghttp2_submit_rst_stream(s.ng, NGHTTP2_FLAG_NONE, st.id, NGHTTP2_INTERNAL_ERROR);
  }
  st.discard = true;
}

void consume(Stream& st, std::size_t n);

// The DATA frames do not add up to the declared content-length (RFC 9113
// §8.1.1): the body's reader fails with 400, as nginx's; a body nobody
// reads ends the stream with PROTOCOL_ERROR, unless its response is
// complete.
void body_mismatch(Stream& st, const char* why) {
  Session& s = *st.session;
  VIGIL_LOG(*s.c->log, kInfo, 0, "*%llu %s: %lld of %lld bytes",
            static_cast<unsigned long long>(s.c->number), why, static_cast<long long>(st.received),
            static_cast<long long>(st.content_length));
  st.content_length = -1;  // said once
  if (st.r == nullptr || st.discard) {
    if (!st.out_eof && !st.closed) {
      (void)nghttp2_submit_rst_stream(s.ng, NGHTTP2_FLAG_NONE, st.id, NGHTTP2_PROTOCOL_ERROR);
    }
    return;
  }
  st.body_error = true;
  st.discard = true;
  consume(st, st.pre_last - st.pre_pos);
  st.pre_pos = st.pre_last = 0;
  st.body_wait = true;
  wake_reader(st);
}

// The request's connection has no socket of its own to read: its read
// event is the body reader's (posted when DATA comes) or the request's.
void body_event(Event& rev) {
  Connection& fc = *rev.owner<Connection>();
  auto& hc = *static_cast<HttpConnection*>(fc.data);
  if (hc.request == nullptr) return;
  Request& r = *hc.request;
  RequestBody& rb = r.body;
  if (rev.timedout) {
    rev.timedout = 0;
    VIGIL_LOG(*fc.log, kInfo, ETIMEDOUT, "*%llu client timed out reading the body",
              static_cast<unsigned long long>(fc.number));
    fc.timedout = 1;
    rb.failed = true;
    rb.status = 408;
    rb.client_gone = true;
    rev.handler = request_handler;
  }
  rb.handler(r);
}

int body_fail(Request& r, int status, bool gone) {
  RequestBody& rb = r.body;
  rb.failed = true;
  rb.status = status;
  rb.client_gone = gone;
  Event& rev = *r.c->read;
  if (rev.handler == body_event) rev.handler = request_handler;
  return -1;
}

// Hands back the body bytes read so far to the flow control.
void consume(Stream& st, std::size_t n) {
  if (n == 0 || st.closed) return;
  Session& s = *st.session;
  (void)nghttp2_session_consume(s.ng, st.id, n);
  schedule_flush(s);
}

// A static file still to be sent with sendfile off (HTTP/1's writer reads
// such a file piece by piece; no body filter is between).
bool file_direct(const Request& r) {
  return r.obuf != nullptr && r.fd != -1 && !r.header_only && r.file_pos < r.file_end;
}

}  // namespace

bool add_head_field(Stream& st, std::string_view name, std::string_view value) {
  if (!name.empty() && name[0] == ':') {
    // Pseudo-header fields (RFC 9113 §8.3.1; check_request_field has
    // checked that they come first, once each).
    if (name != ":method" && name != ":path" && name != ":authority") return true;
    if (!scratch_room(st, value.size())) return false;
    const std::uint32_t at = st.scratch_len;
    append(st, value);
    const auto len = static_cast<std::uint32_t>(value.size());
    if (name == ":method") {
      st.method_at = at;
      st.method_len = len;
    } else if (name == ":path") {
      st.path_at = at;
      st.path_len = len;
    } else if (name == ":authority") {
      st.authority_at = at;
      st.authority_len = len;
    }
    return true;
  }
  if (!st.in_fields) {
    st.fields_at = st.scratch_len;
    st.in_fields = true;
  }
  if (name == "host") st.has_host = true;
  if (name == "content-length") st.has_length = true;
  if (name == "cookie") ++st.cookies;
  if (!scratch_room(st, name.size() + value.size() + 4)) return false;
  append(st, name);
  append(st, ": ");
  append(st, value);
  append(st, "\r\n");
  return true;
}

void start_stream_request(Stream& st) {
  Session& s = *st.session;
  if (st.rev.timer_set) s.c->loop->del_timer(st.rev);  // the head's timeout
  st.rev.handler = empty_handler;
  if (st.head_too_big) {
    VIGIL_LOG(*s.c->log, kInfo, 0, "*%llu client sent too large http2 header",
              static_cast<unsigned long long>(s.c->number));
    answer_directly(st, "431");
    return;
  }
  const char* why = nullptr;
  int bad = st.malformed;
  if (bad == 0) {
    bad = check_request_head(st, scratch_view(st, st.method_at, st.method_len),
                             scratch_view(st, st.path_at, st.path_len), why);
    if (bad == 0 && st.in_done && st.content_length > 0) {
      why = "client prematurely closed stream: no request body";
      bad = 400;
    }
    if (bad != 0) {
      VIGIL_LOG(*s.c->log, kInfo, 0, "*%llu %s", static_cast<unsigned long long>(s.c->number), why);
    }
  }
  // The head as HTTP/1 would have it: the request line from the
  // pseudo-header fields, Host from :authority (which wins over a Host
  // field, RFC 9113 §8.3.1), the cookie fields joined into one (§8.2.3),
  // and a body without a length said as chunked (HTTP/1's parser then
  // knows that one comes; the DATA frames bring it decoded).
  std::string_view method = scratch_view(st, st.method_at, st.method_len);
  std::string_view path = scratch_view(st, st.path_at, st.path_len);
  const std::string_view authority = scratch_view(st, st.authority_at, st.authority_len);
  bool chunked = !st.in_done && !st.has_length;
  if (bad != 0) {
    // A malformed request (RFC 9113 §8.1.1 lets the server answer it): a
    // request line of what was valid in it and no fields, which the
    // request refuses with `bad` once read (process_request), through the
    // server's error_page, as nginx finalizes the stream's request.
    st.malformed = static_cast<std::uint16_t>(bad);
    st.discard = true;  // its body is not read
    st.fields_at = st.scratch_len;
    st.cookies = 0;
    chunked = false;
    if (method.empty() || method == "CONNECT" ||
        !std::all_of(method.begin(), method.end(), [](char c) { return c >= 'A' && c <= 'Z'; })) {
      method = "GET";
    }
    if (path.empty() || path[0] != '/') path = "/";
  }
  const std::size_t need = method.size() + path.size() + authority.size() + st.scratch_len + 128;
  std::uint32_t size = 0;
  char* mem = get_buffer(s, need, size);
  if (mem == nullptr) {
    (void)nghttp2_submit_rst_stream(s.ng, NGHTTP2_FLAG_NONE, st.id, NGHTTP2_INTERNAL_ERROR);
    return;
  }
  char* p = mem;
  auto put = [&p](std::string_view t) {
    std::memcpy(p, t.data(), t.size());
    p += t.size();
  };
  put(method);
  put(" ");
  // CONNECT names its target in :authority (RFC 9113 §8.5): the
  // authority-form target of HTTP/1, which is then refused with 405.
  if (method == "CONNECT" && path.empty() && !authority.empty()) {
    put(authority);
  } else {
    put(path.empty() ? std::string_view("/") : path);
  }
  put(" HTTP/2.0\r\n");
  if (!authority.empty()) {
    put("host: ");
    put(authority);
    put("\r\n");
  }
  // The field lines, in order (after the pseudo-header values); Host when
  // :authority said it is left out, the cookies go last, joined.
  const char* f = st.scratch + st.fields_at;
  const char* end = st.scratch + st.scratch_len;
  auto each_line = [&](auto&& fn) {
    for (const char* q = f; q < end;) {
      const char* nl =
          static_cast<const char*>(std::memchr(q, '\n', static_cast<std::size_t>(end - q)));
      if (nl == nullptr) break;
      fn(std::string_view(q, static_cast<std::size_t>(nl + 1 - q)));
      q = nl + 1;
    }
  };
  each_line([&](std::string_view line) {
    if (line.starts_with("cookie: ")) return;
    if (line.starts_with("host: ") && !authority.empty()) return;
    put(line);
  });
  if (st.cookies > 0) {
    put("cookie: ");
    bool sep = false;
    each_line([&](std::string_view line) {
      if (!line.starts_with("cookie: ")) return;
      if (sep) put("; ");
      put(line.substr(8, line.size() - 10));
      sep = true;
    });
    put("\r\n");
  }
  if (chunked) put("transfer-encoding: chunked\r\n");
  put("\r\n");

  if (st.scratch != nullptr) s.worker->buffers().put(st.scratch, st.scratch_size);
  st.scratch = nullptr;
  st.scratch_size = st.scratch_len = 0;

  HttpConnection& hc = st.hc;
  hc.buffer.reset(mem, size);
  hc.buffer.last = p;
  // $connection_requests counts the connection's requests: begin_request
  // counts this one on the stream's connection, which starts from the
  // client connection's count.
  st.fc.requests = s.c->requests;
  ++s.c->requests;
  Request* r = begin_request(hc);
  if (r == nullptr) {
    (void)nghttp2_submit_rst_stream(s.ng, NGHTTP2_FLAG_NONE, st.id, NGHTTP2_INTERNAL_ERROR);
    return;
  }
  r->request_length = st.head_length;  // not the HTTP/1 head made from it
  st.r = r;
  st.rev.handler = request_handler;
  st.wev.handler = request_handler;
  process_request_line(*r);
  schedule_flush(s);
}

void stream_data(Stream& st, const std::uint8_t* data, std::size_t len) {
  Session& s = *st.session;
  st.received += static_cast<std::int64_t>(len);
  if (st.content_length >= 0 && st.received > st.content_length) {
    body_mismatch(st, "client intended to send body data larger than declared");
  }
  if (st.r == nullptr || st.discard || st.r->body.failed) {
    consume(st, len);
    return;
  }
  if (st.pre == nullptr) {
    const std::size_t size = s.hc->srv->h2_body_preread_size;
    st.pre = s.worker->buffers().get(size);
    if (st.pre == nullptr) {
      (void)nghttp2_submit_rst_stream(s.ng, NGHTTP2_FLAG_NONE, st.id, NGHTTP2_INTERNAL_ERROR);
      return;
    }
    st.pre_size = static_cast<std::uint32_t>(size);
  }
  if (st.pre_last + len > st.pre_size && st.pre_pos > 0) {
    std::memmove(st.pre, st.pre + st.pre_pos, st.pre_last - st.pre_pos);
    st.pre_last -= st.pre_pos;
    st.pre_pos = 0;
  }
  if (st.pre_last + len > st.pre_size) {
    // More than the window we gave: nghttp2 would have refused it.
    (void)nghttp2_submit_rst_stream(s.ng, NGHTTP2_FLAG_NONE, st.id, NGHTTP2_FLOW_CONTROL_ERROR);
    return;
  }
  std::memcpy(st.pre + st.pre_last, data, len);
  st.pre_last += static_cast<std::uint32_t>(len);
  wake_reader(st);
}

void stream_input_ended(Stream& st) {
  if (st.content_length >= 0 && st.received < st.content_length) {
    body_mismatch(st, "client prematurely closed stream");
    return;
  }
  wake_reader(st);
}

void stream_closed(Stream& st) {
  if (st.r == nullptr) return;
  // The request finds out from the body reader, the writer or client_gone.
  if (st.r->body.started && !st.r->body.done) {
    st.body_wait = true;
    wake_reader(st);
  }
  wake_writer(st);
  if (!st.rev.posted && st.rev.handler != nullptr) st.fc.loop->post(st.rev);
}

// The response's trailer fields, as the chunked filter writes them for
// HTTP/1, copied to the stream when the last buffer is passed (false: no
// memory). They go as a trailing HEADERS frame (RFC 9113 §8.1) once the
// data source has given its last byte.
static bool take_trailers(Request& r, Stream& st) {
  if (!write_trailer_fields(r)) return false;
  const ChunkFrame& f = r.chunk_frame;
  const std::uint32_t n = f.fields_end - f.fields_begin;
  if (n == 0) return true;
  const std::size_t size = (n + 1023) & ~std::size_t{1023};
  char* mem = st.session->worker->buffers().get(size);
  if (mem == nullptr) return false;
  std::memcpy(mem, f.trailer_mem + f.fields_begin, n);
  st.trailers = mem;
  st.trailers_size = static_cast<std::uint32_t>(size);
  st.trailers_len = n;
  return true;
}

// The field line [p, nl) ("Name: value", maybe CR-ended) as nghttp2's name
// and value, the name lowered in place (HTTP/2 field names are lower case);
// false when the line has no colon.
static bool field_line(char* p, char* nl, nghttp2_nv& nv) {
  char* colon = static_cast<char*>(std::memchr(p, ':', static_cast<std::size_t>(nl - p)));
  if (colon == nullptr) return false;
  for (char* q = p; q < colon; ++q) {
    if (*q >= 'A' && *q <= 'Z') *q = static_cast<char>(*q - 'A' + 'a');
  }
  char* v = colon + 1;
  while (v < nl && *v == ' ') ++v;
  char* vend = nl;
  if (vend > v && vend[-1] == '\r') --vend;
  nv = {reinterpret_cast<std::uint8_t*>(p), reinterpret_cast<std::uint8_t*>(v),
        static_cast<std::size_t>(colon - p), static_cast<std::size_t>(vend - v),
        NGHTTP2_NV_FLAG_NONE};
  return true;
}

static bool submit_trailers(nghttp2_session* ng, Stream& st) {
  char* p = st.trailers;
  char* const end = st.trailers + st.trailers_len;
  nghttp2_nv nv[kStackFields];
  std::size_t n = 0;
  while (p < end && n < kStackFields) {
    char* nl = static_cast<char*>(std::memchr(p, '\n', static_cast<std::size_t>(end - p)));
    if (nl == nullptr) break;
    if (field_line(p, nl, nv[n])) ++n;
    p = nl + 1;
  }
  return n > 0 && nghttp2_submit_trailer(ng, st.id, nv, n) == 0;
}

ssize_t read_response_data(nghttp2_session* ng, std::int32_t /*id*/, std::uint8_t* buf,
                           std::size_t length, std::uint32_t* flags, nghttp2_data_source* source,
                           void* /*user*/) {
  Stream& st = *static_cast<Stream*>(source->ptr);
  if (st.r != nullptr && st.r->loc != nullptr && length > st.r->loc->h2_chunk_size) {
    length = st.r->loc->h2_chunk_size;
  }
  std::size_t n = 0;
  bool took = false;
  if (st.r != nullptr && (st.pending != nullptr || file_direct(*st.r))) {
    // limit_rate / limit_rate_after per stream, as HTTP/1's writer: none
    // allowed now sets the stream's write event delayed, with the timer
    // that resumes it (its write handler, then write_filter below).
    const off_t allowed = rate_allowance(*st.r);
    if (allowed == 0) {
      // The writer may go on when the delay's timer fires (it finds the
      // data deferred and resumes it): it no longer waits for the window.
      // A relay from a backend writes only to a ready event.
      st.deferred = true;
      st.wev.ready = 1;
      return NGHTTP2_ERR_DEFERRED;
    }
    if (allowed > 0 && static_cast<std::uint64_t>(allowed) < length) {
      length = static_cast<std::size_t>(allowed);
    }
  }
  while (st.pending != nullptr && n < length) {
    Buf& b = *st.pending->buf;
    if (b.empty()) {
      st.pending = st.pending->next;
      took = true;
      continue;
    }
    std::size_t want = b.size();
    if (want > length - n) want = length - n;
    if (b.in_file) {
      const std::size_t got =
          read_file_some(st.fc, b.file_fd, b.file_pos, reinterpret_cast<char*>(buf) + n, want);
      if (got == 0) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
      b.file_pos += static_cast<off_t>(got);
      want = got;
    } else {
      std::memcpy(buf + n, b.pos, want);
      b.pos += want;
    }
    n += want;
  }
  while (st.pending != nullptr && st.pending->buf->empty()) {
    st.pending = st.pending->next;
    took = true;
  }
  if (st.pending == nullptr && n < length && st.r != nullptr && file_direct(*st.r)) {
    // A file sent with sendfile off: its next bytes are read straight into
    // the frame, not into a buffer of the request's first (one copy less).
    Request& r = *st.r;
    std::size_t want = length - n;
    if (static_cast<off_t>(want) > r.file_end - r.file_pos) {
      want = static_cast<std::size_t>(r.file_end - r.file_pos);
    }
    const std::size_t got =
        read_file_some(st.fc, r.fd, r.file_pos, reinterpret_cast<char*>(buf) + n, want);
    if (got == 0) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    r.file_pos += static_cast<off_t>(got);
    n += got;
    if (r.file_pos == r.file_end) {
      st.out_last = true;
      took = true;
      if (st.trailers == nullptr && has_trailers(r) && !take_trailers(r, st)) {
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
      }
    }
  }
  st.fc.sent += static_cast<off_t>(n);
  // The request's view of what its writer holds (the relay waits on it).
  if (st.r != nullptr) st.r->pending = st.pending;
  if (st.pending == nullptr && st.out_last) {
    *flags |= NGHTTP2_DATA_FLAG_EOF;
    st.out_eof = true;
    // Trailers: this DATA frame does not end the stream, their HEADERS does.
    if (st.trailers_len > 0 && submit_trailers(ng, st)) {
      *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
    }
  } else if (n == 0) {
    st.deferred = true;
    wake_writer(st);
    return NGHTTP2_ERR_DEFERRED;
  }
  if (took || st.pending == nullptr) wake_writer(st);
  return static_cast<ssize_t>(n);
}

// ---- the request's side ----------------------------------------------------------------

bool write_header(Request& r) {
  Stream& st = stream_of(r);
  Session& s = *st.session;
  // HTTP/1's head writer formats the head (without connection fields);
  // its lines become the HEADERS frame's fields.
  if (!http::write_header(r)) return false;
  char* p = r.hbuf.pos;
  char* end = r.hbuf.last;
  // "HTTP/1.1 200 OK\r\n"
  char* status = p + 9;
  p = static_cast<char*>(std::memchr(p, '\n', static_cast<std::size_t>(end - p)));
  if (p == nullptr) return false;
  ++p;
  std::size_t count = 1;
  for (char* q = p; q < end; ++q) count += *q == '\n' ? 1 : 0;
  nghttp2_nv stack_nv[kStackFields];
  nghttp2_nv* nv = stack_nv;
  char* heap = nullptr;
  std::size_t heap_size = 0;
  if (count > kStackFields) {
    heap_size = count * sizeof(nghttp2_nv);
    heap = s.worker->buffers().get(heap_size);
    if (heap == nullptr) return false;
    nv = reinterpret_cast<nghttp2_nv*>(heap);
  }
  std::size_t n = 0;
  nv[n++] = {reinterpret_cast<std::uint8_t*>(const_cast<char*>(":status")),
             reinterpret_cast<std::uint8_t*>(status), 7, 3, NGHTTP2_NV_FLAG_NONE};
  std::size_t bound = 12 + 12 + 7 + 3;  // as nghttp2_hd_deflate_bound counts
  while (p < end) {
    char* nl = static_cast<char*>(std::memchr(p, '\n', static_cast<std::size_t>(end - p)));
    if (nl == nullptr) break;
    if (nl - p < 2) {  // the empty line ends the head
      p = nl + 1;
      break;
    }
    if (field_line(p, nl, nv[n])) {
      bound += 12 + nv[n].namelen + nv[n].valuelen;
      ++n;
    }
    p = nl + 1;
  }
  if (bound > kMaxResponseHead) {
    VIGIL_LOG(*r.c->log, kError, 0, "*%llu response head too large for http2: %zu bytes",
              static_cast<unsigned long long>(r.c->number), bound);
    if (heap != nullptr) s.worker->buffers().put(heap, heap_size);
    return false;
  }
  const int code = r.headers_out.status;
  // An empty body without trailers: the HEADERS frame ends the stream (as
  // nginx's; a gRPC "trailers-only" response must come so).
  const bool body = !r.header_only && code >= 200 && code != 204 && code != 304 &&
                    !(r.headers_out.content_length == 0 && !has_trailers(r));
  nghttp2_data_provider provider;
  provider.source.ptr = &st;
  provider.read_callback = read_response_data;
  int rv = 0;
  if (!st.closed) rv = nghttp2_submit_response(s.ng, st.id, nv, n, body ? &provider : nullptr);
  if (heap != nullptr) s.worker->buffers().put(heap, heap_size);
  if (st.closed || rv != 0) {
    st.reset = true;  // the writer fails the response
  }
  st.submitted = true;
  if (!body) {
    st.out_last = true;
    st.out_eof = true;
  }
  // The head is in nghttp2's hands ($bytes_sent counts it, $sent_http_*
  // reads it); what follows it in the buffer (a small file's body) is the
  // first DATA.
  const char* head_end = p;
  r.header_size = head_end - r.hbuf.start;
  st.fc.sent += r.header_size;
  r.hbuf.pos = r.hbuf.start + r.header_size;
  r.hbuf.last = r.hbuf.pos;
  schedule_flush(s);
  return true;
}

int write_filter(Request& r, Chain* in) {
  Stream& st = stream_of(r);
  Session& s = *st.session;
  if (st.reset || s.closing) return kBodyError;
  if (st.out_eof && st.pending == nullptr) {
    // No body goes out (HEAD, 304) or it is complete: what comes is dropped.
    for (Chain* l = in; l != nullptr; l = l->next) {
      Buf& b = *l->buf;
      b.pos = b.last;
      b.file_pos = b.file_last;
    }
    return kBodyOk;
  }
  if (!st.head_body_taken) {
    // A small file's body written after the head, in its buffer (static
    // files): it goes first.
    st.head_body_taken = true;
    if (!r.hbuf.empty()) {
      r.out[0].buf = &r.hbuf;
      r.out[0].next = nullptr;
      st.pending = &r.out[0];
    }
  }
  if (in != nullptr) {
    Chain** tail = &st.pending;
    while (*tail != nullptr) tail = &(*tail)->next;
    *tail = in;
    for (Chain* l = in; l != nullptr; l = l->next) {
      if (l->buf->last_buf) st.out_last = true;
    }
    if (st.out_last && st.trailers == nullptr && has_trailers(r) && !take_trailers(r, st)) {
      return kBodyError;
    }
  }
  while (st.pending != nullptr && st.pending->buf->empty()) st.pending = st.pending->next;
  // A file with sendfile off: the data source reads it into the frames.
  const bool direct = file_direct(r);
  if (st.wev.delayed) {
    // limit_rate: the timer resumes it.
    r.pending = st.pending;
    return kBodyAgain;
  }
  if (st.deferred && (st.pending != nullptr || st.out_last || direct)) {
    st.deferred = false;
    (void)nghttp2_session_resume_data(s.ng, st.id);
    schedule_flush(s);
  }
  r.pending = st.pending;
  if (st.pending == nullptr && !direct) return kBodyOk;
  // Waits for the peer's window (or the socket): the data source wakes it.
  http_counters()->h2_flow_stalls.add();
  Event& wev = st.wev;
  wev.ready = 0;
  wev.active = 1;
  st.fc.loop->add_timer(wev, r.loc->send_timeout);
  schedule_flush(s);
  return kBodyAgain;
}

bool send_continue(Request& r) {
  Stream& st = stream_of(r);
  Session& s = *st.session;
  static const char kStatus[] = "100";
  const nghttp2_nv nv[] = {
      {reinterpret_cast<std::uint8_t*>(const_cast<char*>(":status")),
       reinterpret_cast<std::uint8_t*>(const_cast<char*>(kStatus)), 7, 3, NGHTTP2_NV_FLAG_NONE},
  };
  if (st.closed) return false;
  if (nghttp2_submit_headers(s.ng, NGHTTP2_FLAG_NONE, st.id, nullptr, nv, 1, nullptr) < 0) {
    return false;
  }
  schedule_flush(s);
  return true;
}

int start_request_body(Request& r, std::size_t size, RequestBodyHandler handler) {
  RequestBody& rb = r.body;
  rb.started = true;
  rb.handler = handler;
  rb.failed = false;
  rb.status = 0;
  // DATA frames carry the body as it is; "chunked" says only that its
  // length is not known (no content-length), for whoever passes it on.
  rb.chunked_in = r.check.chunked;
  rb.rest = r.check.content_length > 0 ? r.check.content_length : 0;
  rb.done = !has_request_body(r);
  if (rb.done) return 0;
  char* mem = r.hc->worker->buffers().get(size);
  if (mem == nullptr) return 500;
  rb.buf.reset(mem, size);
  rb.size = static_cast<std::uint32_t>(size);
  r.c->read->handler = body_event;
  return 0;
}

int read_request_body(Request& r) {
  Stream& st = stream_of(r);
  RequestBody& rb = r.body;
  Buf& b = rb.buf;
  if (rb.failed) return -1;
  if (st.body_error) return body_fail(r, 400, false);
  for (;;) {
    if (rb.done) {
      if (r.c->read->handler == body_event) r.c->read->handler = request_handler;
      return 1;
    }
    if (b.last == b.end) return 1;
    std::size_t avail = st.pre_last - st.pre_pos;
    if (avail == 0) {
      if (st.reset) return body_fail(r, 400, true);
      if (st.in_done) {
        rb.done = true;
        continue;
      }
      st.body_wait = true;
      st.fc.loop->add_timer(st.rev, r.loc->client_body_timeout);
      return b.pos < b.last ? 1 : 0;
    }
    if (avail > b.free_space()) avail = b.free_space();
    const std::size_t max = r.loc->client_max_body_size;
    if (max > 0 && static_cast<std::uint64_t>(rb.received) + avail > max) {
      VIGIL_LOG(
          *r.c->log, kError, 0, "*%llu client intended to send too large body: %lld+%zu bytes",
          static_cast<unsigned long long>(r.c->number), static_cast<long long>(rb.received), avail);
      return body_fail(r, 413, false);
    }
    std::memcpy(b.last, st.pre + st.pre_pos, avail);
    b.last += avail;
    st.pre_pos += static_cast<std::uint32_t>(avail);
    if (st.pre_pos == st.pre_last) st.pre_pos = st.pre_last = 0;
    rb.received += static_cast<std::int64_t>(avail);
    r.request_length += avail;
    if (rb.rest > 0) rb.rest -= static_cast<std::int64_t>(avail);
    if (st.rev.timer_set) st.fc.loop->del_timer(st.rev);
    consume(st, avail);
  }
}

int discard_request_body(Request& r) {
  if (!has_request_body(r)) {
    r.body.discarded = true;
    return kPhaseNext;
  }
  // Nothing to wait for: what came and what comes is handed back to the
  // flow control and dropped.
  Stream& st = stream_of(r);
  st.discard = true;
  consume(st, st.pre_last - st.pre_pos);
  st.pre_pos = st.pre_last = 0;
  r.body.discarded = true;
  return kPhaseNext;
}

int malformed_status(const Request& r) {
  return r.hc->stream != nullptr ? r.hc->stream->malformed : 0;
}

bool client_gone(const Request& r) {
  const Stream& st = stream_of(r);
  return st.reset || st.session->closing;
}

void request_done(HttpConnection& hc, bool error) {
  Stream& st = *hc.stream;
  Session& s = *st.session;
  st.r = nullptr;
  EventLoop& loop = *s.c->loop;
  loop.del_timer(st.rev);
  loop.del_timer(st.wev);
  PostedQueue::remove(st.rev);
  PostedQueue::remove(st.wev);
  st.rev.handler = empty_handler;
  st.wev.handler = empty_handler;
  // What the producer passed and nghttp2 did not take is the released
  // request's: the response cannot go on.
  const bool incomplete = error || !st.submitted || !st.out_last || st.pending != nullptr;
  st.pending = nullptr;
  if (incomplete && !st.closed && !s.closing) {
    st.reset = true;
    // A client that timed out is told so with PROTOCOL_ERROR, as nginx
    // does (RFC 9113 leaves the code to the sender).
    (void)nghttp2_submit_rst_stream(s.ng, NGHTTP2_FLAG_NONE, st.id,
                                    st.fc.timedout ? NGHTTP2_PROTOCOL_ERROR
                                                   : NGHTTP2_INTERNAL_ERROR);
  }
  stream_request_ended(st);
}

}  // namespace vigil::http::h2
