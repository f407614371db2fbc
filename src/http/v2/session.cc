// The HTTP/2 connection (nginx's ngx_http_v2_init, read and write handlers):
// the client connection's I/O, nghttp2's session and callbacks, the
// streams' lifetime, GOAWAY on idle timeout, keepalive_requests and
// graceful shutdown.
#include <openssl/ssl.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <type_traits>

#include "event/tls/tls.h"
#include "http/core/counters.h"
#include "http/core/worker.h"
#include "http/v2/frame_head.h"
#include "http/v2/h2.h"
#include "http/v2/memory.h"
#include "http/v2/session.h"
#include "http/v2/shutdown.h"
#include "vigil/core/log.h"
#include "vigil/event/loop.h"
#include "vigil/event/posted.h"

namespace vigil::http::h2 {
namespace {

// The connection-level receive window opened at the start: the streams'
// windows (http2_body_preread_size each) are what bounds a client's input.
constexpr std::int32_t kConnectionWindow = (1 << 30);
// The largest frame a client may send (RFC 9113 §4.2: 2^24-1).
constexpr std::uint32_t kMaxFrameSize = (1 << 24) - 1;
// One send gathers frames up to this many bytes.
constexpr std::uint32_t kWriteBuffer = 16384;
constexpr int kReadsPerPass = 8;
// A frame at least this long (a DATA frame) is sent from nghttp2's buffer.
constexpr std::size_t kDirectFrame = 4096;
// Streams that may end in RST_STREAM (sent or received) in a burst, and per
// second after it: Rapid Reset (CVE-2023-44487) and MadeYouReset
// (CVE-2025-8671) both make the server start work for streams that are
// reset at once; past the budget the connection is told to calm down and
// closed. A well-behaved client resets a few streams (a page navigated away
// from), far below either figure.
constexpr std::uint32_t kResetBurst = 500;
constexpr std::uint32_t kResetsPerSecond = 100;

// Streams' memory, kept by the worker (one thread per process) for its next
// streams: a client's burst of a hundred new streams in one read, and their
// end, is otherwise a hundred mallocs and frees each way, most of them past
// the allocator's per-thread cache.
struct StreamCache {
  static constexpr std::size_t kMax = 512;
  void* free[kMax];
  std::size_t n = 0;
  StreamCache() = default;
  StreamCache(const StreamCache&) = delete;
  StreamCache& operator=(const StreamCache&) = delete;
  ~StreamCache() {
    while (n > 0) ::operator delete(free[--n]);
  }
};
thread_local StreamCache t_streams;
static_assert(std::is_trivially_destructible_v<Stream>,
              "a Stream's memory is reused without a destructor call");

Stream* make_stream() {
  StreamCache& sc = t_streams;
  void* mem = sc.n > 0 ? sc.free[--sc.n] : ::operator new(sizeof(Stream), std::nothrow);
  if (mem == nullptr) return nullptr;
  return new (mem) Stream;  // as `new Stream`: the members' initialisers
}

void drop_stream(Stream* st) {
  StreamCache& sc = t_streams;
  if (sc.n < StreamCache::kMax) {
    sc.free[sc.n++] = st;
  } else {
    ::operator delete(st);
  }
}

// Ends the session for abuse: GOAWAY ENHANCE_YOUR_CALM, then close.
void calm_down(Session& s, nghttp2_session* ng, const char* why) {
  if (s.calm) return;
  s.calm = true;
  VIGIL_LOG(*s.c->log, kInfo, 0, "*%llu %s", static_cast<unsigned long long>(s.c->number), why);
  (void)nghttp2_session_terminate_session(ng, NGHTTP2_ENHANCE_YOUR_CALM);
}

Session& session_of_event(const Event& ev) {
  return *static_cast<HttpConnection*>(ev.owner<Connection>()->data)->h2;
}

Stream* stream_of(nghttp2_session* ng, std::int32_t id) {
  return static_cast<Stream*>(nghttp2_session_get_stream_user_data(ng, id));
}

long fail_recv(Connection&, char*, std::size_t) {
  return kIoError;
}
long fail_send(Connection&, const char*, std::size_t) {
  return kIoError;
}
long fail_recv_chain(Connection&, Chain*, off_t) {
  return kIoError;
}
Chain* fail_send_chain(Connection&, Chain*, off_t) {
  return kChainError;
}

// A stream's head did not complete within client_header_timeout (its
// HEADERS or CONTINUATION frames came in part): the stream is reset with
// PROTOCOL_ERROR, as nginx does, and the connection goes on (nghttp2 still
// decodes the rest of the block when it comes, for HPACK's state).
void head_timeout(Event& rev) {
  Connection& fc = *rev.owner<Connection>();
  Stream& st = *static_cast<HttpConnection*>(fc.data)->stream;
  Session& s = *st.session;
  rev.timedout = 0;
  if (st.r != nullptr || st.closed || s.closing) return;
  VIGIL_LOG(*s.c->log, kInfo, ETIMEDOUT, "*%llu client timed out sending the http2 head",
            static_cast<unsigned long long>(s.c->number));
  (void)nghttp2_submit_rst_stream(s.ng, NGHTTP2_FLAG_NONE, st.id, NGHTTP2_PROTOCOL_ERROR);
  schedule_flush(s);
}

// ---- nghttp2's callbacks ---------------------------------------------------------------

// A frame's header has come (its payload may not have yet): the checks
// nginx makes on the header alone, which nghttp2 makes later or not at all.
int on_begin_frame(nghttp2_session* ng, const nghttp2_frame_hd* hd, void* user) {
  Session& s = *static_cast<Session*>(user);
  // The HEADERS frame's payload and its CONTINUATIONs ($request_length).
  if (hd->type == NGHTTP2_HEADERS) s.head_block = static_cast<std::uint32_t>(hd->length);
  if (hd->type == NGHTTP2_CONTINUATION) s.head_block += static_cast<std::uint32_t>(hd->length);
  if (hd->type == NGHTTP2_PUSH_PROMISE) {
    // A client cannot push (RFC 9113 §8.4): known from the header, not
    // after waiting for a payload that may never come.
    (void)nghttp2_session_terminate_session(ng, NGHTTP2_PROTOCOL_ERROR);
    return 0;
  }
  if (hd->type != NGHTTP2_HEADERS || (hd->stream_id & 1) == 0 ||
      hd->stream_id > nghttp2_session_get_last_proc_stream_id(ng) ||
      nghttp2_session_find_stream(ng, hd->stream_id) != nullptr) {
    return 0;
  }
  // HEADERS for a stream below the last one opened that is not open: an
  // idle stream implicitly closed (RFC 9113 §5.1.1, "unexpected stream
  // identifier") or a closed one (§5.1, frames after END_STREAM): a
  // connection error, where nghttp2 would ignore the block. Trailers
  // that crossed our RST_STREAM are ignored (§5.1).
  for (const std::int32_t id : s.reset_ids) {
    if (id == hd->stream_id) return 0;
  }
  (void)nghttp2_session_terminate_session(ng, NGHTTP2_PROTOCOL_ERROR);
  return 0;
}

int on_begin_headers(nghttp2_session* ng, const nghttp2_frame* frame, void* user) {
  if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
  Session& s = *static_cast<Session*>(user);
  if (s.calm) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  // More new streams in one read (in the same millisecond of the loop's
  // clock, however the backend split the input) than twice the concurrency
  // allows: they are being opened and reset (nginx's "client sent too many
  // streams at once").
  const Msec now = clock::current_msec();
  if (now != s.new_streams_msec) {
    s.new_streams_msec = now;
    s.new_streams = 0;
  }
  if (++s.new_streams > 2 * s.hc->srv->h2_max_concurrent_streams) {
    calm_down(s, ng, "client sent too many streams at once");
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  }
  Stream* st = make_stream();
  if (st == nullptr) {
    VIGIL_LOG(*s.c->log, kAlert, 0, "*%llu out of memory for an http2 stream",
              static_cast<unsigned long long>(s.c->number));
    (void)nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, frame->hd.stream_id,
                                    NGHTTP2_INTERNAL_ERROR);
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  }
  st->session = &s;
  st->id = frame->hd.stream_id;
  st->next = s.streams;
  if (s.streams != nullptr) s.streams->prev = st;
  s.streams = st;
  ++s.nstreams;

  // The stream's connection: the client's facts (addresses, TLS, log,
  // number), its own events and counters, and no I/O of its own.
  Connection& fc = st->fc;
  fc = *s.c;
  fc.queue = QueueNode{};
  fc.data = &st->hc;
  fc.read = &st->rev;
  fc.write = &st->wev;
  fc.recv = fail_recv;
  fc.send = fail_send;
  fc.recv_chain = fail_recv_chain;
  fc.send_chain = fail_send_chain;
  fc.sent = 0;
  fc.requests = 0;
  fc.buffer = nullptr;
  fc.generation = ++s.generation;
  fc.timedout = fc.error = fc.reusable = fc.close = 0;
  fc.shared = 1;
  fc.ring = 0;
  fc.tcp_nodelay = fc.tcp_nopush = 2;  // not the stream's to set
  // Never registered: "active" keeps the loop from adding them to the
  // backend, "ready" says the writer may go on (nginx's fake events).
  st->rev.data = &fc;
  st->rev.log = s.c->log;
  st->rev.handler = empty_handler;
  st->rev.active = 1;
  st->wev.data = &fc;
  st->wev.write = 1;
  st->wev.log = s.c->log;
  st->wev.handler = empty_handler;
  st->wev.ready = 1;

  HttpConnection& hc = st->hc;
  hc.c = &fc;
  hc.worker = s.worker;
  hc.addr = s.hc->addr;
  hc.srv = s.hc->srv;
  // The connection's start: $connection_time counts from it.
  hc.start_msec = s.hc->start_msec;
  hc.stream = st;
  // The head must be complete within client_header_timeout.
  st->rev.handler = head_timeout;
  s.c->loop->add_timer(st->rev, s.hc->srv->client_header_timeout);
  http_counters()->h2_streams.add();
  if (nghttp2_session_set_stream_user_data(ng, st->id, st) != 0) {
    free_stream(*st);
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  }
  return 0;
}

// A malformed request reset (RFC 9113 §8.1.1): the rest of its head is
// decoded (HPACK's state) and dropped.
void refuse(nghttp2_session* ng, Stream& st, const char* why, std::string_view name) {
  Session& s = *st.session;
  VIGIL_LOG(*s.c->log, kInfo, 0, "*%llu %s: \"%.*s\"", static_cast<unsigned long long>(s.c->number),
            why, static_cast<int>(name.size()), name.data());
  st.refused = true;
  (void)nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, st.id, NGHTTP2_PROTOCOL_ERROR);
}

// nghttp2's HTTP messaging is off (start()): the head is checked here,
// field by field (head_check.cc), so that a malformed request can be
// answered as nginx answers it.
int on_header(nghttp2_session* ng, const nghttp2_frame* frame, const std::uint8_t* name,
              std::size_t namelen, const std::uint8_t* value, std::size_t valuelen,
              std::uint8_t /*flags*/, void* user) {
  if (frame->hd.type != NGHTTP2_HEADERS) return 0;
  Stream* st = stream_of(ng, frame->hd.stream_id);
  const std::string_view n(reinterpret_cast<const char*>(name), namelen);
  const std::string_view v(reinterpret_cast<const char*>(value), valuelen);
  if (frame->headers.cat != NGHTTP2_HCAT_REQUEST) {
    // Trailer fields of a request body are not kept, only checked.
    if (st != nullptr && !st->refused && !trailer_field_ok(n, v)) {
      refuse(ng, *st, "client sent invalid trailer field", n);
    }
    return 0;
  }
  if (st == nullptr || st->r != nullptr || st->head_too_big || st->refused) return 0;
  // nginx's limits on a head, from large_client_header_buffers: a name or
  // a value longer than one buffer, or names and values (decoded, indexed
  // ones too) longer than all of them, end the connection with
  // ENHANCE_YOUR_CALM (RFC 9113 §10.5.1 lets a server refuse a head it is
  // not willing to take).
  Session& s = *static_cast<Session*>(user);
  const HttpSrvConf& srv = *s.hc->srv;
  st->head_bytes += static_cast<std::uint32_t>(std::min<std::size_t>(namelen + valuelen, 1u << 30));
  if (namelen > srv.large_buffers_size || valuelen > srv.large_buffers_size ||
      st->head_bytes > srv.large_buffers_size * srv.large_buffers_num) {
    VIGIL_LOG(*s.c->log, kInfo, 0, "*%llu client sent too large http2 header",
              static_cast<unsigned long long>(s.c->number));
    st->head_too_big = true;
    (void)nghttp2_session_terminate_session(ng, NGHTTP2_ENHANCE_YOUR_CALM);
    return 0;
  }
  if (st->malformed != 0) return 0;  // answered with the first problem's status
  const char* why = nullptr;
  switch (check_request_field(*st, srv, n, v, why)) {
    case HeadVerdict::kKeep:
      break;
    case HeadVerdict::kIgnore:
      VIGIL_LOG(*s.c->log, kInfo, 0, "*%llu %s: \"%.*s\"",
                static_cast<unsigned long long>(s.c->number), why, static_cast<int>(n.size()),
                n.data());
      return 0;
    case HeadVerdict::kBadRequest:
      VIGIL_LOG(*s.c->log, kInfo, 0, "*%llu %s: \"%.*s: %.*s\"",
                static_cast<unsigned long long>(s.c->number), why, static_cast<int>(n.size()),
                n.data(), static_cast<int>(std::min<std::size_t>(v.size(), 256)), v.data());
      st->malformed = 400;
      return 0;
    case HeadVerdict::kReset:
      refuse(ng, *st, why, n);
      return 0;
  }
  if (n == "priority") st->priority = parse_priority(v, st->extpri);
  if (!add_head_field(*st, n, v)) st->head_too_big = true;
  return 0;
}

int on_frame_recv(nghttp2_session* ng, const nghttp2_frame* frame, void* user) {
  if (frame->hd.type == NGHTTP2_RST_STREAM) http_counters()->h2_resets_received.add();
  if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) return 0;
  Stream* st = stream_of(ng, frame->hd.stream_id);
  if (st == nullptr) return 0;
  const bool end = (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
  if (end) st->in_done = true;
  if (st->refused) return 0;
  if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat != NGHTTP2_HCAT_REQUEST && !end) {
    // A trailer section ends the stream (RFC 9113 §8.1).
    refuse(ng, *st, "client sent trailers without END_STREAM", {});
    return 0;
  }
  if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
    // The connection is ending on an error (on_header's limits): no
    // request starts.
    if (nghttp2_session_want_read(ng) == 0) return 0;
    // $request_length counts the header block as it came (nginx): the
    // frames' payload without padding and priority fields.
    const std::uint32_t block = static_cast<Session*>(user)->head_block;
    const std::size_t extra =
        frame->headers.padlen + ((frame->hd.flags & NGHTTP2_FLAG_PRIORITY) != 0 ? 5 : 0);
    st->head_length = block > extra ? block - static_cast<std::uint32_t>(extra) : 0;
    // The priority field as parsed (nghttp2 does not, its HTTP messaging
    // being off). Without one: the default urgency, but served in turns
    // with the other streams of that urgency (RFC 9218 leaves the default
    // non-incremental; a page's many responses are fairer round-robin, as
    // nginx and h2o serve them). A PRIORITY_UPDATE still changes it.
    const nghttp2_extpri fair = {NGHTTP2_EXTPRI_DEFAULT_URGENCY, 1};
    (void)nghttp2_session_change_extpri_stream_priority(ng, st->id,
                                                        st->priority ? &st->extpri : &fair, 0);
    start_stream_request(*st);
  } else if (end) {
    stream_input_ended(*st);
  }
  return 0;
}

int on_data_chunk_recv(nghttp2_session* ng, std::uint8_t /*flags*/, std::int32_t id,
                       const std::uint8_t* data, std::size_t len, void* /*user*/) {
  Stream* st = stream_of(ng, id);
  if (st == nullptr) {
    // A stream already gone: its bytes still count against the connection.
    (void)nghttp2_session_consume_connection(ng, len);
    return 0;
  }
  stream_data(*st, data, len);
  return 0;
}

int on_frame_send(nghttp2_session* ng, const nghttp2_frame* frame, void* user) {
  if (frame->hd.type == NGHTTP2_RST_STREAM) {
    http_counters()->h2_resets_sent.add();
    Session& s = *static_cast<Session*>(user);
    s.reset_ids[s.reset_next++ % (sizeof s.reset_ids / sizeof s.reset_ids[0])] =
        frame->hd.stream_id;
  }
  if (frame->hd.type == NGHTTP2_GOAWAY) {
    http_counters()->h2_goaways.add();
    if (frame->goaway.error_code != NGHTTP2_NO_ERROR) static_cast<Session*>(user)->failed = true;
  }
  if ((frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) ||
      (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) == 0) {
    return 0;
  }
  Stream* st = stream_of(ng, frame->hd.stream_id);
  // The response is complete and the client still sends a body nobody
  // reads: the stream ends here (RFC 9113 §8.1, RST_STREAM NO_ERROR).
  if (st != nullptr && st->r == nullptr && !st->in_done && !st->closed) {
    (void)nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_NO_ERROR);
  }
  return 0;
}

int on_stream_close(nghttp2_session* ng, std::int32_t id, std::uint32_t error_code,
                    void* /*user*/) {
  Stream* st = stream_of(ng, id);
  if (st == nullptr) return 0;
  st->closed = true;
  if (error_code != NGHTTP2_NO_ERROR || !st->out_eof) st->reset = true;
  if (st->reset) {
    // Reset by either side (a client's RST_STREAM may say NO_ERROR too).
    Session& s = *st->session;
    const Msec now = clock::current_msec();
    const auto elapsed = static_cast<std::uint64_t>(msec_diff(now, s.reset_refill));
    if (elapsed >= 1000 / kResetsPerSecond) {
      const std::uint64_t more = elapsed * kResetsPerSecond / 1000;
      s.reset_tokens =
          static_cast<std::uint32_t>(std::min<std::uint64_t>(kResetBurst, s.reset_tokens + more));
      s.reset_refill = now;
    }
    if (s.reset_tokens == 0) {
      calm_down(s, ng, "client caused too many stream resets");
    } else {
      --s.reset_tokens;
    }
  }
  (void)nghttp2_session_set_stream_user_data(ng, id, nullptr);
  if (st->r == nullptr) {
    free_stream(*st);
  } else {
    stream_closed(*st);
  }
  return 0;
}

// A DATA frame carries as much as the windows and the client's
// SETTINGS_MAX_FRAME_SIZE allow (nghttp2 stops at 16384 without this);
// http2_chunk_size bounds it further in read_response_data.
ssize_t data_length(nghttp2_session* /*ng*/, std::uint8_t /*type*/, std::int32_t /*id*/,
                    std::int32_t session_window, std::int32_t stream_window,
                    std::uint32_t max_frame, void* /*user*/) {
  std::int64_t n = std::min<std::int64_t>(session_window, stream_window);
  n = std::min<std::int64_t>(n, max_frame);
  return static_cast<ssize_t>(std::max<std::int64_t>(n, 1));
}

// nghttp2 could not send a frame (a response head past kMaxResponseHead,
// which write_header refuses first): the stream is reset, not left waiting.
int on_frame_not_send(nghttp2_session* ng, const nghttp2_frame* frame, int error, void* user) {
  if (frame->hd.type == NGHTTP2_HEADERS) {
    Session& s = *static_cast<Session*>(user);
    VIGIL_LOG(*s.c->log, kError, 0, "*%llu http2 could not send a response head: %s",
              static_cast<unsigned long long>(s.c->number), nghttp2_strerror(error));
    (void)nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, frame->hd.stream_id,
                                    NGHTTP2_INTERNAL_ERROR);
  }
  return 0;
}

const nghttp2_session_callbacks* callbacks() {
  static nghttp2_session_callbacks* cbs = [] {
    nghttp2_session_callbacks* c = nullptr;
    if (nghttp2_session_callbacks_new(&c) != 0) return c;
    nghttp2_session_callbacks_set_on_begin_frame_callback(c, on_begin_frame);
    nghttp2_session_callbacks_set_on_begin_headers_callback(c, on_begin_headers);
    nghttp2_session_callbacks_set_data_source_read_length_callback(c, data_length);
    nghttp2_session_callbacks_set_on_header_callback(c, on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(c, on_frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(c, on_data_chunk_recv);
    nghttp2_session_callbacks_set_on_frame_send_callback(c, on_frame_send);
    nghttp2_session_callbacks_set_on_frame_not_send_callback(c, on_frame_not_send);
    nghttp2_session_callbacks_set_on_stream_close_callback(c, on_stream_close);
    return c;
  }();
  return cbs;
}

// ---- I/O -------------------------------------------------------------------------------

void give_back_buffers(Session& s) {
  BufferCache& cache = s.worker->buffers();
  if (s.rbuf != nullptr) cache.put(s.rbuf, s.rbuf_size);
  if (s.wbuf != nullptr) cache.put(s.wbuf, s.wbuf_size);
  if (s.block != nullptr) cache.put(s.block, s.block_size);
  s.rbuf = s.wbuf = s.block = nullptr;
}

bool mem_send(Session& s, const std::uint8_t*& data, std::size_t& len) {
  const ssize_t n = nghttp2_session_mem_send(s.ng, &data);
  if (n < 0) {
    VIGIL_LOG(*s.c->log, kInfo, 0, "*%llu http2 send failed: %s",
              static_cast<unsigned long long>(s.c->number), nghttp2_strerror(static_cast<int>(n)));
    return false;
  }
  if (n > 0) note_frame(s, data);
  len = static_cast<std::size_t>(n);
  return true;
}

// nghttp2 splits a header block into frames of 16384 bytes whatever the
// client allows; a client whose SETTINGS_MAX_FRAME_SIZE is larger gets the
// block in frames that large, as nginx sends it (one HEADERS frame when it
// fits). The HEADERS frame in s.frame is followed by its CONTINUATIONs
// (nghttp2 sends nothing between them); they are gathered into s.block.
bool merge_header_block(Session& s) {
  const std::size_t max =
      nghttp2_session_get_remote_settings(s.ng, NGHTTP2_SETTINGS_MAX_FRAME_SIZE);
  if (max <= 16384) return true;  // nghttp2's frames are as large as allowed
  BufferCache& cache = s.worker->buffers();
  const std::uint8_t* first = s.frame;
  const std::uint32_t stream_id = (std::uint32_t{first[5]} & 0x7f) << 24 |
                                  std::uint32_t{first[6]} << 16 | std::uint32_t{first[7]} << 8 |
                                  std::uint32_t{first[8]};
  const std::uint8_t end_stream = first[4] & NGHTTP2_FLAG_END_STREAM;
  // The payloads, one after another (the block), then made into frames.
  std::size_t cap = 4 * s.frame_len;
  auto* payload = reinterpret_cast<std::uint8_t*>(cache.get(cap));
  if (payload == nullptr) return false;
  std::size_t len = 0;
  const std::uint8_t* f = first;
  std::size_t flen = s.frame_len;
  for (;;) {
    const std::size_t plen = flen - kFrameHeadSize;
    if (len + plen > cap) {
      const std::size_t more = std::max(2 * cap, len + plen);
      auto* grown = reinterpret_cast<std::uint8_t*>(cache.get(more));
      if (grown == nullptr) {
        cache.put(reinterpret_cast<char*>(payload), cap);
        return false;
      }
      std::memcpy(grown, payload, len);
      cache.put(reinterpret_cast<char*>(payload), cap);
      payload = grown;
      cap = more;
    }
    std::memcpy(payload + len, f + kFrameHeadSize, plen);
    len += plen;
    if ((f[4] & NGHTTP2_FLAG_END_HEADERS) != 0) break;
    if (!mem_send(s, f, flen) || flen < kFrameHeadSize || f[3] != NGHTTP2_CONTINUATION) {
      cache.put(reinterpret_cast<char*>(payload), cap);
      return false;
    }
  }
  const std::size_t frames = (len + max - 1) / max;
  const std::size_t size = len + frames * kFrameHeadSize;
  auto* out = reinterpret_cast<std::uint8_t*>(cache.get(size));
  if (out == nullptr) {
    cache.put(reinterpret_cast<char*>(payload), cap);
    return false;
  }
  std::uint8_t* p = out;
  for (std::size_t at = 0; at < len;) {
    const std::size_t n = std::min(max, len - at);
    const bool last = at + n == len;
    put_frame_head(p, static_cast<std::uint32_t>(n),
                   at == 0 ? NGHTTP2_HEADERS : NGHTTP2_CONTINUATION,
                   static_cast<std::uint8_t>((at == 0 ? end_stream : 0) |
                                             (last ? NGHTTP2_FLAG_END_HEADERS : 0)),
                   stream_id);
    std::memcpy(p + kFrameHeadSize, payload + at, n);
    p += kFrameHeadSize + n;
    at += n;
  }
  cache.put(reinterpret_cast<char*>(payload), cap);
  s.block = reinterpret_cast<char*>(out);
  s.block_size = size;
  s.frame = out;
  s.frame_len = size;
  return true;
}

// The next frame from nghttp2 into s.frame; false on a fatal error.
bool next_frame(Session& s) {
  if (s.block != nullptr) {  // sent (next_frame comes when s.frame is)
    s.worker->buffers().put(s.block, s.block_size);
    s.block = nullptr;
  }
  if (!mem_send(s, s.frame, s.frame_len)) return false;
  if (s.frame_len > kFrameHeadSize && s.frame[3] == NGHTTP2_HEADERS &&
      (s.frame[4] & (NGHTTP2_FLAG_END_HEADERS | NGHTTP2_FLAG_PADDED | NGHTTP2_FLAG_PRIORITY)) ==
          0) {
    return merge_header_block(s);
  }
  return true;
}

// Sends what nghttp2 has, as far as the socket takes it: small frames
// gathered into one buffer per send, a large one (DATA) sent from nghttp2's
// own buffer, without a copy. False: the connection failed.
bool flush(Session& s) {
  Connection& c = *s.c;
  EventLoop& loop = *c.loop;
  for (;;) {
    const char* out = nullptr;
    std::size_t len = 0;
    bool direct = false;
    if (s.wbuf != nullptr && s.wpos < s.wlast) {
      out = s.wbuf + s.wpos;
      len = s.wlast - s.wpos;
    } else {
      if (s.frame_len == 0 && !next_frame(s)) return false;
      if (s.frame_len == 0) break;  // nothing more to send
      if (s.frame_len >= kDirectFrame) {
        out = reinterpret_cast<const char*>(s.frame);
        len = s.frame_len;
        direct = true;
      } else {
        if (s.wbuf == nullptr) {
          s.wbuf = s.worker->buffers().get(kWriteBuffer);
          if (s.wbuf == nullptr) return false;
          s.wbuf_size = kWriteBuffer;
        }
        s.wpos = s.wlast = 0;
        // Gather small frames until the buffer is full, a large frame
        // comes, or nghttp2 has no more.
        while (s.wlast < s.wbuf_size) {
          if (s.frame_len == 0 && !next_frame(s)) return false;
          if (s.frame_len == 0 || s.frame_len >= kDirectFrame) break;
          std::size_t take = s.wbuf_size - s.wlast;
          if (take > s.frame_len) take = s.frame_len;
          std::memcpy(s.wbuf + s.wlast, s.frame, take);
          s.wlast += static_cast<std::uint32_t>(take);
          s.frame += take;
          s.frame_len -= take;
        }
        out = s.wbuf;
        len = s.wlast;
      }
    }
    const long n = c.send(c, out, len);
    if (n == kIoAgain) {
      loop.add_timer(*c.write, s.hc->srv->loc->send_timeout);
      return static_cast<bool>(loop.handle_write_event(*c.write));
    }
    if (n < 0) return false;
    s.worked = true;
    if (direct) {
      s.frame += n;
      s.frame_len -= static_cast<std::size_t>(n);
    } else {
      s.wpos += static_cast<std::uint32_t>(n);
    }
  }
  // All sent: the buffer goes back while there is nothing to write.
  if (s.wbuf != nullptr) s.worker->buffers().put(s.wbuf, s.wbuf_size);
  s.wbuf = nullptr;
  s.wpos = s.wlast = 0;
  if (c.write->timer_set) loop.del_timer(*c.write);
  return true;
}

void goaway(Session& s) {
  if (s.goaway) return;
  s.goaway = true;
  (void)nghttp2_submit_goaway(s.ng, NGHTTP2_FLAG_NONE,
                              nghttp2_session_get_last_proc_stream_id(s.ng), NGHTTP2_NO_ERROR,
                              nullptr, 0);
}

// After reading or writing: send, close when the session is over, and set
// the connection's timers and idleness.
void after_io(Session& s) {
  Connection& c = *s.c;
  EventLoop& loop = *c.loop;
  if (loop.exiting()) goaway(s);
  if (!flush(s)) {
    close_connection(*s.hc);
    return;
  }
  const bool sending = s.wbuf != nullptr || s.frame_len != 0;
  if (!sending && nghttp2_session_want_read(s.ng) == 0 && nghttp2_session_want_write(s.ng) == 0) {
    // The session is over (GOAWAY sent, its streams done). What the
    // client still sends (WINDOW_UPDATEs for the last DATA) is read and
    // dropped after our FIN, as nginx's HTTP/2 lingering close: closing
    // with it unread would make the kernel answer with a RST that can
    // destroy the end of the response on its way.
    HttpConnection& hc = *s.hc;
    if (s.failed) {
      // A connection error (RFC 9113 §5.4.1): nothing more is read, the
      // connection closes once the GOAWAY is out, as nginx's does.
      end_session(s);
      close_connection(hc);
      return;
    }
    end_session(s);
    set_reusable(hc, false);
    set_lingering_close(hc, *hc.srv->loc);
    return;
  }
  if (s.nstreams == 0 && !sending) {
    // Idle: keepalive_timeout, and the pool (or a graceful stop) may close
    // it. Not while frames are still going out (the last DATA of a stream
    // nghttp2 has closed already): closing would cut them.
    // keepalive_timeout 0 (no keep-alive) still waits for the first
    // request, as long as a request head may take.
    const Msec idle = s.hc->srv->loc->keepalive_timeout;
    loop.add_timer(*c.read,
                   idle == 0 && s.nrequests == 0 ? s.hc->srv->client_header_timeout : idle);
    set_reusable(*s.hc, true);
    session_idle(s);
  } else {
    if (c.read->timer_set) loop.del_timer(*c.read);
    set_reusable(*s.hc, false);
    session_busy(s);
  }
  if (!loop.handle_read_event(*c.read)) close_connection(*s.hc);
}

// Feeds `n` bytes to nghttp2; false when the session must close.
bool feed(Session& s, const char* data, std::size_t n) {
  s.in_recv = true;
  const ssize_t rv = nghttp2_session_mem_recv(s.ng, reinterpret_cast<const std::uint8_t*>(data), n);
  s.in_recv = false;
  if (rv < 0) {
    VIGIL_LOG(*s.c->log, kInfo, 0, "*%llu client sent invalid http2 data: %s",
              static_cast<unsigned long long>(s.c->number), nghttp2_strerror(static_cast<int>(rv)));
    return false;
  }
  return !s.close_after;
}

void read_handler(Event& rev) {
  Session& s = session_of_event(rev);
  Connection& c = *s.c;
  if (rev.timedout) {
    // Idle for keepalive_timeout: GOAWAY, then close.
    rev.timedout = 0;
    goaway(s);
    (void)flush(s);
    close_connection(*s.hc);
    return;
  }
  if (c.close) {
    // The worker stops or the pool needs the slot: only an idle session is
    // asked to, and it says GOAWAY first.
    goaway(s);
    (void)flush(s);
    close_connection(*s.hc);
    return;
  }
  if (s.rbuf == nullptr) {
    const std::size_t size = s.hc->srv->h2_recv_buffer_size;
    s.rbuf = s.worker->buffers().get(size);
    if (s.rbuf == nullptr) {
      close_connection(*s.hc);
      return;
    }
    s.rbuf_size = static_cast<std::uint32_t>(size);
  }
  // A bounded number of reads per pass: a client that never stops sending
  // does not keep the others waiting (the rest is read in the next pass).
  for (int reads = 0;; ++reads) {
    if (reads == kReadsPerPass) {
      c.loop->posted_next().post(rev);
      break;
    }
    const long n = c.recv(c, s.rbuf, s.rbuf_size);
    if (n == kIoAgain) break;
    s.worked = true;
    if (n <= 0 || !feed(s, s.rbuf, static_cast<std::size_t>(n))) {
      (void)flush(s);  // a GOAWAY nghttp2 queued for a protocol error
      close_connection(*s.hc);
      return;
    }
  }
  s.worker->buffers().put(s.rbuf, s.rbuf_size);
  s.rbuf = nullptr;
  after_io(s);
}

void write_handler(Event& wev) {
  Session& s = session_of_event(wev);
  s.flush_posted = false;
  if (wev.timedout) {
    VIGIL_LOG(*s.c->log, kInfo, ETIMEDOUT, "*%llu client timed out",
              static_cast<unsigned long long>(s.c->number));
    s.c->timedout = 1;
    close_connection(*s.hc);
    return;
  }
  after_io(s);
}

}  // namespace

bool starts_preface(std::string_view bytes) {
  const std::size_t n = bytes.size() < kPreface.size() ? bytes.size() : kPreface.size();
  return n >= 4 && bytes.substr(0, n) == kPreface.substr(0, n);
}

bool negotiated(const Connection& c) {
  if (c.ssl == nullptr) return false;
  const unsigned char* p = nullptr;
  unsigned len = 0;
  SSL_get0_alpn_selected(c.ssl->ssl, &p, &len);
  return len == 2 && p[0] == 'h' && p[1] == '2';
}

void start(HttpConnection& hc) {
  Connection& c = *hc.c;
  const nghttp2_session_callbacks* cbs = callbacks();
  auto* s = c.arena->make<Session>();
  if (s == nullptr || cbs == nullptr) {
    VIGIL_LOG(*c.log, kAlert, 0, "*%llu out of memory for an http2 session",
              static_cast<unsigned long long>(c.number));
    close_connection(hc);
    return;
  }
  s->hc = &hc;
  s->c = &c;
  s->worker = hc.worker;
  s->reset_tokens = kResetBurst;
  s->reset_refill = clock::current_msec();
  s->h2w = h2_worker(*c.loop);
  if (s->h2w == nullptr) {
    VIGIL_LOG(*c.log, kAlert, 0, "*%llu out of memory for an http2 session",
              static_cast<unsigned long long>(c.number));
    close_connection(hc);
    return;
  }
  nghttp2_option* opt = nullptr;
  if (nghttp2_option_new(&opt) != 0) {
    close_connection(hc);
    return;
  }
  // The windows reopen as the requests read their bodies.
  nghttp2_option_set_no_auto_window_update(opt, 1);
  // A malformed request is found by Vigil (head_check.cc, stream_data),
  // which can answer it; nghttp2 would only reset it.
  nghttp2_option_set_no_http_messaging(opt, 1);
  nghttp2_option_set_max_send_header_block_length(opt, kMaxResponseHead);
  const HttpSrvConf& srv = *hc.srv;
  const std::size_t header_limit = srv.large_buffers_size * srv.large_buffers_num;
  nghttp2_option_set_max_deflate_dynamic_table_size(opt, 4096);
  // RFC 9218: nghttp2 schedules the streams by the priority field and
  // PRIORITY_UPDATE frames (SETTINGS_NO_RFC7540_PRIORITIES below) for a
  // client that says it uses them (its SETTINGS_NO_RFC7540_PRIORITIES);
  // another keeps RFC 7540's dependencies and weights, as nginx 1.22
  // serves them (RFC 9218 §2.1 lets the server choose).
  nghttp2_option_set_builtin_recv_extension_type(opt, NGHTTP2_PRIORITY_UPDATE);
  nghttp2_option_set_server_fallback_rfc7540_priorities(opt, 1);
  // nghttp2's memory from the worker's (memory.h); the session keeps a copy.
  nghttp2_mem mem = session_mem(*s);
  const int rv = nghttp2_session_server_new3(&s->ng, cbs, s, opt, &mem);
  nghttp2_option_del(opt);
  if (rv != 0) {
    VIGIL_LOG(*c.log, kAlert, 0, "*%llu nghttp2_session_server_new3() failed: %s",
              static_cast<unsigned long long>(c.number), nghttp2_strerror(rv));
    close_connection(hc);
    return;
  }
  hc.h2 = s;
  const nghttp2_settings_entry settings[] = {
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, srv.h2_max_concurrent_streams},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, static_cast<std::uint32_t>(srv.h2_body_preread_size)},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, static_cast<std::uint32_t>(header_limit)},
      // Frames of any size the protocol allows, as nginx says (a head is
      // still bounded by the header list size, a body by the windows).
      {NGHTTP2_SETTINGS_MAX_FRAME_SIZE, kMaxFrameSize},
      {NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1},
  };
  if (nghttp2_submit_settings(s->ng, NGHTTP2_FLAG_NONE, settings,
                              sizeof settings / sizeof settings[0]) != 0 ||
      nghttp2_session_set_local_window_size(s->ng, NGHTTP2_FLAG_NONE, 0, kConnectionWindow) != 0) {
    close_connection(hc);
    return;
  }
  // OpenSSL keeps its record buffers while the session works (the context
  // has it free them whenever they are empty: twice per read and write);
  // an idle session gives them back (memory.h).
  if (c.ssl != nullptr && c.ssl->ssl != nullptr)
    SSL_clear_mode(c.ssl->ssl, SSL_MODE_RELEASE_BUFFERS);
  http_counters()->h2_connections.add();
  c.read->handler = read_handler;
  c.write->handler = write_handler;
  if (c.read->timer_set) c.loop->del_timer(*c.read);
  set_reusable(hc, false);
  // What the HTTP/1 side read already (the preface) is the first input.
  Buf& b = hc.buffer;
  if (b.start != nullptr) {
    const bool ok = b.pos == b.last || feed(*s, b.pos, static_cast<std::size_t>(b.last - b.pos));
    hc.worker->buffers().put(b.start, static_cast<std::size_t>(b.end - b.start));
    b = Buf{};
    if (!ok) {
      close_connection(hc);
      return;
    }
  }
  if (c.read->ready) {
    read_handler(*c.read);
    return;
  }
  after_io(*s);
}

void close_session(HttpConnection& hc) {
  Session& s = *hc.h2;
  if (s.in_recv) {
    s.close_after = true;  // the read handler closes once nghttp2 returns
    return;
  }
  if (s.closing) return;
  end_session(s);
  close_connection(hc);
}

void end_session(Session& s) {
  HttpConnection& hc = *s.hc;
  s.closing = true;
  // Every request still running ends (its stream is freed with it).
  while (s.streams != nullptr) {
    Stream& st = *s.streams;
    if (st.r != nullptr) {
      // The connection goes before the response is complete: 499 in the
      // log, as a client that went away (nginx's finalize_connection).
      st.reset = true;
      st.fc.error = 1;
      terminate_request(*st.r, 499);
      if (s.streams == &st && st.r != nullptr) free_stream(st);  // not ended: should not happen
    } else {
      free_stream(st);
    }
  }
  session_ended(s);
  nghttp2_session_del(s.ng);
  s.ng = nullptr;
  give_back_buffers(s);
  PostedQueue::remove(*s.c->write);
  hc.h2 = nullptr;
}

void begin_shutdown(HttpConnection& hc) {
  Session* s = hc.h2;
  if (s == nullptr || s->closing || s->in_recv) return;
  // after_io says GOAWAY (the loop is exiting), sends it, and closes the
  // connection when no stream is left.
  after_io(*s);
}

void schedule_flush(Session& s) {
  if (s.in_recv || s.closing) return;  // the read handler sends when nghttp2 returns
  s.flush_posted = true;
  s.c->loop->post(*s.c->write);
}

void stream_request_ended(Stream& st) {
  Session& s = *st.session;
  EventLoop& loop = *s.c->loop;
  if (s.closing) {
    free_stream(st);
    return;
  }
  ++s.nrequests;
  const HttpLocConf& loc = *s.hc->srv->loc;
  // keepalive_timeout 0: no keep-alive, the streams opened so far finish.
  // keepalive_time: a connection that has lived that long takes no new
  // streams (nginx 1.19.10+).
  const bool too_old = msec_diff(clock::current_msec(), s.hc->start_msec) >
                       static_cast<MsecDiff>(loc.keepalive_time);
  if (s.nrequests >= loc.keepalive_requests || loc.keepalive_timeout == 0 || too_old ||
      loop.exiting()) {
    goaway(s);
  }
  if (st.closed) {
    free_stream(st);
  } else if (!st.in_done && st.out_eof) {
    // on_frame_send resets the stream once END_STREAM is out.
    st.discard = true;
  }
  schedule_flush(s);
}

void free_stream(Stream& st) {
  Session& s = *st.session;
  if (st.prev != nullptr) st.prev->next = st.next;
  if (st.next != nullptr) st.next->prev = st.prev;
  if (s.streams == &st) s.streams = st.next;
  --s.nstreams;
  if (!st.closed && s.ng != nullptr)
    (void)nghttp2_session_set_stream_user_data(s.ng, st.id, nullptr);
  EventLoop& loop = *s.c->loop;
  loop.del_timer(st.rev);
  loop.del_timer(st.wev);
  PostedQueue::remove(st.rev);
  PostedQueue::remove(st.wev);
  BufferCache& cache = s.worker->buffers();
  if (st.scratch != nullptr) cache.put(st.scratch, st.scratch_size);
  if (st.pre != nullptr) cache.put(st.pre, st.pre_size);
  if (st.trailers != nullptr) cache.put(st.trailers, st.trailers_size);
  Buf& head = st.hc.buffer;
  if (head.start != nullptr) cache.put(head.start, static_cast<std::size_t>(head.end - head.start));
  drop_stream(&st);
  if (s.nstreams == 0 && !s.closing && !s.in_recv) schedule_flush(s);
}

}  // namespace vigil::http::h2
