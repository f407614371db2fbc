// HTTP/1's side of the request-body API (http/core/request_body.h): the
// body comes from the client socket after the head, Content-Length or
// chunked (RFC 9112 §6). The first body bytes may have come with the head, in
// the header buffer; bytes after a chunked body are the next request and go
// back there. While a body is read the client's read event is this file's:
// timeouts (client_body_timeout) and the connection closing are told to the
// reader's handler, and the event goes back to the request's handlers
// (request_handler) once the body is read.
#include "http/core/request_body.h"

#include <cerrno>
#include <cstring>

#include "http/core/phases.h"
#include "http/core/request.h"
#include "http/v2/h2.h"
#include "http/core/worker.h"
#include "vigil/core/log.h"
#include "vigil/event/loop.h"

namespace vigil::http {
namespace {

// A chunked body the parser refused: logged once, here (nginx's words).
int chunked_error(Request& r, ChunkStatus st) {
  Connection& c = *r.c;
  if (st == ChunkStatus::kTooLarge) {
    VIGIL_LOG(*c.log, kError, 0, "*%llu client intended to send too large chunked body",
              static_cast<unsigned long long>(c.number));
    return 413;
  }
  VIGIL_LOG(*c.log, kInfo, 0, "*%llu client sent invalid chunked body: %s",
            static_cast<unsigned long long>(c.number), r.body.chunked.error());
  return 400;
}

// client_body_timeout ran out: logged once, here, and the connection marked.
void body_timed_out(Connection& c) {
  VIGIL_LOG(*c.log, kInfo, ETIMEDOUT, "*%llu client timed out reading the body",
            static_cast<unsigned long long>(c.number));
  c.timedout = 1;
}

void init_framing(Request& r) {
  RequestBody& rb = r.body;
  rb.chunked_in = r.check.chunked;
  rb.rest = r.check.content_length > 0 ? r.check.content_length : 0;
  if (rb.chunked_in) {
    ChunkedLimits limits;
    if (r.loc->client_max_body_size > 0) limits.max_body = r.loc->client_max_body_size;
    rb.chunked = ChunkedParser(limits);
  }
}

// ---- reading into the caller's buffer ---------------------------------------------------

void body_event(Event& rev);

// Reading is over, one way or the other: the read event goes back.
void give_back(Request& r) {
  Event& rev = *r.c->read;
  if (rev.handler == body_event) rev.handler = request_handler;
}

int fail(Request& r, int status, bool gone) {
  RequestBody& rb = r.body;
  rb.failed = true;
  rb.status = status;
  rb.client_gone = gone;
  give_back(r);
  return -1;
}

// Decodes chunked input [p, p + n) into the body buffer at b.last (the data
// never overtakes the input, so p may lie inside the buffer itself). Returns
// the bytes consumed, or -1 with `status` set (400, 413).
long decode_chunked(Request& r, const char* p, std::size_t n, int& status) {
  RequestBody& rb = r.body;
  Buf& b = rb.buf;
  std::size_t pos = 0;
  while (pos < n && !rb.done) {
    std::size_t used = 0;
    std::string_view data;
    const ChunkStatus st = rb.chunked.parse(std::string_view(p + pos, n - pos), used, data);
    pos += used;
    switch (st) {
      case ChunkStatus::kData:
        std::memmove(b.last, data.data(), data.size());
        b.last += data.size();
        rb.received += static_cast<std::int64_t>(data.size());
        continue;
      case ChunkStatus::kAgain:
        return static_cast<long>(pos);
      case ChunkStatus::kDone:
        rb.done = true;
        break;
      case ChunkStatus::kTooLarge:
      case ChunkStatus::kBadRequest:
        status = chunked_error(r, st);
        return -1;
    }
  }
  return static_cast<long>(pos);
}

// Moves body bytes that came with the head (the header buffer) into the
// body buffer. False with `status` set on a bad chunked body.
bool take_buffered(Request& r, Buf& hb, int& status) {
  RequestBody& rb = r.body;
  Buf& b = rb.buf;
  const std::size_t room = static_cast<std::size_t>(b.end - b.last);
  std::size_t n = static_cast<std::size_t>(hb.last - hb.pos);
  if (n > room) n = room;
  if (rb.chunked_in) {
    const long used = decode_chunked(r, hb.pos, n, status);
    if (used < 0) return false;
    hb.pos += used;
    r.request_length += static_cast<std::uint64_t>(used);
    return true;
  }
  if (static_cast<std::int64_t>(n) > rb.rest) n = static_cast<std::size_t>(rb.rest);
  std::memcpy(b.last, hb.pos, n);
  b.last += n;
  hb.pos += n;
  r.request_length += n;
  rb.rest -= static_cast<std::int64_t>(n);
  rb.received += static_cast<std::int64_t>(n);
  if (rb.rest == 0) rb.done = true;
  return true;
}

// How much of a chunked body to ask the socket for, at most `room`: what
// is surely still body (the rest of the current chunk), or else no more than
// a large header buffer holds, so that whatever is read past the body's end
// (the next request, pipelined) fits one (keep_pipelined). The decoder has
// announced body_size() bytes and handed out `received` of them.
std::size_t chunked_read_size(const Request& r, std::size_t room) {
  const RequestBody& rb = r.body;
  const std::uint64_t in_chunk = rb.chunked.body_size() - static_cast<std::uint64_t>(rb.received);
  std::uint64_t limit = r.hc->srv->large_buffers_size;
  if (in_chunk > limit) limit = in_chunk;
  return limit < room ? static_cast<std::size_t>(limit) : room;
}

// Bytes read past the end of a chunked body, [p, p + n), are the next
// request on the connection (RFC 9112 §9.3.2): they go to the header buffer
// after what is left there, or, when they do not fit, to a large header
// buffer that takes its place (the old one stays with the request: its head
// points into it) and that keep-alive then hands to the next request, as
// nginx does. False when no buffer could be had.
bool keep_pipelined(Request& r, const char* p, std::size_t n) {
  HttpConnection& hc = *r.hc;
  Buf& hb = hc.buffer;
  if (hb.start != nullptr && n <= static_cast<std::size_t>(hb.end - hb.last)) {
    std::memcpy(hb.last, p, n);
    hb.last += n;
    return true;
  }
  const std::size_t size = hc.srv->large_buffers_size;
  const std::size_t left = hb.start != nullptr ? static_cast<std::size_t>(hb.last - hb.pos) : 0;
  constexpr std::size_t kSlots = kMaxLargeBuffers + 2;  // Request::retired
  if (left + n > size || r.nretired >= kSlots) return false;
  char* mem = hc.worker->buffers().get(size);
  if (mem == nullptr) return false;
  Buf nb;
  nb.reset(mem, size);
  if (left != 0) std::memcpy(nb.last, hb.pos, left);
  nb.last += left;
  std::memcpy(nb.last, p, n);
  nb.last += n;
  if (hb.start != nullptr) {
    r.retired[r.nretired] = hb.start;
    r.retired_size[r.nretired] = static_cast<std::uint32_t>(hb.end - hb.start);
    ++r.nretired;
  }
  hb = nb;
  hc.large = true;
  return true;
}

// The client's read event while the body is read: news for the reader.
void body_event(Event& rev) {
  Connection& c = *rev.owner<Connection>();
  auto& hc = *static_cast<HttpConnection*>(c.data);
  if (hc.request == nullptr) return;  // the handler goes with the request
  Request& r = *hc.request;
  RequestBody& rb = r.body;
  if (rb.done) {  // read by now (a tunnel took over): the event is no longer the body's
    give_back(r);
    if (rev.handler != nullptr) rev.handler(rev);
    return;
  }
  if (c.close) {
    fail(r, 0, true);
  } else if (rev.timedout) {
    rev.timedout = 0;
    body_timed_out(c);
    fail(r, 408, true);
  }
  rb.handler(r);
}

// ---- throwing it away -----------------------------------------------------------------

// Consumes body bytes from hc.buffer. Returns 1 when the body is over, 0 when
// more is needed, or an HTTP status (400, 413) for a bad body.
int discard_from_buffer(Request& r) {
  RequestBody& rb = r.body;
  Buf& b = r.hc->buffer;
  if (!rb.chunked_in) {
    const std::int64_t have = b.last - b.pos;
    const std::int64_t take = have < rb.rest ? have : rb.rest;
    b.pos += take;
    r.request_length += static_cast<std::uint64_t>(take);
    rb.rest -= take;
    return rb.rest == 0 ? 1 : 0;
  }
  for (;;) {
    std::size_t used = 0;
    std::string_view data;
    const ChunkStatus st = rb.chunked.parse(
        std::string_view(b.pos, static_cast<std::size_t>(b.last - b.pos)), used, data);
    b.pos += used;
    r.request_length += used;
    switch (st) {
      case ChunkStatus::kData:
        continue;
      case ChunkStatus::kAgain:
        return 0;
      case ChunkStatus::kDone:
        return 1;
      case ChunkStatus::kTooLarge:
      case ChunkStatus::kBadRequest:
        return chunked_error(r, st);
    }
  }
}

// The body arrives after the head: read it into a fresh header buffer (the
// head's buffers are still pointed into) that is reused from its start
// whenever it is all consumed. Bytes past the body are the next request and
// stay there.
void discard_body_handler(Event& rev) {
  Connection& c = *rev.owner<Connection>();
  auto& hc = *static_cast<HttpConnection*>(c.data);
  Request& r = *hc.request;
  EventLoop& loop = *c.loop;
  if (c.close) {
    terminate_request(r, 0);
    return;
  }
  if (rev.timedout) {
    body_timed_out(c);
    terminate_request(r, 408);
    return;
  }
  for (;;) {
    Buf& b = hc.buffer;
    if (b.pos == b.last) b.pos = b.last = b.start;
    long n = kIoAgain;
    if (rev.ready) n = c.recv(c, b.last, static_cast<std::size_t>(b.end - b.last));
    if (n == kIoAgain) {
      if (!loop.handle_read_event(rev)) {
        terminate_request(r, 500);
        return;
      }
      loop.add_timer(rev, r.loc->client_body_timeout);
      return;
    }
    if (n <= 0) {
      if (n == 0) {
        VIGIL_LOG(*c.log, kInfo, 0, "*%llu client prematurely closed connection",
                  static_cast<unsigned long long>(c.number));
      }
      terminate_request(r, 400);
      return;
    }
    b.last += n;
    const int rc = discard_from_buffer(r);
    if (rc == 0) continue;
    loop.del_timer(rev);
    rev.handler = request_handler;
    r.read_event_handler = block_reading;
    if (rc == 1) {
      r.body.discarded = true;
      run_phases(r);  // the step that asked for the discard runs again
    } else {
      finalize_error(r, rc);
    }
    return;
  }
}

// Starts throwing the body away; true when it is already gone (all of it
// was in the buffer), false when the read handler finishes it later.
// Errors are answered here, which also returns false.
bool discard_body(Request& r) {
  HttpConnection& hc = *r.hc;
  Connection& c = *r.c;
  r.phase = Phase::kBody;
  int rc = discard_from_buffer(r);
  if (rc == 1) return true;
  if (rc != 0) {
    finalize_error(r, rc);
    return false;
  }

  // Move to a fresh buffer for the body (see discard_body_handler).
  Buf& old = hc.buffer;
  const std::size_t size = hc.srv->client_header_buffer_size;
  char* mem = hc.worker->buffers().get(size);
  if (mem == nullptr) {
    terminate_request(r, 500);
    return false;
  }
  r.retired[r.nretired] = old.start;
  r.retired_size[r.nretired] = static_cast<std::uint32_t>(old.end - old.start);
  ++r.nretired;
  hc.buffer.reset(mem, size);
  hc.large = false;

  c.read->handler = discard_body_handler;
  discard_body_handler(*c.read);
  return false;
}

}  // namespace

bool has_request_body(const Request& r) {
  return r.check.chunked || r.check.content_length > 0;
}

int start_request_body(Request& r, std::size_t size, RequestBodyHandler handler) {
  if (r.hc->stream != nullptr) return h2::start_request_body(r, size, handler);
  RequestBody& rb = r.body;
  rb.started = true;
  rb.handler = handler;
  rb.failed = false;
  rb.status = 0;
  init_framing(r);
  if (!send_continue(r)) return 500;  // see discard_request_body
  rb.done = !has_request_body(r);
  if (rb.done) return 0;
  char* mem = r.hc->worker->buffers().get(size);
  if (mem == nullptr) return 500;
  rb.buf.reset(mem, size);
  rb.size = static_cast<std::uint32_t>(size);
  Event& rev = *r.c->read;
  rev.handler = body_event;
  return 0;
}

int read_request_body(Request& r) {
  if (r.hc->stream != nullptr) return h2::read_request_body(r);
  RequestBody& rb = r.body;
  Connection& c = *r.c;
  EventLoop& loop = *c.loop;
  Buf& b = rb.buf;
  Buf& hb = r.hc->buffer;
  if (rb.failed) return -1;
  for (;;) {
    if (rb.done) {
      give_back(r);
      return 1;
    }
    if (b.last == b.end) return 1;
    if (hb.start != nullptr && hb.pos < hb.last) {
      int status = 0;
      if (!take_buffered(r, hb, status)) return fail(r, status, false);
      continue;
    }
    // The client may wait for "100 Continue" before it sends the body.
    if (!send_continue(r)) return fail(r, 400, true);
    long n = kIoAgain;
    char* at = b.last;
    std::size_t room = static_cast<std::size_t>(b.end - b.last);
    if (!rb.chunked_in) {
      if (static_cast<std::int64_t>(room) > rb.rest) room = static_cast<std::size_t>(rb.rest);
    } else {
      room = chunked_read_size(r, room);
    }
    if (c.read->ready) n = c.recv(c, at, room);
    if (n == kIoAgain) {
      loop.add_timer(*c.read, r.loc->client_body_timeout);
      if (!loop.handle_read_event(*c.read)) return fail(r, 500, true);
      return b.pos < b.last ? 1 : 0;
    }
    if (n <= 0) {
      if (n == 0) {
        VIGIL_LOG(*c.log, kInfo, 0, "*%llu client prematurely closed connection",
                  static_cast<unsigned long long>(c.number));
      }
      return fail(r, 400, true);
    }
    loop.del_timer(*c.read);
    if (!rb.chunked_in) {
      b.last += n;
      r.request_length += static_cast<std::uint64_t>(n);
      rb.rest -= n;
      rb.received += n;
      if (rb.rest == 0) rb.done = true;
      continue;
    }
    int status = 0;
    const long used = decode_chunked(r, at, static_cast<std::size_t>(n), status);
    if (used < 0) return fail(r, status, false);
    r.request_length += static_cast<std::uint64_t>(used);
    if (used < n && !keep_pipelined(r, at + used, static_cast<std::size_t>(n - used))) {
      r.lingering = true;  // the next request is lost: the connection closes after this one
    }
  }
}

int discard_request_body(Request& r) {
  // A body already taken (read by a handler before an internal redirect,
  // an error_page after a proxied response) is not read again, as nginx's:
  // what was not read of it closes the connection (r.lingering).
  if (r.body.discarded || r.body.started) return kPhaseNext;
  if (r.hc->stream != nullptr) return h2::discard_request_body(r);
  // As nginx: whoever takes the body, to read or to throw away, first says
  // "100 Continue" to a client that asked, with a body or without one.
  if (!send_continue(r)) {
    terminate_request(r, 0);
    return kPhaseSuspended;
  }
  if (!has_request_body(r)) {
    r.body.discarded = true;
    return kPhaseNext;
  }
  init_framing(r);
  if (!discard_body(r)) return kPhaseSuspended;  // read later, or an error was answered
  r.body.discarded = true;
  r.phase = Phase::kWriting;
  return kPhaseNext;
}

}  // namespace vigil::http
