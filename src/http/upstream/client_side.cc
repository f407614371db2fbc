// The client-facing half of an upstream request (client_side.h): the
// request's event handlers while a backend works, the request body through
// the body API, the response head through send_header, and the end of the
// request. The client connection itself is the transport's (http/v1/).
#include "http/upstream/client_side.h"

#include <cerrno>
#include <cstring>

#include "core/conf/values.h"
#include "http/core/filters.h"
#include "http/core/phases.h"
#include "http/core/request_vars.h"
#include "http/core/worker.h"
#include "vigil/core/log.h"
#include "vigil/event/loop.h"

namespace vigil::http::upstream_core {
namespace {

// The body cannot be read: answer (or close) and let go of the backend.
void body_failed(Upstream& u) {
  Request& r = *u.r;
  const RequestBody& rb = r.body;
  if (rb.status == 408 || r.c->close) {  // timed out, or the connection is closing
    end_attempt(u, 0);
    u.stage = Stage::kDone;
    terminate_request(r, rb.status);
    return;
  }
  r.lingering = true;
  if (u.stage == Stage::kRelay || u.stage == Stage::kTunnel) {
    // The backend's response has begun to go out: it cannot become the
    // error, the request ends cut.
    finish(u, true);
    return;
  }
  // No response yet, though part of an unbuffered body may have gone to
  // the backend: the backend is let go and the client gets the body's
  // error (a 400 for a body that disagrees with its length), as nginx's
  // upstream finalizes with the unbuffered reader's status.
  if (u.u != nullptr) close_upstream(u, false);
  u.stage = Stage::kDone;
  r.read_event_handler = block_reading;
  r.write_event_handler = write_handler;
  finalize_error(r, rb.status);
}

// Reads the body ahead (*_request_buffering) until it is all here: a
// buffer that fills first goes to a temporary file (request_body_file.cc),
// and so does every body with client_body_in_file_only.
void body_phase(Upstream& u) {
  Request& r = *u.r;
  RequestBody& rb = r.body;
  for (;;) {
    if (read_client_body(u) < 0) return;
    const bool full = rb.buf.last == rb.buf.end;
    if (!rb.done && !full) return;  // the body reader calls again
    if (!rb.done || rb.file_fd != -1 || request_body_in_file_only(r)) {
      if (!request_body_write(r)) {
        answer(u, 500);
        return;
      }
      if (!rb.done) continue;
      request_body_done_in_file(r);
    }
    begin_connect(u);
    return;
  }
}

void client_read(Upstream& u);

// The body reader's news (request_body.h).
void body_ready(Request& r) {
  Upstream& u = *r.upstream;
  if (r.body.failed) {
    body_failed(u);
    return;
  }
  client_read(u);
}

void check_broken(Upstream& u) {
  int err = 0;
  if (!client_gone(*u.r, err)) return;
  log_error(u, static_cast<int>(LogLevel::kInfo), err, "client prematurely closed connection");
  end_attempt(u, 0);
  u.stage = Stage::kDone;
  terminate_request(*u.r, 499);
}

// Fields nginx hides from the client unless *_pass_header lets them by.
bool hidden(const UpstreamConf& p, std::string_view name) {
  bool hide = iequals(name, "date") || iequals(name, "server") || iequals(name, "x-pad") ||
              (name.size() > 8 && iequals(name.substr(0, 8), "x-accel-"));
  for (const auto& h : p.hide_headers) {
    if (iequals(h, name)) hide = true;
  }
  if (hide) {
    for (const auto& h : p.pass_headers) {
      if (iequals(h, name)) return false;
    }
  }
  return hide;
}

}  // namespace

int client_start(Upstream& u) {
  Request& r = *u.r;
  const UpstreamConf& conf = *u.conf;
  r.read_event_handler = client_read_handler;
  r.write_event_handler = client_write_handler;

  const bool has_body = has_request_body(r);
  const bool take_body = conf.pass_request_body && !u.own_body;
  if (has_body && !take_body) {
    r.lingering = true;  // the body is not read: the connection closes after the response
  }
  if (!has_body && take_body && !send_continue(r)) return 500;
  if (!has_body || !take_body) return 0;
  return start_request_body(r, r.loc->client_body_buffer_size, body_ready);
}

int read_client_body(Upstream& u) {
  Request& r = *u.r;
  Buf& b = r.body.buf;
  if (!r.body.done && b.pos == b.last && b.last != b.start) {
    b.pos = b.last = b.start;  // all sent: refilled from its start
    u.body_replayable = false;
  }
  const int rc = read_request_body(r);
  if (rc < 0) body_failed(u);
  return rc;
}

void read_body_ahead(Upstream& u) {
  u.stage = Stage::kBody;
  body_phase(u);
}

int send_client_head(Upstream& u, bool upgrade) {
  Request& r = *u.r;
  const UpstreamConf& p = *u.conf;
  HeadersOut& h = r.headers_out;
  h = HeadersOut{};
  h.status = u.resp.status;
  h.reason = u.resp.reason;
  h.upgrade = upgrade;
  // HEAD, 1xx, 204, 304: no body, and the length the backend gave is said.
  const BodyKind body = u.resp.body;
  r.header_only = body == BodyKind::kNone;
  h.content_length =
      body == BodyKind::kLength || body == BodyKind::kNone ? u.resp.content_length : -1;
  for (const auto& name : p.pass_headers) {
    if (name == "server") h.own_server = false;
    if (name == "date") h.own_date = false;
  }
  // Which fields pass, decided over the whole list before any is marked
  // (the Connection fields name others, and are hop-by-hop themselves).
  for (std::uint32_t i = 0; i < u.nfields; ++i) {
    HeaderField& f = u.fields[i];
    f.omit = !(upgrade && f.id == HeaderId::kUpgrade) &&
             (hop_by_hop(f.name) || hidden(p, f.name) ||
              named_by_connection(u.fields, u.nfields, f.name));
  }
  for (std::uint32_t i = 0; i < u.nfields; ++i) {
    HeaderField& f = u.fields[i];
    if (f.omit) continue;
    switch (f.id) {
      case HeaderId::kContentLength:  // the head writer says the length, or frames the body
        f.omit = true;
        continue;
      case HeaderId::kContentType:
        h.content_type = f.value;
        f.omit = true;
        continue;
      default:
        break;
    }
    if (i != u.location_field) continue;
    // proxy_redirect rewrote it: the head writer sends it as the server's own.
    h.location = u.location;
    h.location_as_is = true;
    f.omit = true;
  }
  h.fields = u.fields;
  h.nfields = u.nfields;
  return send_header(r);
}

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The path of an X-Accel-Redirect, %XX decoded into `out` (its size at
// least path's); false when it is unsafe as nginx's ngx_http_parse_unsafe_uri
// judges: a NUL, or a ".." segment (after decoding).
bool safe_path(std::string_view path, char* out, std::size_t& n) {
  n = 0;
  for (std::size_t i = 0; i < path.size(); ++i) {
    char c = path[i];
    if (c == '%' && i + 2 < path.size() + 0 && hex_value(path[i + 1]) >= 0 &&
        hex_value(path[i + 2]) >= 0) {
      c = static_cast<char>(hex_value(path[i + 1]) * 16 + hex_value(path[i + 2]));
      i += 2;
    }
    if (c == '\0') return false;
    out[n++] = c;
  }
  const std::string_view p(out, n);
  std::size_t start = 0;
  while (start <= p.size()) {
    std::size_t end = p.find('/', start);
    if (end == std::string_view::npos) end = p.size();
    if (p.substr(start, end - start) == "..") return false;
    start = end + 1;
  }
  return true;
}

}  // namespace

void accel_limit_rate(Upstream& u) {
  if (u.conf->ignore_accel_limit_rate) return;
  for (std::uint32_t i = 0; i < u.nfields; ++i) {
    if (!iequals(u.fields[i].name, "x-accel-limit-rate")) continue;
    // As nginx's: bytes per second in decimal, for the rest of this
    // response whatever location it ends in; anything else is ignored.
    const auto v = parse_number(u.fields[i].value);
    if (v && *v >= 0) {
      u.r->limit_rate = static_cast<std::uint64_t>(*v);
      u.r->limit_rate_set = true;
    }
    return;
  }
}

bool accel_redirect(Upstream& u) {
  Request& r = *u.r;
  if (u.conf->ignore_accel_redirect) return false;
  std::string_view target;
  for (std::uint32_t i = 0; i < u.nfields; ++i) {
    if (iequals(u.fields[i].name, "x-accel-redirect")) {
      target = u.fields[i].value;
      break;
    }
  }
  if (target.empty()) return false;
  // The backend is done with; its head (and u.fields) stays with the request
  // for $upstream_http_* and the fields kept.
  close_upstream(u, false);
  u.stage = Stage::kDone;
  if (!r.body.done) r.lingering = true;
  r.read_event_handler = block_reading;
  r.write_event_handler = write_handler;
  r.headers_out = HeadersOut{};
  r.accel_content_type = {};
  for (std::uint32_t i = 0; i < u.nfields; ++i) {
    HeaderField& f = u.fields[i];
    const std::string_view n = f.name;
    f.omit = true;
    if (iequals(n, "content-type")) {
      r.accel_content_type = f.value;
    } else if (iequals(n, "set-cookie") || iequals(n, "content-disposition") ||
               iequals(n, "cache-control") || iequals(n, "expires") ||
               iequals(n, "accept-ranges")) {
      f.omit = false;
    }
  }
  r.accel_fields = u.fields;
  r.naccel = u.nfields;
  int rc;
  if (target.front() == '@') {
    rc = named_location_redirect(r, target);
  } else {
    const std::size_t q = target.find('?');
    const std::string_view path = target.substr(0, q);
    char* mem = request_alloc(r, target.size() + 1);
    std::size_t n = 0;
    if (mem == nullptr) {
      rc = 500;
    } else if (!safe_path(path, mem, n)) {
      VIGIL_LOG(*r.c->log, kError, 0, "*%llu unsafe URI \"%.*s\" was detected",
                static_cast<unsigned long long>(r.c->number), static_cast<int>(path.size()),
                path.data());
      rc = 404;
    } else {
      if (q != std::string_view::npos) {
        const std::string_view args = target.substr(q);
        std::memcpy(mem + n, args.data(), args.size());
        n += args.size();
      }
      if (r.line.method != Method::kHead) {
        r.line.method = Method::kGet;
        r.line.method_name = "GET";
      }
      rc = set_request_uri_and_args(r, std::string_view(mem, n)) ? internal_redirect(r) : 500;
    }
  }
  if (rc == kPhaseJump) {
    run_phases(r);
  } else {
    finalize_error(r, rc);
  }
  return true;
}

bool tunnel_client_start(Upstream& u) {
  Request& r = *u.r;
  HttpConnection& hc = *r.hc;
  // The client -> backend direction uses the body buffer (a GET has none
  // yet): given back with the request, as the body's.
  Buf& up = r.body.buf;
  if (up.start == nullptr) {
    const std::size_t size = r.loc->client_body_buffer_size;
    char* mem = hc.worker->buffers().get(size);
    if (mem == nullptr) return false;
    up.reset(mem, size);
    r.body.size = static_cast<std::uint32_t>(size);
  }
  up.pos = up.last = up.start;
  // Bytes the client sent after its request head belong to the new protocol.
  Buf& hb = hc.buffer;
  if (hb.start != nullptr && hb.pos < hb.last) {
    std::size_t n = static_cast<std::size_t>(hb.last - hb.pos);
    if (n > up.free_space()) n = up.free_space();
    std::memcpy(up.last, hb.pos, n);
    up.last += n;
    hb.pos += n;
  }
  r.body.done = true;  // what follows is the tunnel's
  // The head goes out first, then what the backend sent after its 101.
  Connection& c = *r.c;
  while (!r.hbuf.empty()) {
    long n = c.send(c, r.hbuf.pos, r.hbuf.size());
    if (n == kIoError) return false;
    if (n == kIoAgain) break;
    r.hbuf.pos += n;
  }
  return true;
}

int tunnel_send_head(Upstream& u) {
  Request& r = *u.r;
  Connection& c = *r.c;
  EventLoop& loop = *c.loop;
  if (r.hbuf.empty()) return 1;
  // The 101 head is still on its way: nothing else goes before it.
  long n = c.write->ready ? c.send(c, r.hbuf.pos, r.hbuf.size()) : kIoAgain;
  if (n == kIoError) return -1;
  if (n > 0) r.hbuf.pos += n;
  if (!r.hbuf.empty()) {
    loop.add_timer(*c.write, r.loc->send_timeout);
    return loop.handle_write_event(*c.write) ? 0 : -1;
  }
  loop.del_timer(*c.write);
  return 1;
}

void answer(Upstream& u, int status) {
  Request& r = *u.r;
  Connection& c = *r.c;
  u.stage = Stage::kDone;
  if (!r.body.done) r.lingering = true;  // the rest of the body is not read
  c.loop->del_timer(*c.read);
  r.read_event_handler = block_reading;
  r.write_event_handler = write_handler;
  finalize_error(r, status);
}

namespace {

// An intercepted 401 keeps the backend's challenges (nginx's
// ngx_http_upstream_intercept_errors): its WWW-Authenticate fields,
// '\n'-separated in r's memory, go out with the error page. nginx 1.22 keeps
// only the first; every one is kept here, as since nginx 1.23.0 (RFC 9110
// §11.6.1: each may hold challenges the client can answer).
bool keep_challenges(Upstream& u) {
  Request& r = *u.r;
  std::size_t n = 0;
  for (std::uint32_t i = 0; i < u.nfields; ++i) {
    if (iequals(u.fields[i].name, "www-authenticate")) n += u.fields[i].value.size() + 1;
  }
  if (n == 0) return true;
  char* mem = request_alloc(r, n);
  if (mem == nullptr) return false;
  char* p = mem;
  for (std::uint32_t i = 0; i < u.nfields; ++i) {
    const HeaderField& f = u.fields[i];
    if (!iequals(f.name, "www-authenticate")) continue;
    if (p != mem) *p++ = '\n';
    std::memcpy(p, f.value.data(), f.value.size());
    p += f.value.size();
  }
  r.headers_out.www_authenticate = std::string_view(mem, static_cast<std::size_t>(p - mem));
  return true;
}

}  // namespace

void answer_intercepted(Upstream& u, int status) {
  Request& r = *u.r;
  u.stage = Stage::kDone;
  if (status == 401 && !keep_challenges(u)) status = 500;
  // The backend's body is not wanted: its connection goes now (the
  // error_page runs through the phases and may wait), its head stays for
  // $upstream_http_* until the request ends.
  close_upstream(u, false);
  if (!r.body.done) r.lingering = true;
  r.read_event_handler = block_reading;
  r.write_event_handler = write_handler;
  finalize_error(r, status);
}

void client_finish(Upstream& u, bool error) {
  Request& r = *u.r;
  Connection& c = *r.c;
  EventLoop& loop = *c.loop;
  loop.del_timer(*c.read);
  loop.del_timer(*c.write);
  r.read_event_handler = block_reading;
  r.write_event_handler = write_handler;
  if (error) {
    terminate_request(r, 0);
    return;
  }
  if (!loop.handle_write_event(*c.write)) {
    terminate_request(r, 0);
    return;
  }
  finalize_request(r);
}

void client_read_handler(Request& req) {
  Request* r = &req;
  Connection& c = *r->c;
  Event& ev = *c.read;
  if (r->upstream == nullptr) {
    block_reading(*r);
    return;
  }
  Upstream& u = *r->upstream;
  if (c.close) {
    end_attempt(u, 0);
    u.stage = Stage::kDone;
    terminate_request(*r, 0);
    return;
  }
  if (ev.timedout) {
    ev.timedout = 0;
    if (u.stage == Stage::kTunnel) {
      finish(u, false);
      return;
    }
    VIGIL_LOG(*c.log, kInfo, ETIMEDOUT, "*%llu client timed out reading the body",
              static_cast<unsigned long long>(c.number));
    c.timedout = 1;
    end_attempt(u, 0);
    u.stage = Stage::kDone;
    terminate_request(*r, 408);
    return;
  }
  client_read(u);
}

namespace {

// A client read event for the stage the upstream request is in (the body
// reader's handler comes here too, while it has the event).
void client_read(Upstream& u) {
  switch (u.stage) {
    case Stage::kBody:
      body_phase(u);
      return;
    case Stage::kSending:
      if (!u.r->body.done) {
        send_request(u);
        return;
      }
      check_broken(u);
      return;
    case Stage::kTunnel:
      tunnel(u);
      return;
    case Stage::kConnecting:
    case Stage::kHandshake:
    case Stage::kHead:
    case Stage::kRelay:
      if (!u.r->body.done) return;  // unread body: reading it would mean sending it
      check_broken(u);
      return;
    case Stage::kDone:
      block_reading(*u.r);
      return;
  }
}

}  // namespace

void client_write_handler(Request& req) {
  Request* r = &req;
  Connection& c = *r->c;
  Event& ev = *c.write;
  if (r->upstream == nullptr) return;
  Upstream& u = *r->upstream;
  if (ev.delayed) {
    // limit_rate: only the delay's timer resumes the relay.
    if (!ev.timedout) {
      if (!c.loop->handle_write_event(ev)) finish(u, true);
      return;
    }
    ev.timedout = 0;
    ev.delayed = 0;
  } else if (ev.timedout) {
    ev.timedout = 0;
    VIGIL_LOG(*c.log, kInfo, ETIMEDOUT, "*%llu client timed out",
              static_cast<unsigned long long>(c.number));
    c.timedout = 1;
    finish(u, true);
    return;
  }
  if (u.stage == Stage::kRelay) {
    relay(u);
  } else if (u.stage == Stage::kTunnel) {
    tunnel(u);
  }
}

}  // namespace vigil::http::upstream_core
