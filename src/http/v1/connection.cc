// The connection side of HTTP/1.1 (nginx's ngx_http_init_connection,
// ngx_http_wait_request_handler, ngx_http_set_keepalive,
// ngx_http_set_lingering_close, ngx_http_close_connection).
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>

#include "event/tls/context.h"
#include "event/tls/tls.h"
#include "http/access/limit_conn.h"
#include "http/core/counters.h"
#include "http/core/request.h"
#include "http/core/subrequest.h"
#include "http/core/worker.h"
#include "http/charset/charset.h"
#include "http/filters/range.h"
#include "http/gzip/gzip.h"
#include "http/static/open_file_cache.h"
#include "http/upstream/upstream.h"
#include "http/v2/h2.h"
#include "vigil/core/log.h"
#include "vigil/event/listening.h"
#include "vigil/event/loop.h"

namespace vigil::http {
namespace {

constexpr std::size_t kLingeringBuffer = 4096;

HttpConnection& http_of(Connection& c) {
  return *static_cast<HttpConnection*>(c.data);
}

void release_buffer(HttpConnection& hc) {
  Buf& b = hc.buffer;
  if (b.start == nullptr) return;
  hc.worker->buffers().put(b.start, static_cast<std::size_t>(b.end - b.start));
  b = Buf{};
  hc.large = false;
}

void free_request(Request& r) {
  HttpConnection& hc = *r.hc;
  BufferCache& cache = hc.worker->buffers();
  // A subrequest it waits for (or whose end is posted) goes first.
  release_subrequest(r);
  if (r.realip_saved_addr != nullptr) {
    // realip replaced the client's address for this request only.
    r.c->peer_addr = r.realip_saved_addr;
    r.c->peer_addrlen = r.realip_saved_len;
    r.c->addr_text = r.realip_saved_text;
    r.realip_saved_addr = nullptr;
  }
  if (r.nlimit_conn != 0) limit_conn_release_all(r);
  if (r.parent == nullptr) r.c->write->delayed = 0;
  upstream_core::release(r);
  release_gzip(r);
  release_charset(r);
  release_range(r);
  if (r.body.buf.start != nullptr) cache.put(r.body.buf.start, r.body.size);
  release_request_body_file(r);
  release_file(r);
  for (std::uint32_t i = 0; i < r.nretired; ++i) cache.put(r.retired[i], r.retired_size[i]);
  r.nretired = 0;
  if (r.big_header != nullptr) cache.put(r.big_header, r.big_header_size);
  if (r.chunk_frame.trailer_mem != nullptr) {
    cache.put(r.chunk_frame.trailer_mem, r.chunk_frame.trailer_size);
    r.chunk_frame.trailer_mem = nullptr;
  }
  if (r.obuf != nullptr) cache.put(r.obuf, r.obuf_size);
  if (r.location_mem != nullptr) cache.put(r.location_mem, r.location_mem_size);
  if (r.auth_mem != nullptr) cache.put(r.auth_mem, r.auth_mem_size);
  r.auth_mem = nullptr;
  if (r.fields_big) cache.put(reinterpret_cast<char*>(r.fields), kMaxFields * sizeof(HeaderField));
  if (r.uri_mem != nullptr) cache.put(r.uri_mem, r.uri_mem_size);
  release_request_vars(r);
  r.fields_big = false;
  r.uri_mem = nullptr;
  r.big_header = r.obuf = r.location_mem = nullptr;
  HttpCounters* counters = http_counters();
  if (r.stat_reading) counters->reading.add(-1);
  if (r.stat_writing) counters->writing.add(-1);
  r.stat_reading = r.stat_writing = false;
  if (hc.request == &r) hc.request = nullptr;
  hc.worker->put_request(&r);
}

// The first bytes of a request are in hc.buffer: make the Request.
void start_request(HttpConnection& hc) {
  Request* r = begin_request(hc);
  if (r == nullptr) {
    close_connection(hc);
    return;
  }
  hc.c->read->handler = read_request_handler;
  process_request_line(*r);
}

void lingering_close_handler(Event& rev) {
  Connection& c = *rev.owner<Connection>();
  HttpConnection& hc = http_of(c);
  EventLoop& loop = *c.loop;
  if (rev.timedout || c.close) {
    close_connection(hc);
    return;
  }
  const MsecDiff left = msec_diff(hc.lingering_deadline, clock::current_msec());
  if (left <= 0) {
    close_connection(hc);
    return;
  }
  char buf[kLingeringBuffer];
  do {
    long n = c.recv(c, buf, sizeof buf);
    if (n == kIoAgain) break;
    if (n <= 0) {  // the client closed (or reset): the response was not lost
      close_connection(hc);
      return;
    }
  } while (rev.ready);

  if (!loop.handle_read_event(rev)) {
    close_connection(hc);
    return;
  }
  const Msec timeout = static_cast<Msec>(left) < hc.lingering_timeout ? static_cast<Msec>(left)
                                                                      : hc.lingering_timeout;
  loop.add_timer(rev, timeout);
}

// SNI (RFC 6066 §3): the server block named by the client, with the same
// rules as Host; its certificate, and its limits for this connection.
TlsContext* select_server(Connection& c, std::string_view name) {
  HttpConnection& hc = http_of(c);
  const HttpSrvConf& srv = hc.addr->find_server(name);
  hc.srv = &srv;
  use_error_log(c, *srv.loc);
  return srv.tls.get();
}

void start_http(HttpConnection& hc) {
  Connection& c = *hc.c;
  c.read->handler = wait_request_handler;
  c.write->handler = empty_handler;
  // client_header_timeout runs from the accept, as nginx's post_accept_timeout.
  c.loop->add_timer(*c.read, hc.srv->client_header_timeout);
  if (c.read->ready) {
    wait_request_handler(*c.read);
    return;
  }
  if (!c.loop->handle_read_event(*c.read)) close_connection(hc);
}

void handshake_done(Connection& c, TlsHandshake result) {
  HttpConnection& hc = http_of(c);
  switch (result) {
    case TlsHandshake::kOk:
      if (h2::negotiated(c)) {
        // ALPN chose HTTP/2 (offered only where the server has http2).
        h2::start(hc);
        return;
      }
      start_http(hc);
      return;
    case TlsHandshake::kPlain:
      // Read the request and answer it with nginx's 400 "The plain HTTP
      // request was sent to HTTPS port" (process_request checks plain_http).
      hc.plain_http = true;
      start_http(hc);
      return;
    case TlsHandshake::kFailed:
      close_connection(hc);
      return;
  }
}

Status set_tcp_option(Connection& c, int level, int name, int value, const char* what) {
  if (::setsockopt(c.fd, level, name, &value, sizeof value) == -1) {
    return Status::sys(std::string("setsockopt(") + what + ")");
  }
  return Status::ok();
}

}  // namespace

// Reusable connections are the ones stub_status counts as "Waiting" (nginx
// counts them in ngx_reusable_connection): idle keep-alive ones and new ones
// that have not sent a byte. The pool may close them when it runs short.
void set_reusable(HttpConnection& hc, bool on) {
  hc.c->loop->pool().reusable(*hc.c, on);
  if (on != hc.waiting) {
    http_counters()->waiting.add(on ? 1 : -1);
    hc.waiting = on;
  }
}

void empty_handler(Event&) {}

Request* begin_request(HttpConnection& hc) {
  Connection& c = *hc.c;
  Request* r = hc.worker->get_request();
  if (r == nullptr) {
    VIGIL_LOG(*c.log, kAlert, 0, "*%llu out of memory for a request",
              static_cast<unsigned long long>(c.number));
    return nullptr;
  }
  // The free list holds constructed Requests: the old one is ended before a
  // fresh one is made in its place, so a member that owns something would be
  // freed, not leaked. Request is kept trivially destructible so that this
  // costs nothing on the hot path (the assertion keeps it so).
  static_assert(std::is_trivially_destructible_v<Request>,
                "Request is recycled per request: keep its destructor trivial");
  std::destroy_at(r);
  std::construct_at(r);
  r->hc = &hc;
  r->c = &c;
  r->srv = hc.srv;
  ParserLimits limits;
  limits.max_request_line = static_cast<std::uint32_t>(hc.srv->large_buffers_size);
  limits.max_header_line = static_cast<std::uint32_t>(hc.srv->large_buffers_size);
  limits.http2 = hc.stream != nullptr;
  r->parser = RequestParser(limits);
  r->nlarge = hc.large ? 1 : 0;
  r->sent_start = c.sent;
  r->pipelined = hc.pipelined;
  hc.pipelined = false;
  r->fields = r->field_inline;
  r->start_msec = clock::current_msec();
  hc.request = r;
  ++c.requests;

  HttpCounters* counters = http_counters();
  counters->requests.add();
  counters->reading.add();
  r->stat_reading = true;

  return r;
}

bool client_gone(Request& r, int& err) {
  if (r.hc->stream != nullptr) {
    err = 0;
    return h2::client_gone(r);
  }
  Connection& c = *r.c;
  Event& rev = *c.read;
  err = 0;
  if (!rev.ready && !rev.eof) return false;
  // Under TLS the next request may be inside OpenSSL already, where the
  // socket shows nothing: it is pipelined input, and readiness must stay.
  char ch;
  const ssize_t n = tls_has_pending(c) ? 1 : ::recv(c.fd, &ch, 1, MSG_PEEK);
  if (n > 0) {
    // Pipelined input: it waits for the next request. A level-triggered
    // backend would report it again and again.
    if (!(c.loop->capabilities() & kCapClear) && rev.active) (void)c.loop->backend().del(rev, 0);
    return false;
  }
  if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
    // io_uring's receive may hold bytes the socket no longer shows (the
    // next request, pipelined): readiness stays, the next recv() tells.
    if (!c.ring) rev.ready = 0;
    return false;
  }
  rev.eof = 1;
  if (n == -1) err = errno;
  return true;
}

void request_handler(Event& ev) {
  HttpConnection& hc = http_of(*ev.owner<Connection>());
  Request* r = hc.request;
  if (r == nullptr) return;
  if (ev.write) {
    r->write_event_handler(*r);
  } else {
    r->read_event_handler(*r);
  }
}

void close_file(Connection& c, int fd) {
  if (::close(fd) == -1) {
    VIGIL_LOG(*c.log, kAlert, errno, "*%llu close() of a file failed",
              static_cast<unsigned long long>(c.number));
  }
}

void release_file(Request& r) {
  if (r.fd == -1) return;
  if (r.file_entry != nullptr) {
    OpenFileCache::release(*r.file_entry, clock::current_msec());
    r.file_entry = nullptr;
  } else {
    close_file(*r.c, r.fd);
  }
  r.fd = -1;
}

void init_connection(Connection& c) {
  auto* addr = static_cast<const HttpAddress*>(c.listening->servers);
  HttpWorker* worker = worker_of(*c.loop);
  if (worker == nullptr) {
    VIGIL_LOG(*c.log, kAlert, 0, "http is not initialised in this worker");
    c.loop->pool().close_connection(c);
    return;
  }
  auto* hc = c.arena->make<HttpConnection>();
  if (hc == nullptr) {
    VIGIL_LOG(*c.log, kAlert, 0, "*%llu out of memory for an http connection",
              static_cast<unsigned long long>(c.number));
    c.loop->pool().close_connection(c);
    return;
  }
  hc->c = &c;
  hc->worker = worker;
  hc->addr = addr;
  hc->srv = addr->default_server;
  hc->start_msec = clock::current_msec();
  use_error_log(c, *hc->srv->loc);
  c.data = hc;
  set_reusable(*hc, true);

  if (addr->listen.ssl) {
    const HttpSrvConf& srv = *hc->srv;
    // nginx bounds the handshake by the default server's client_header_timeout
    // (ngx_http_ssl_handshake); ssl_handshake_timeout is Vigil's own.
    const Msec timeout =
        srv.ssl.handshake_timeout != 0 ? srv.ssl.handshake_timeout : srv.client_header_timeout;
    if (Status s = tls_start_server(c, *srv.tls, /*detect_plain=*/true, timeout, handshake_done,
                                    select_server);
        !s) {
      VIGIL_LOG(*c.log, kAlert, 0, "*%llu %s", static_cast<unsigned long long>(c.number),
                s.message().c_str());
      close_connection(*hc);
    }
    return;
  }
  start_http(*hc);
}

void wait_request_handler(Event& rev) {
  Connection& c = *rev.owner<Connection>();
  HttpConnection& hc = http_of(c);
  EventLoop& loop = *c.loop;

  if (rev.timedout) {
    // A new connection that sent nothing, or an idle keep-alive one.
    if (!hc.keepalive) {
      VIGIL_LOG(*c.log, kInfo, ETIMEDOUT, "*%llu client timed out",
                static_cast<unsigned long long>(c.number));
    }
    close_connection(hc);
    return;
  }
  if (c.close) {  // the pool needs the slot, or the worker is shutting down
    close_connection(hc);
    return;
  }

  Buf& b = hc.buffer;
  if (b.start == nullptr) {
    const std::size_t size = hc.srv->client_header_buffer_size;
    char* mem = hc.worker->buffers().get(size);
    if (mem == nullptr) {
      close_connection(hc);
      return;
    }
    b.reset(mem, size);
    hc.large = false;
  }

  // A pipelined request is already in the buffer; otherwise read.
  hc.pipelined = b.pos != b.last;
  if (b.pos == b.last) {
    b.pos = b.last = b.start;
    long n = c.recv(c, b.last, static_cast<std::size_t>(b.end - b.last));
    if (n == kIoAgain) {
      if (!loop.handle_read_event(rev)) {
        close_connection(hc);
        return;
      }
      // Nothing to keep while waiting: the buffer goes back to the worker.
      release_buffer(hc);
      return;
    }
    if (n <= 0) {  // EOF or error: no request was started, nothing to log
      close_connection(hc);
      return;
    }
    b.last += n;
  }

  if (hc.keepalive) loop.del_timer(rev);  // client_header_timeout starts again when needed
  if (c.requests == 0 && c.ssl == nullptr && hc.srv->http2 &&
      h2::starts_preface(std::string_view(b.pos, static_cast<std::size_t>(b.last - b.pos)))) {
    // HTTP/2 with prior knowledge (RFC 9113 §3.3) on a plain port with http2.
    h2::start(hc);
    return;
  }
  hc.keepalive = false;
  set_reusable(hc, false);
  start_request(hc);
}

void set_keepalive(HttpConnection& hc, const HttpLocConf& loc) {
  Connection& c = *hc.c;
  EventLoop& loop = *c.loop;
  Event& rev = *c.read;
  c.write->handler = empty_handler;
  rev.handler = wait_request_handler;
  Buf& b = hc.buffer;

  if (b.start != nullptr && b.pos < b.last) {
    // Pipelining (RFC 9112 §9.3.2): the next request is already here. Move it
    // to the front of the buffer (nothing points into the old request any
    // more) and handle it in this loop pass, after other ready events.
    if (b.pos != b.start) {
      const std::size_t n = static_cast<std::size_t>(b.last - b.pos);
      std::memmove(b.start, b.pos, n);
      b.pos = b.start;
      b.last = b.start + n;
    }
    hc.keepalive = false;
    loop.post(rev);
    return;
  }
  release_buffer(hc);
  tls_idle(c);  // a busy TLS connection keeps its record buffers (tls.h)

  // TCP_CORK held the last partial segment back: send it now (nginx's tcp_push).
  if (c.tcp_nopush == 1) {
    if (Status s = set_tcp_option(c, IPPROTO_TCP, TCP_CORK, 0, "TCP_CORK"); !s) {
      VIGIL_LOG(*c.log, kInfo, s.err(), "%s", s.message().c_str());
      close_connection(hc);
      return;
    }
    c.tcp_nopush = 0;
  }
  // nginx turns TCP_NODELAY on when a connection becomes keep-alive, so the
  // next small response is not held by Nagle behind an unacknowledged one.
  if (loc.tcp_nodelay && c.tcp_nodelay == 0) {
    if (Status s = set_tcp_option(c, IPPROTO_TCP, TCP_NODELAY, 1, "TCP_NODELAY"); !s) {
      VIGIL_LOG(*c.log, kInfo, s.err(), "%s", s.message().c_str());
      close_connection(hc);
      return;
    }
    c.tcp_nodelay = 1;
  }

  hc.keepalive = true;
  set_reusable(hc, true);
  loop.add_timer(rev, loc.keepalive_timeout);
  if (rev.ready) {
    // The next request arrived while we were writing (the read event fired
    // and was ignored then): an edge-triggered backend will not say it again.
    loop.post(rev);
    return;
  }
  if (!loop.handle_read_event(rev)) close_connection(hc);
}

void set_lingering_close(HttpConnection& hc, const HttpLocConf& loc) {
  Connection& c = *hc.c;
  EventLoop& loop = *c.loop;
  Event& rev = *c.read;
  release_buffer(hc);  // unread input is thrown away with the rest
  c.write->handler = empty_handler;
  rev.handler = lingering_close_handler;
  hc.lingering_deadline = clock::current_msec() + loc.lingering_time;
  hc.lingering_timeout = loc.lingering_timeout;

  // Our FIN goes out after the response; reading what the client still sends
  // keeps the kernel from answering it with a RST that could destroy the
  // response in flight (RFC 9112 §9.6).
  tls_send_close_notify(c);
  if (shutdown_write(c) == -1) {
    VIGIL_LOG(*c.log, kInfo, errno, "*%llu shutdown() failed",
              static_cast<unsigned long long>(c.number));
    close_connection(hc);
    return;
  }
  loop.add_timer(rev, loc.lingering_timeout);
  if (rev.ready) {
    lingering_close_handler(rev);
    return;
  }
  if (!loop.handle_read_event(rev)) close_connection(hc);
}

void close_connection(HttpConnection& hc) {
  if (hc.h2 != nullptr) {
    h2::close_session(hc);  // ends its streams, then calls back here
    return;
  }
  Connection& c = *hc.c;
  if (hc.request != nullptr) free_request(*hc.request);
  release_buffer(hc);
  if (hc.waiting) {
    http_counters()->waiting.add(-1);
    hc.waiting = false;
  }
  c.loop->pool().close_connection(c);
}

// Used by request.cc: the end of a request.
void release_request(Request& r) {
  free_request(r);
}

}  // namespace vigil::http
