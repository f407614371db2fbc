// Reading the request head (nginx's ngx_http_process_request_line,
// ngx_http_process_request_headers, ngx_http_read_request_header and
// ngx_http_alloc_large_header_buffer), driving the parser of parse.h.
#include <cerrno>

#include "http/core/request.h"
#include "http/core/worker.h"
#include "vigil/core/log.h"
#include "vigil/event/loop.h"

namespace vigil::http {
namespace {

constexpr int kRead = 1;
constexpr int kWait = 0;
constexpr int kGone = -1;  // the request was finalised

// Makes sure unparsed bytes are in hc.buffer: returns kRead when there are
// some, kWait when the socket has none yet (the read event is armed), kGone
// when the client went away or failed (the request was ended).
int read_request_header(Request& r) {
  HttpConnection& hc = *r.hc;
  Connection& c = *r.c;
  Buf& b = hc.buffer;
  if (b.last > b.pos) return kRead;

  long n = kIoAgain;
  if (c.read->ready) n = c.recv(c, b.last, static_cast<std::size_t>(b.end - b.last));
  if (n == kIoAgain) {
    EventLoop& loop = *c.loop;
    if (!c.read->timer_set) loop.add_timer(*c.read, hc.srv->client_header_timeout);
    if (!loop.handle_read_event(*c.read)) {
      terminate_request(r, 500);
      return kGone;
    }
    return kWait;
  }
  if (n == 0) {
    VIGIL_LOG(*c.log, kInfo, 0, "*%llu client prematurely closed connection",
              static_cast<unsigned long long>(c.number));
  }
  if (n <= 0) {
    terminate_request(r, 400);
    return kGone;
  }
  b.last += n;
  return kRead;
}

void retire(Request& r, char* mem, std::size_t size) {
  r.retired[r.nretired] = mem;
  r.retired_size[r.nretired] = static_cast<std::uint32_t>(size);
  ++r.nretired;
}

// The current buffer is full in the middle of a line: move the line to a
// large buffer (one more, up to large_client_header_buffers' number). The
// old buffer stays with the request while completed lines point into it;
// while the request line is still incomplete nothing does.
bool alloc_large_header_buffer(Request& r, bool request_line) {
  HttpConnection& hc = *r.hc;
  const HttpSrvConf& srv = *hc.srv;
  if (r.nlarge >= srv.large_buffers_num) return false;
  Buf& old = hc.buffer;
  const std::size_t size = srv.large_buffers_size;
  if (r.parser.pending() + static_cast<std::size_t>(old.last - old.pos) > size) return false;
  BufferCache& cache = hc.worker->buffers();
  char* mem = cache.get(size);
  if (mem == nullptr) return false;
  Buf nb;
  nb.reset(mem, size);
  if (!r.parser.move_pending(old, nb)) {
    cache.put(mem, size);
    return false;
  }
  if (request_line) {
    cache.put(old.start, static_cast<std::size_t>(old.end - old.start));
  } else {
    retire(r, old.start, static_cast<std::size_t>(old.end - old.start));
  }
  hc.buffer = nb;
  hc.large = true;
  ++r.nlarge;
  return true;
}

void store_field(Request& r, const HeaderField& f) {
  switch (f.id) {
    case HeaderId::kIfModifiedSince:
      r.if_modified_since = f.value;
      break;
    case HeaderId::kIfUnmodifiedSince:
      r.if_unmodified_since = f.value;
      break;
    case HeaderId::kIfNoneMatch:
      r.if_none_match = f.value;
      break;
    case HeaderId::kIfMatch:
      r.if_match = f.value;
      break;
    case HeaderId::kRange:
      r.range = f.value;
      break;
    case HeaderId::kIfRange:
      r.if_range = f.value;
      break;
    case HeaderId::kUserAgent:
      r.user_agent = f.value;
      break;
    case HeaderId::kReferer:
      r.referer = f.value;
      break;
    default:
      break;
  }
}

// nginx's rule for a field name it acts on: letters, digits and '-', and
// '_' with underscores_in_headers. The parser has already refused a name
// that is not a token (RFC 9110 §5.1: 400); a token with other characters
// (".", "_", "~", ...) is dropped under ignore_invalid_headers.
bool ignored_field(const Request& r, const HeaderField& f) {
  const HttpSrvConf& srv = *r.hc->srv;
  if (!srv.ignore_invalid_headers) return false;
  for (char c : f.name) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-') {
      continue;
    }
    if (c == '_' && srv.underscores_in_headers) continue;
    VIGIL_LOG(*r.c->log, kInfo, 0, "*%llu client sent invalid header line: \"%.*s\"",
              static_cast<unsigned long long>(r.c->number), static_cast<int>(f.name.size()),
              f.name.data());
    return true;
  }
  return false;
}

// The head is read: from here the request's own handlers take the events.
void head_read(Request& r) {
  r.c->read->handler = request_handler;
  r.c->write->handler = request_handler;
  process_request(r);
}

// Keeps `f` in the request's field list; false when there are too many.
bool keep_field(Request& r, const HeaderField& f) {
  if (r.nfields == kInlineFields && !r.fields_big) {
    auto* mem = reinterpret_cast<HeaderField*>(
        r.hc->worker->buffers().get(kMaxFields * sizeof(HeaderField)));
    if (mem == nullptr) return false;
    for (std::uint32_t i = 0; i < r.nfields; ++i) mem[i] = r.fields[i];
    r.fields = mem;
    r.fields_big = true;
  }
  if (r.nfields == kMaxFields) return false;
  r.fields[r.nfields++] = f;
  return true;
}

// The shared first step of both parsing loops: a full buffer moves what is
// pending to a large header buffer (as often as needed), then more is read.
// False when the request is finished (too long: 414/431, or nothing to read
// yet, or an error): the caller returns.
bool fill_header_buffer(Request& r, bool request_line) {
  HttpConnection& hc = *r.hc;
  for (Buf* b = &hc.buffer; b->pos == b->last && b->last == b->end; b = &hc.buffer) {
    if (!alloc_large_header_buffer(r, request_line)) {
      VIGIL_LOG(*r.c->log, kInfo, 0, "*%llu client sent too long %s",
                static_cast<unsigned long long>(r.c->number),
                request_line ? "URI" : "header line");
      finalize_error(r, request_line ? 414 : 431);
      return false;
    }
  }
  return read_request_header(r) == kRead;
}

void process_request_headers(Request& r) {
  HttpConnection& hc = *r.hc;
  for (;;) {
    if (!fill_header_buffer(r, false)) return;

    Buf& cur = hc.buffer;
    std::size_t used = 0;
    HeaderField f;
    ParseStatus st = r.parser.parse_header(
        std::string_view(cur.pos, static_cast<std::size_t>(cur.last - cur.pos)), used, f);
    cur.pos += used;
    if (hc.stream == nullptr) r.request_length += used;  // HTTP/2 counted its header block
    switch (st) {
      case ParseStatus::kOk:
        if (ignored_field(r, f)) continue;
        if (!keep_field(r, f)) {
          VIGIL_LOG(*r.c->log, kInfo, 0, "*%llu client sent too many header fields",
                    static_cast<unsigned long long>(r.c->number));
          finalize_error(r, 431);
          return;
        }
        r.checker->add(f);
        store_field(r, f);
        continue;
      case ParseStatus::kHeadersDone:
        head_read(r);
        return;
      case ParseStatus::kAgain:
        continue;
      default:
        VIGIL_LOG(*r.c->log, kInfo, 0, "*%llu client sent invalid header line: %s",
                  static_cast<unsigned long long>(r.c->number), r.parser.error());
        finalize_error(r, status_code(st));
        return;
    }
  }
}

}  // namespace

void process_request_line(Request& r) {
  HttpConnection& hc = *r.hc;
  for (;;) {
    if (!fill_header_buffer(r, true)) return;

    Buf& cur = hc.buffer;
    std::size_t used = 0;
    ParseStatus st = r.parser.parse_request_line(
        std::string_view(cur.pos, static_cast<std::size_t>(cur.last - cur.pos)), used, r.line);
    cur.pos += used;
    if (hc.stream == nullptr) r.request_length += used;  // HTTP/2 counted its header block
    if (st == ParseStatus::kOk) {
      r.phase = Phase::kHeaders;
      r.checker.emplace(r.line);
      if (r.line.version < 1000) {
        head_read(r);  // HTTP/0.9: the line is the whole head
        return;
      }
      process_request_headers(r);
      return;
    }
    if (st == ParseStatus::kAgain) continue;
    VIGIL_LOG(*r.c->log, kInfo, 0, "*%llu client sent invalid request: %s",
              static_cast<unsigned long long>(r.c->number), r.parser.error());
    finalize_error(r, status_code(st));
    return;
  }
}

void read_request_handler(Event& rev) {
  Connection& c = *rev.owner<Connection>();
  auto& hc = *static_cast<HttpConnection*>(c.data);
  Request& r = *hc.request;
  if (c.close) {  // the worker is shutting down and cannot wait for this client
    terminate_request(r, 0);
    return;
  }
  if (rev.timedout) {
    // nginx answers nothing here: the client is too slow to read it anyway.
    VIGIL_LOG(*c.log, kInfo, ETIMEDOUT, "*%llu client timed out",
              static_cast<unsigned long long>(c.number));
    c.timedout = 1;
    terminate_request(r, 408);
    return;
  }
  if (r.phase == Phase::kRequestLine) {
    process_request_line(r);
  } else {
    process_request_headers(r);
  }
}

}  // namespace vigil::http
