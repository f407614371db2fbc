// The proxy's life cycle (nginx's ngx_http_proxy_handler and the parts of
// ngx_http_upstream that choose a server, retry, log and finish): state,
// connecting through the upstream layer, proxy_next_upstream, the client's
// events while the backend works, and the end of the request.
#include "http/proxy/proxy.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <new>

#include "event/tls/tls.h"
#include "http/core/worker.h"
#include "vigil/core/log.h"
#include "vigil/event/loop.h"

namespace vigil::http::proxy {
namespace {

const char* action(Stage s) {
  switch (s) {
    case Stage::kBody:
      return "reading client request body";
    case Stage::kConnecting:
      return "connecting to upstream";
    case Stage::kHandshake:
      return "SSL handshaking to upstream";
    case Stage::kSending:
      return "sending request to upstream";
    case Stage::kHead:
      return "reading response header from upstream";
    case Stage::kRelay:
    case Stage::kTunnel:
    case Stage::kDone:
      return "reading upstream";
  }
  return "proxying";
}

// A new entry of $upstream_addr / $upstream_status / $upstream_response_time.
void add_try(ProxyState& ps) {
  Request& r = *ps.r;
  if (r.nupstream >= kMaxUpstreamTries) return;
  UpstreamTry& t = r.upstream_tries[r.nupstream++];
  std::string_view name = ps.pc.name;
  if (name.empty() && ps.conf->group != nullptr) name = ps.conf->group->name;
  const std::size_t n = name.size() < sizeof t.addr ? name.size() : sizeof t.addr;
  std::memcpy(t.addr, name.data(), n);
  t.addr_len = static_cast<std::uint8_t>(n);
  t.status = 0;
  t.time = 0;
}

// Ends the current attempt for the upstream layer (once) and closes the
// connection it did not keep.
void end_attempt(ProxyState& ps, unsigned state) {
  EventLoop& loop = *ps.r->c->loop;
  if (ps.u != nullptr) {
    loop.del_timer(*ps.u->read);
    loop.del_timer(*ps.u->write);
  }
  ps.pc.connection = ps.u;
  if (ps.pc.free != nullptr) ps.pc.free(ps.pc, ps.pc.data, state);
  if (ps.pc.connection != nullptr) loop.pool().close_connection(*ps.pc.connection);
  ps.pc.connection = nullptr;
  ps.u = nullptr;
}

bool within_timeout(const ProxyState& ps) {
  const Msec limit = ps.conf->next_upstream_timeout;
  return limit == 0 ||
         msec_diff(clock::current_msec(), ps.start_msec) < static_cast<MsecDiff>(limit);
}

// What the client gets when the proxy gives up before a response started.
void answer(ProxyState& ps, int status) {
  Request& r = *ps.r;
  Connection& c = *r.c;
  ps.stage = Stage::kDone;
  if (!ps.body_in_done) r.lingering = true;  // the rest of the body is not read
  c.loop->del_timer(*c.read);
  c.read->handler = block_reading;
  c.write->handler = write_handler;
  finalize_error(r, status);
}

// The body (if any) read ahead, the head built: choose a server.
void begin_connect(ProxyState& ps) {
  Request& r = *ps.r;
  if (ps.body_in) {
    if (ps.body_in_done) {
      ps.body_out = BodyOut::kLength;
      ps.body_length = static_cast<std::int64_t>(ps.body.last - ps.body.pos);
    } else if (!ps.body_chunked_in) {
      ps.body_out = BodyOut::kLength;
      ps.body_length = r.check.content_length;
      ps.body_replayable = false;
    } else if (ps.conf->http_version == 1001) {
      ps.body_out = BodyOut::kChunked;
      ps.body_replayable = false;
    } else {
      // HTTP/1.0 has no chunked coding and we keep no temporary files.
      VIGIL_LOG(*r.c->log, kError, 0,
                "*%llu a chunked request body larger than client_body_buffer_size cannot be "
                "sent with proxy_http_version 1.0",
                static_cast<unsigned long long>(r.c->number));
      answer(ps, 411);
      return;
    }
  }
  if (!build_request(ps)) {
    answer(ps, 500);
    return;
  }
  upstream::Group& group = *ps.conf->group;
  std::string_view key;
  if (!ps.conf->hash_key.empty()) {
    // The whole key is hashed: a long one is evaluated into a worker
    // buffer (given back with the request), never cut or dropped.
    const std::size_t n = ps.conf->hash_key.length(r);
    char* at = ps.hash_key;
    if (n > sizeof ps.hash_key) {
      const std::size_t size = (n + 4095) & ~std::size_t{4095};
      at = r.hc->worker->buffers().get(size);
      if (at == nullptr) {
        answer(ps, 500);
        return;
      }
      ps.hash_key_mem = at;
      ps.hash_key_mem_size = static_cast<std::uint32_t>(size);
    }
    char* end = ps.conf->hash_key.write(r, at);
    key = std::string_view(at, static_cast<std::size_t>(end - at));
  }
  ps.pr.init(group, *r.c->loop, ps.conf->next_upstream_tries, key, r.c->peer_addr);
  // Cached connections are kept per TLS context (null: plain), so a location
  // gets back only connections made with its own proxy_ssl_* settings.
  ps.pr.set_reuse_key(ps.conf->tls.get());
  ps.pr.attach(ps.pc);
  ps.pc.log = r.c->log;
  connect(ps);
}

// Reads the body ahead (proxy_request_buffering) until it is all here or
// the buffer is full.
void body_phase(ProxyState& ps) {
  const int rc = read_body(ps);
  if (rc < 0) return;
  if (ps.body_in_done || ps.body.last == ps.body.end) {
    ps.r->c->loop->del_timer(*ps.r->c->read);
    begin_connect(ps);
  }
}

void check_broken(ProxyState& ps, Event& rev) {
  Connection& c = *ps.r->c;
  if (!rev.ready && !rev.eof) return;
  // Under TLS the next request may be inside OpenSSL already, where the
  // socket shows nothing: it is pipelined input, and readiness must stay.
  char ch;
  const ssize_t n = tls_has_pending(c) ? 1 : ::recv(c.fd, &ch, 1, MSG_PEEK);
  if (n > 0) {
    // Pipelined input: it waits for the next request. A level-triggered
    // backend would report it again and again.
    if (!(c.loop->capabilities() & kCapClear) && rev.active) (void)c.loop->backend().del(rev, 0);
    return;
  }
  if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
    rev.ready = 0;
    return;
  }
  rev.eof = 1;
  log_error(ps, static_cast<int>(LogLevel::kInfo), n == -1 ? errno : 0,
            "client prematurely closed connection");
  end_attempt(ps, 0);
  ps.stage = Stage::kDone;
  terminate_request(*ps.r, 499);
}

}  // namespace

bool idempotent(const Request& r) {
  switch (r.line.method) {
    case Method::kPost:
    case Method::kPatch:
      return false;
    case Method::kOther:
      return r.line.method_name != "LOCK";
    default:
      return true;
  }
}

void log_error(ProxyState& ps, int level, int err, const char* what) {
  Request& r = *ps.r;
  Connection& c = *r.c;
  const auto lvl = static_cast<LogLevel>(level);
  if (!c.log->enabled(lvl)) return;
  std::string_view server;
  if (r.srv != nullptr && !r.srv->server_names.empty()) server = r.srv->server_names[0];
  bool found = false;
  char host[256];
  std::size_t hlen = request_header_value(r, "host", nullptr, found);
  if (hlen < sizeof host) {
    request_header_value(r, "host", host, found);
  } else {
    hlen = 0;
  }
  std::string_view peer = ps.pc.name;
  if (peer.empty() && ps.conf->group != nullptr) peer = ps.conf->group->name;
  std::string_view uri;
  if (ps.head.start != nullptr) uri = {ps.head.start + ps.uri_off, ps.uri_len};
  // nginx puts the errno right after the message, before the context.
  char errtext[128] = "";
  if (err != 0) std::snprintf(errtext, sizeof errtext, " (%d: %s)", err, std::strerror(err));
  c.log->write(lvl, 0,
               "*%llu %s%s while %s, client: %.*s, server: %.*s, request: \"%.*s\", upstream: "
               "\"%s://%.*s%.*s\", host: \"%.*s\"",
               static_cast<unsigned long long>(c.number), what, errtext, action(ps.stage),
               static_cast<int>(c.addr_text.size()), c.addr_text.data(),
               static_cast<int>(server.size()), server.data(), static_cast<int>(r.line.line.size()),
               r.line.line.data(), ps.conf->https ? "https" : "http", static_cast<int>(peer.size()),
               peer.data(), static_cast<int>(uri.size()), uri.data(), static_cast<int>(hlen), host);
}

namespace {

int proxy_content(Request& r) {
  // The proxy reads the body itself, as it streams it to the backend.
  r.body_chunked = r.check.chunked;
  r.body_rest = r.check.content_length > 0 ? r.check.content_length : 0;
  return start(r);
}

}  // namespace

const ContentHandler kContent{"proxy_pass", proxy_content, true};

int start(Request& r) {
  const ProxyConf& conf = r.loc->proxy;
  if (!conf.enabled || conf.group == nullptr) return 500;
  HttpWorker& w = *r.hc->worker;
  char* mem = w.buffers().get(sizeof(ProxyState));
  if (mem == nullptr) return 500;
  auto* ps = new (mem) ProxyState();
  r.proxy = ps;
  ps->r = &r;
  ps->conf = &conf;
  ps->start_msec = clock::current_msec();
  Connection& c = *r.c;
  c.read->handler = client_read_handler;
  c.write->handler = client_write_handler;

  const bool has_body = r.body_chunked || r.body_rest > 0;
  if (has_body && !conf.pass_request_body) {
    r.lingering = true;  // the body is not read: the connection closes after the response
  }
  if (has_body && conf.pass_request_body) {
    const std::size_t size = r.loc->client_body_buffer_size;
    char* b = w.buffers().get(size);
    if (b == nullptr) return 500;
    ps->body.reset(b, size);
    ps->body_cap = static_cast<std::uint32_t>(size);
    ps->body_in = true;
    ps->body_in_done = false;
    ps->body_chunked_in = r.body_chunked;
    ps->body_rest = r.body_rest;
    if (r.body_chunked) {
      ChunkedLimits limits;
      if (r.loc->client_max_body_size > 0) limits.max_body = r.loc->client_max_body_size;
      ps->body_chunked = ChunkedParser(limits);
    }
    if (conf.request_buffering || (r.body_chunked && conf.http_version == 1000)) {
      ps->stage = Stage::kBody;
      body_phase(*ps);
      return 0;
    }
  }
  begin_connect(*ps);
  return 0;
}

void connect(ProxyState& ps) {
  Request& r = *ps.r;
  EventLoop& loop = *r.c->loop;
  for (;;) {
    ps.try_msec = clock::current_msec();
    ps.stage = Stage::kConnecting;
    const int rc = event_connect_peer(loop, ps.pc);
    if (rc == kPeerBusy) {
      ps.pc.name.clear();
      add_try(ps);
      r.upstream_tries[r.nupstream - 1].status = 502;
      log_error(ps, static_cast<int>(LogLevel::kError), 0, "no live upstreams");
      answer(ps, 502);
      return;
    }
    if (rc == kPeerDone && !cached_fits(ps, *ps.pc.connection)) {
      // The cache is keyed by the TLS context (set_reuse_key above), so this
      // is a safety net: a connection of another scheme or context is never
      // used; a fresh one instead.
      Connection* other = ps.pc.connection;
      ps.pr.retry_fresh(ps.pc);
      ps.pc.connection = nullptr;
      loop.pool().close_connection(*other);
      continue;
    }
    add_try(ps);
    UpstreamTry& t = r.upstream_tries[r.nupstream - 1];
    if (rc == kPeerError) {
      t.status = 502;
      end_attempt(ps, kPeerFailed);
      answer(ps, 502);
      return;
    }
    if (rc == kPeerDeclined) {
      t.status = 502;
      end_attempt(ps, kPeerFailed);
      if ((ps.conf->next_upstream & kNextError) && ps.pc.tries > 0 && within_timeout(ps)) continue;
      answer(ps, 502);
      return;
    }
    ps.u = ps.pc.connection;
    ps.u->data = &ps;
    ps.u->read->handler = upstream_handler;
    ps.u->write->handler = upstream_handler;
    ps.u->log = r.c->log;
    if (rc == kPeerAgain) {
      loop.add_timer(*ps.u->write, ps.conf->connect_timeout);
      return;
    }
    connected(ps);  // kPeerOk, or kPeerDone: a cached connection (its TLS already up)
    return;
  }
}

void next_upstream(ProxyState& ps, unsigned next, int status) {
  Request& r = *ps.r;
  if (r.nupstream > 0) {
    UpstreamTry& t = r.upstream_tries[r.nupstream - 1];
    if (t.status == 0) t.status = status;
    t.time = static_cast<Msec>(msec_diff(clock::current_msec(), ps.try_msec));
  }
  // A cached keepalive connection the backend closed as we used it: the
  // request never reached it. Once more, on a fresh connection, when it is
  // safe to send again (seed of the keepalive rule in issue 9).
  if (ps.pc.cached && !ps.resp_any && !ps.retried_fresh && next == kNextError && idempotent(r) &&
      ps.body_replayable && rewind_request(ps)) {
    ps.retried_fresh = true;
    ps.pr.retry_fresh(ps.pc);
    if (ps.u != nullptr) {
      r.c->loop->pool().close_connection(*ps.u);
      ps.u = nullptr;
      ps.pc.connection = nullptr;
    }
    if (r.nupstream > 0) --r.nupstream;  // the same server again: one entry
    connect(ps);
    return;
  }
  end_attempt(ps, kPeerFailed);
  const bool allowed =
      (ps.conf->next_upstream & next) != 0 && ps.pc.tries > 0 && within_timeout(ps) &&
      (!ps.sent_any || idempotent(r) || (ps.conf->next_upstream & kNextNonIdempotent));
  if (allowed && rewind_request(ps)) {
    connect(ps);
    return;
  }
  answer(ps, status);
}

bool may_retry(ProxyState& ps, unsigned next) {
  return (ps.conf->next_upstream & next) != 0 && ps.pc.tries > 1 && within_timeout(ps) &&
         ps.body_replayable && (idempotent(*ps.r) || (ps.conf->next_upstream & kNextNonIdempotent));
}

void retry_after_response(ProxyState& ps, bool failed) {
  end_attempt(ps, failed ? kPeerFailed : 0);
  if (!rewind_request(ps)) {
    answer(ps, 502);
    return;
  }
  connect(ps);
}

void close_upstream(ProxyState& ps, bool reusable) {
  end_attempt(ps, reusable ? kPeerKeepalive : 0);
}

void finish(ProxyState& ps, bool error) {
  Request& r = *ps.r;
  Connection& c = *r.c;
  EventLoop& loop = *c.loop;
  if (ps.stage == Stage::kDone) return;
  const bool reusable = !error && ps.resp_done && ps.upstream_reusable && ps.request_sent &&
                        ps.resp.keep_alive && !ps.upstream_eof &&
                        (ps.u == nullptr || tls_drained(*ps.u));
  ps.stage = Stage::kDone;
  close_upstream(ps, reusable);
  loop.del_timer(*c.read);
  loop.del_timer(*c.write);
  c.read->handler = block_reading;
  c.write->handler = write_handler;
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

void release(Request& r) {
  ProxyState* ps = r.proxy;
  if (ps == nullptr) return;
  if (ps->u != nullptr) end_attempt(*ps, 0);
  BufferCache& cache = r.hc->worker->buffers();
  if (ps->head.start != nullptr) cache.put(ps->head.start, ps->head_cap);
  if (ps->body.start != nullptr) cache.put(ps->body.start, ps->body_cap);
  if (ps->hash_key_mem != nullptr) cache.put(ps->hash_key_mem, ps->hash_key_mem_size);
  release_ring(*ps);
  ps->~ProxyState();
  cache.put(reinterpret_cast<char*>(ps), sizeof(ProxyState));
  r.proxy = nullptr;
}

void upstream_handler(Event& ev) {
  Connection& u = *ev.owner<Connection>();
  ProxyState& ps = *static_cast<ProxyState*>(u.data);
  Request& r = *ps.r;
  if (r.c->close || u.close) {
    end_attempt(ps, 0);
    ps.stage = Stage::kDone;
    terminate_request(r, 0);
    return;
  }
  switch (ps.stage) {
    case Stage::kConnecting: {
      if (ev.timedout) {
        ev.timedout = 0;
        log_error(ps, static_cast<int>(LogLevel::kError), ETIMEDOUT, "upstream timed out");
        next_upstream(ps, kNextTimeout, 504);
        return;
      }
      if (int err = peer_connect_result(u); err != 0) {
        log_error(ps, static_cast<int>(LogLevel::kError), err, "connect() failed");
        next_upstream(ps, kNextError, 502);
        return;
      }
      if (!ev.write) return;  // the write event says when it is connected
      r.c->loop->del_timer(*u.write);
      connected(ps);
      return;
    }
    case Stage::kHandshake:  // the TLS layer's handlers run the handshake
      return;
    case Stage::kSending:
    case Stage::kHead:
      if (ev.timedout) {
        ev.timedout = 0;
        log_error(ps, static_cast<int>(LogLevel::kError), ETIMEDOUT, "upstream timed out");
        next_upstream(ps, kNextTimeout, 504);
        return;
      }
      if (ev.write) {
        if (!ps.request_sent) send_request(ps);
        return;
      }
      read_response_head(ps);
      return;
    case Stage::kRelay:
      if (ev.timedout) {
        ev.timedout = 0;
        log_error(ps, static_cast<int>(LogLevel::kError), ETIMEDOUT, "upstream timed out");
        finish(ps, true);
        return;
      }
      relay(ps);
      return;
    case Stage::kTunnel:
      tunnel(ps);
      return;
    case Stage::kBody:
    case Stage::kDone:
      return;
  }
}

void client_read_handler(Event& ev) {
  Connection& c = *ev.owner<Connection>();
  auto& hc = *static_cast<HttpConnection*>(c.data);
  Request* r = hc.request;
  if (r == nullptr || r->proxy == nullptr) {
    block_reading(ev);
    return;
  }
  ProxyState& ps = *r->proxy;
  if (c.close) {
    end_attempt(ps, 0);
    ps.stage = Stage::kDone;
    terminate_request(*r, 0);
    return;
  }
  if (ev.timedout) {
    ev.timedout = 0;
    if (ps.stage == Stage::kTunnel) {
      finish(ps, false);
      return;
    }
    VIGIL_LOG(*c.log, kInfo, ETIMEDOUT, "*%llu client timed out reading the body",
              static_cast<unsigned long long>(c.number));
    c.timedout = 1;
    end_attempt(ps, 0);
    ps.stage = Stage::kDone;
    terminate_request(*r, 408);
    return;
  }
  switch (ps.stage) {
    case Stage::kBody:
      body_phase(ps);
      return;
    case Stage::kSending:
      if (!ps.body_in_done) {
        send_request(ps);
        return;
      }
      check_broken(ps, ev);
      return;
    case Stage::kTunnel:
      tunnel(ps);
      return;
    case Stage::kConnecting:
    case Stage::kHandshake:
    case Stage::kHead:
    case Stage::kRelay:
      if (!ps.body_in_done) return;  // unread body: reading it would mean sending it
      check_broken(ps, ev);
      return;
    case Stage::kDone:
      block_reading(ev);
      return;
  }
}

void client_write_handler(Event& ev) {
  Connection& c = *ev.owner<Connection>();
  auto& hc = *static_cast<HttpConnection*>(c.data);
  Request* r = hc.request;
  if (r == nullptr || r->proxy == nullptr) return;
  ProxyState& ps = *r->proxy;
  if (ev.timedout) {
    ev.timedout = 0;
    VIGIL_LOG(*c.log, kInfo, ETIMEDOUT, "*%llu client timed out",
              static_cast<unsigned long long>(c.number));
    c.timedout = 1;
    finish(ps, true);
    return;
  }
  if (ps.stage == Stage::kRelay) {
    relay(ps);
  } else if (ps.stage == Stage::kTunnel) {
    tunnel(ps);
  }
}

}  // namespace vigil::http::proxy
