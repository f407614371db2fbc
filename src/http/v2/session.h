#pragma once
// Internal to http/v2: the session (one per HTTP/2 connection) and its
// streams. session.cc owns the connection's I/O and nghttp2's callbacks;
// stream.cc is the request's side (head, body in, body out).

#include <nghttp2/nghttp2.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "http/core/request.h"
#include "vigil/event/connection.h"
#include "vigil/event/event.h"

namespace vigil::http {
class HttpWorker;
}

namespace vigil::http::h2 {

struct Session;
struct H2Worker;

// The largest response head sent, as nghttp2 bounds a header block
// (nghttp2_hd_deflate_bound: 12 bytes, 12 per field, and the names and
// values): in a HEADERS frame and as many CONTINUATIONs as the client's
// SETTINGS_MAX_FRAME_SIZE allows (nghttp2 alone stops at 64 KiB). A
// larger head is refused (stream.cc, write_header): logged, the stream
// reset.
inline constexpr std::size_t kMaxResponseHead = 1 << 20;

struct Stream {
  Session* session = nullptr;
  std::int32_t id = 0;
  Stream* prev = nullptr;  // the session's list of streams
  Stream* next = nullptr;

  // The request's connection (nginx's fake connection): a copy of the
  // client's, with events, counters and I/O of its own. Its events are
  // never registered with the backend: they are posted, or fire by timer.
  Connection fc;
  Event rev;
  Event wev;
  HttpConnection hc;  // hc.c = &fc, hc.stream = this; hc.buffer: the head
  Request* r = nullptr;

  // The head as it arrives: field lines ("name: value\r\n") in `scratch`,
  // the pseudo-header fields' values after them, as offsets.
  char* scratch = nullptr;
  std::uint32_t scratch_size = 0;
  std::uint32_t scratch_len = 0;
  std::uint32_t method_at = 0, method_len = 0;
  std::uint32_t path_at = 0, path_len = 0;
  std::uint32_t authority_at = 0, authority_len = 0;
  std::uint32_t fields_at = 0;  // where the field lines start (after the pseudo values)
  bool in_fields = false;       // a field line came
  std::uint32_t cookies = 0;    // cookie fields (joined into one, RFC 9113 §8.2.3)
  bool has_host = false;
  bool has_length = false;    // content-length was sent
  bool head_too_big = false;  // answered 431
  std::uint32_t head_bytes = 0;  // names and values of the head so far
  bool priority = false;         // the client sent a priority field (RFC 9218), parsed in `extpri`
  nghttp2_extpri extpri = {NGHTTP2_EXTPRI_DEFAULT_URGENCY, 0};
  // The head's checks (head_check.cc).
  std::uint8_t pseudo = 0;           // the pseudo-header fields seen
  bool after_fields = false;         // a regular field came (ignored ones too)
  bool refused = false;              // reset with PROTOCOL_ERROR: the head is not read on
  std::uint16_t malformed = 0;       // the status a malformed head is answered with
  std::int64_t content_length = -1;  // as the client declared it
  std::int64_t received = 0;         // the body's bytes in DATA frames
  bool body_error = false;           // they did not add up to content_length: 400
  std::uint32_t head_length = 0;  // the header block's bytes, as sent ($request_length)

  // The request body: DATA received and not read yet, [pre_pos, pre_last)
  // of `pre` (http2_body_preread_size, the stream's window).
  char* pre = nullptr;
  std::uint32_t pre_size = 0;
  std::uint32_t pre_pos = 0;
  std::uint32_t pre_last = 0;
  bool in_done = false;    // END_STREAM received: no more body
  bool discard = false;    // the body is thrown away as it comes
  bool body_wait = false;  // the body reader waits for DATA (rev posted when it comes)

  // The response body: the producer's links not yet given to nghttp2.
  Chain* pending = nullptr;
  bool submitted = false;        // the response HEADERS was submitted
  bool head_body_taken = false;  // what followed the head in r.hbuf was queued
  bool out_last = false;         // the last buffer has been passed to the writer
  bool out_eof = false;          // END_STREAM given to nghttp2 (the response is complete)
  bool deferred = false;         // the data source said "no data yet" (resume when some comes)
  bool closed = false;           // nghttp2 closed the stream (on_stream_close)
  bool reset = false;            // closed before the response was complete (client reset, error)
  // The response's trailer fields ("name: value\r\n" lines, a worker
  // buffer), taken when the last buffer is passed: the trailing HEADERS
  // goes after the last DATA, which may be after the request is released.
  char* trailers = nullptr;
  std::uint32_t trailers_size = 0;
  std::uint32_t trailers_len = 0;
};

struct Session {
  HttpConnection* hc = nullptr;
  Connection* c = nullptr;
  HttpWorker* worker = nullptr;
  nghttp2_session* ng = nullptr;
  Stream* streams = nullptr;  // streams with a request or still open in nghttp2
  std::uint32_t nstreams = 0;
  std::uint64_t nrequests = 0;
  std::uint32_t generation = 0;  // for the streams' connections

  // Input: a worker buffer while a read is in progress.
  char* rbuf = nullptr;
  std::uint32_t rbuf_size = 0;
  // Output: frames gathered from nghttp2 into one buffer per send; `frame`
  // is the part of nghttp2's last frame not copied yet (valid until the next
  // nghttp2_session_mem_send).
  char* wbuf = nullptr;
  std::uint32_t wbuf_size = 0;
  std::uint32_t wpos = 0;
  std::uint32_t wlast = 0;
  const std::uint8_t* frame = nullptr;
  std::size_t frame_len = 0;
  // A response head's frames made anew in fewer, larger ones (session.cc,
  // next_frame): `frame` points into it while it is sent.
  char* block = nullptr;
  std::size_t block_size = 0;

  // Defences (session.cc): streams opened in this millisecond, and the reset
  // budget (a token bucket: streams that end in RST_STREAM, either side's).
  std::uint32_t new_streams = 0;
  Msec new_streams_msec = 0;
  std::uint32_t reset_tokens = 0;
  Msec reset_refill = 0;
  bool calm = false;  // GOAWAY ENHANCE_YOUR_CALM sent: closing
  // The payload of the HEADERS frame being received and its CONTINUATIONs.
  std::uint32_t head_block = 0;
  // The streams this side reset last: a client's HEADERS (trailers) for
  // one of them may cross our RST_STREAM and is ignored (RFC 9113 §5.1,
  // "closed"); HEADERS for another stream nghttp2 no longer knows is a
  // connection error (session.cc, on_begin_frame).
  std::int32_t reset_ids[4] = {};
  std::uint32_t reset_next = 0;

  bool in_recv = false;      // inside nghttp2_session_mem_recv (callbacks run)
  bool close_after = false;  // close once the callbacks return
  bool closing = false;      // close_session is ending the streams
  bool goaway = false;       // GOAWAY sent: no new streams
  bool failed = false;       // GOAWAY with an error code sent: close at once
  bool flush_posted = false;

  // Memory (memory.cc): nghttp2's allocations of a page or more, given back
  // while the session is idle; its place in the worker's list of idle
  // sessions not released yet.
  struct PageBlock {
    void* p = nullptr;
    std::uint32_t size = 0;  // whole pages
    bool frames = false;     // nghttp2's outbound frame buffer
  };
  static constexpr int kPageBlocks = 4;
  PageBlock pages[kPageBlocks];
  H2Worker* h2w = nullptr;
  Session* idle_prev = nullptr;
  Session* idle_next = nullptr;
  bool idle_linked = false;
  bool worked = true;  // read or sent since it was last released
};

inline Session* session_of(const HttpConnection& hc) {
  return hc.h2;
}

// session.cc
// Makes sure what nghttp2 has to send is sent soon (the write event is
// posted; the read handler flushes itself).
void schedule_flush(Session& s);
// The request of `st` ended (request_done): the stream is freed once
// nghttp2 has closed it too.
void stream_request_ended(Stream& st);
void free_stream(Stream& st);
// Ends every stream and frees the session (hc.h2 = nullptr); the
// connection stays open for its owner to close.
void end_session(Session& s);

// head_check.cc: what becomes of a request head's field (RFC 9113 §8.2,
// §8.3, and nginx's checks).
enum class HeadVerdict {
  kKeep,        // the field goes to the request
  kIgnore,      // dropped (logged)
  kBadRequest,  // the request is malformed: answered 400
  kReset,       // the request is malformed: RST_STREAM PROTOCOL_ERROR
};
// `why` says what was wrong, for the log.
HeadVerdict check_request_field(Stream& st, const HttpSrvConf& srv, std::string_view name,
                                std::string_view value, const char*& why);
// At the end of the head (its fields all checked): 0, or the status a
// request without what it needs is answered with.
int check_request_head(const Stream& st, std::string_view method, std::string_view path,
                       const char*& why);
// A field of a trailer section that does not make the request malformed.
bool trailer_field_ok(std::string_view name, std::string_view value);
// A priority field's value (RFC 9218 §4) into `pri`; false when it does
// not parse (then it is ignored).
bool parse_priority(std::string_view value, nghttp2_extpri& pri);

// stream.cc
// The stream's head is complete (END_HEADERS): the request starts.
void start_stream_request(Stream& st);
// DATA arrived for the stream (copied into st.pre, or consumed).
void stream_data(Stream& st, const std::uint8_t* data, std::size_t len);
// END_STREAM from the client, or the stream closed: wakes the request.
void stream_input_ended(Stream& st);
void stream_closed(Stream& st);
// nghttp2's data source for a response body.
ssize_t read_response_data(nghttp2_session* ng, std::int32_t id, std::uint8_t* buf,
                           std::size_t length, std::uint32_t* flags, nghttp2_data_source* source,
                           void* user);
// Appends a field of the head (false: it does not fit: 431).
bool add_head_field(Stream& st, std::string_view name, std::string_view value);

}  // namespace vigil::http::h2
