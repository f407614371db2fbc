// The upstream request's life cycle (the parts of nginx's ngx_http_upstream
// that choose a server, retry, log and finish): connecting through the
// upstream layer (balancer, keepalive cache), next_upstream with its limits,
// $upstream_* bookkeeping, the backend connection's events, and the end.
#include "http/upstream/upstream.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "http/core/worker.h"
#include "http/upstream/client_side.h"
#include "vigil/core/log.h"
#include "vigil/event/loop.h"

namespace vigil::http::upstream_core {
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
void add_try(Upstream& u) {
  Request& r = *u.r;
  if (r.nupstream >= kMaxUpstreamTries) return;
  UpstreamTry& t = r.upstream_tries[r.nupstream++];
  t = UpstreamTry{};  // not cleared when the request started
  std::string_view name = u.pc.name;
  if (name.empty() && u.group != nullptr) name = u.group->name;
  const std::size_t n = name.size() < sizeof t.addr ? name.size() : sizeof t.addr;
  std::memcpy(t.addr, name.data(), n);
  t.addr_len = static_cast<std::uint8_t>(n);
  t.status = 0;
  t.time = 0;
  t.has_time = false;
  t.connected = false;
  t.has_header = false;
  t.bytes_sent = 0;
  t.bytes_received = 0;
  t.response_length = 0;
}

}  // namespace

UpstreamTry* current_try(Upstream& u) {
  Request& r = *u.r;
  return r.nupstream > 0 ? &r.upstream_tries[r.nupstream - 1] : nullptr;
}

void note_connected(Upstream& u) {
  Request& r = *u.r;
  if (r.nupstream == 0) return;
  UpstreamTry& t = r.upstream_tries[r.nupstream - 1];
  t.connect_time = static_cast<Msec>(msec_diff(clock::current_msec(), u.try_msec));
  t.connected = true;
}

namespace {

bool within_timeout(const Upstream& u) {
  const Msec limit = u.conf->next_upstream_timeout;
  return limit == 0 ||
         msec_diff(clock::current_msec(), u.start_msec) < static_cast<MsecDiff>(limit);
}

// Prepares the request to be sent again (another server); false when the
// body is no longer all in memory.
bool rewind_request(Upstream& u) {
  if (!u.body_replayable) return false;
  u.head.pos = u.head.start;
  Buf& body = u.r->body.buf;
  if (body.start != nullptr) body.pos = body.start;
  if (u.r->body.file.in_file) u.r->body.file.file_pos = 0;
  u.pending = nullptr;
  u.request_sent = false;
  u.body_blocked = false;
  u.ctl_pending = nullptr;
  u.resp = ResponseHead{};
  u.nfields = 0;
  u.resp_trailers = nullptr;
  u.nresp_trailers = 0;
  u.resp_any = false;
  u.resp_done = false;
  u.upstream_eof = false;
  u.upstream_reusable = true;
  u.premature = false;
  u.body_base = nullptr;
  if (u.ring[0].start != nullptr) u.ring[0].pos = u.ring[0].last = u.ring[0].start;
  u.ring_head = u.ring_tail = 0;
  u.protocol->reinit_request(u);
  return true;
}

}  // namespace

void end_attempt(Upstream& u, unsigned state) {
  EventLoop& loop = *u.r->c->loop;
  // $upstream_response_time: the attempt's whole time, to its last byte (or
  // failure, or the client's close), as nginx's; "-" until then.
  if (UpstreamTry* t = current_try(u); t != nullptr && !t->has_time) {
    t->time = static_cast<Msec>(msec_diff(clock::current_msec(), u.try_msec));
    t->has_time = true;
  }
  if (u.u != nullptr) {
    loop.del_timer(*u.u->read);
    loop.del_timer(*u.u->write);
    u.u->read->delayed = 0;  // a cached connection starts without *_limit_rate's wait
  }
  u.pc.connection = u.u;
  if (u.pc.free != nullptr) u.pc.free(u.pc, u.pc.data, state);
  if (u.pc.connection != nullptr) loop.pool().close_connection(*u.pc.connection);
  u.pc.connection = nullptr;
  u.u = nullptr;
}

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

bool hop_by_hop(std::string_view name) {
  static constexpr std::string_view kNames[] = {"connection",      "keep-alive",        "te",
                                                "trailer",         "transfer-encoding", "upgrade",
                                                "proxy-connection"};
  for (auto n : kNames) {
    if (iequals(n, name)) return true;
  }
  return false;
}

bool named_by_connection(const HeaderField* fields, std::uint32_t n, std::string_view name) {
  for (std::uint32_t i = 0; i < n; ++i) {
    if (fields[i].id == HeaderId::kConnection && list_has_token(fields[i].value, name)) return true;
  }
  return false;
}

namespace {

// What nginx names after a request's error line: its server and its Host
// (empty when the field is absent or too long to quote).
struct LogContext {
  std::string_view server;
  bool has_host = false;
  char host[256];
  std::size_t host_len = 0;

  explicit LogContext(const Request& r) {
    if (r.srv != nullptr && !r.srv->server_names.empty()) server = r.srv->server_names[0];
    host_len = request_header_value(r, "host", nullptr, has_host);
    if (host_len < sizeof host) {
      request_header_value(r, "host", host, has_host);
    } else {
      host_len = 0;
    }
  }
};

}  // namespace

void log_error(Upstream& u, int level, int err, const char* what) {
  Request& r = *u.r;
  Connection& c = *r.c;
  const auto lvl = static_cast<LogLevel>(level);
  if (!c.log->enabled(lvl)) return;
  const LogContext lc(r);
  std::string_view peer = u.pc.name;
  if (peer.empty() && u.group != nullptr) peer = u.group->name;
  std::string_view uri;
  if (u.head.start != nullptr) uri = {u.head.start + u.uri_off, u.uri_len};
  // nginx puts the errno right after the message, before the context.
  char errtext[128] = "";
  if (err != 0) std::snprintf(errtext, sizeof errtext, " (%d: %s)", err, std::strerror(err));
  c.log->write(lvl, 0,
               "*%llu %s%s while %s, client: %.*s, server: %.*s, request: \"%.*s\", upstream: "
               "\"%s://%.*s%.*s\", host: \"%.*s\"",
               static_cast<unsigned long long>(c.number), what, errtext, action(u.stage),
               static_cast<int>(c.addr_text.size()), c.addr_text.data(),
               static_cast<int>(lc.server.size()), lc.server.data(),
               static_cast<int>(r.line.line.size()), r.line.line.data(), u.https ? u.protocol->tls_scheme : u.protocol->scheme,
               static_cast<int>(peer.size()), peer.data(), static_cast<int>(uri.size()), uri.data(),
               static_cast<int>(lc.host_len), lc.host);
}

namespace {

// proxy_bind: the local address for this request's connections (its value
// may come from variables; empty: none). False when it is not an address.
bool set_local(Upstream& u) {
  Request& r = *u.r;
  const VarTemplate& t = u.conf->local;
  u.pc.local_len = 0;
  u.pc.transparent = u.conf->local_transparent;
  char text[128];
  const std::size_t n = t.length(r);
  if (n == 0) return true;
  if (n >= sizeof text) {
    VIGIL_LOG(*r.c->log, kError, 0, "*%llu invalid local address of %zu bytes",
              static_cast<unsigned long long>(r.c->number), n);
    return false;
  }
  const std::string_view value(text, static_cast<std::size_t>(t.write(r, text) - text));
  if (value.empty()) return true;
  if (!parse_local_address(value, u.pc.local, u.pc.local_len)) {
    VIGIL_LOG(*r.c->log, kError, 0, "*%llu invalid local address \"%.*s\"",
              static_cast<unsigned long long>(r.c->number), static_cast<int>(value.size()),
              value.data());
    return false;
  }
  return true;
}

}  // namespace

void log_request_error(Request& r, int level, const char* what) {
  Connection& c = *r.c;
  const auto lvl = static_cast<LogLevel>(level);
  if (!c.log->enabled(lvl)) return;
  const LogContext lc(r);
  c.log->write(lvl, 0, "*%llu %s, client: %.*s, server: %.*s, request: \"%.*s\"%s%.*s%s",
               static_cast<unsigned long long>(c.number), what,
               static_cast<int>(c.addr_text.size()), c.addr_text.data(),
               static_cast<int>(lc.server.size()), lc.server.data(),
               static_cast<int>(r.line.line.size()), r.line.line.data(),
               lc.has_host ? ", host: \"" : "", static_cast<int>(lc.host_len), lc.host,
               lc.has_host ? "\"" : "");
}

int start(Upstream& u) {
  u.start_msec = clock::current_msec();
  if (const int rc = client_start(u); rc != 0) return rc;
  if (u.r->body.started && !u.r->body.done && (u.conf->request_buffering || u.buffer_body)) {
    read_body_ahead(u);
    return 0;
  }
  begin_connect(u);
  return 0;
}

void begin_connect(Upstream& u) {
  Request& r = *u.r;
  if (r.body.started && r.body.buf.start != nullptr) {
    u.body_out = true;
    // Streamed as it arrives: what went out cannot be sent again.
    if (!r.body.done) u.body_replayable = false;
  }
  if (const int status = u.protocol->create_request(u); status != 0) {
    answer(u, status);
    return;
  }
  if (u.group == nullptr) {
    resolve(u);  // connects once the name's addresses are known
    return;
  }
  choose_peer(u);
}

void choose_peer(Upstream& u) {
  Request& r = *u.r;
  upstream::Group& group = *u.group;
  std::string_view key;
  if (u.group == u.conf->group && !u.conf->hash_key.empty()) {
    // The whole key is hashed: a long one is evaluated into a worker
    // buffer (given back with the request), never cut or dropped.
    const std::size_t n = u.conf->hash_key.length(r);
    char* at = u.hash_key;
    if (n > sizeof u.hash_key) {
      const std::size_t size = (n + 4095) & ~std::size_t{4095};
      at = r.hc->worker->buffers().get(size);
      if (at == nullptr) {
        answer(u, 500);
        return;
      }
      u.hash_key_mem = at;
      u.hash_key_mem_size = static_cast<std::uint32_t>(size);
    }
    char* end = u.conf->hash_key.write(r, at);
    key = std::string_view(at, static_cast<std::size_t>(end - at));
  }
  u.pr.init(group, *r.c->loop, u.conf->next_upstream_tries, key, r.c->peer_addr);
  // Cached connections are kept per TLS context (null: plain), so a location
  // gets back only connections made with its own *_ssl_* settings.
  // A protocol with connections of its own (HTTP/2) keys its plain ones by
  // its table, so neither gets the other's.
  const void* reuse_key = u.conf->tls.get();
  if (reuse_key == nullptr && u.protocol->own_connections) reuse_key = u.protocol;
  u.pr.set_reuse_key(reuse_key);
  u.pr.attach(u.pc);
  u.pc.log = r.c->log;
  if (!u.conf->local.empty() && !set_local(u)) {
    answer(u, 500);
    return;
  }
  connect(u);
}

void connect(Upstream& u) {
  Request& r = *u.r;
  EventLoop& loop = *r.c->loop;
  for (;;) {
    u.try_msec = clock::current_msec();
    u.stage = Stage::kConnecting;
    const int rc = event_connect_peer(loop, u.pc);
    if (rc == kPeerBusy) {
      u.pc.name.clear();
      add_try(u);
      r.upstream_tries[r.nupstream - 1].status = 502;
      log_error(u, static_cast<int>(LogLevel::kError), 0, "no live upstreams");
      answer(u, 502);
      return;
    }
    if (rc == kPeerDone && !cached_fits(u, *u.pc.connection)) {
      // The cache is keyed by the TLS context (set_reuse_key above), so this
      // is a safety net: a connection of another scheme or context is never
      // used; a fresh one instead.
      Connection* other = u.pc.connection;
      u.pr.retry_fresh(u.pc);
      u.pc.connection = nullptr;
      loop.pool().close_connection(*other);
      continue;
    }
    add_try(u);
    UpstreamTry& t = r.upstream_tries[r.nupstream - 1];
    if (rc == kPeerError) {
      t.status = 502;
      end_attempt(u, kPeerFailed);
      answer(u, 502);
      return;
    }
    if (rc == kPeerDeclined) {
      t.status = 502;
      end_attempt(u, kPeerFailed);
      if ((u.conf->next_upstream & kNextError) && u.pc.tries > 0 && within_timeout(u)) continue;
      answer(u, 502);
      return;
    }
    u.u = u.pc.connection;
    if (u.conf->socket_keepalive && !u.pc.cached) {
      // *_socket_keepalive: TCP keepalive on the connection (a failure
      // only costs the probes).
      const int on = 1;
      (void)::setsockopt(u.u->fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
    }
    u.u->data = &u;
    u.u->read->handler = upstream_handler;
    u.u->write->handler = upstream_handler;
    u.u->log = r.c->log;
    if (rc == kPeerAgain) {
      loop.add_timer(*u.u->write, u.conf->connect_timeout);
      return;
    }
    connected(u);  // kPeerOk, or kPeerDone: a cached connection (its TLS already up)
    return;
  }
}

void next_upstream(Upstream& u, unsigned next, int status) {
  Request& r = *u.r;
  if (r.nupstream > 0) {
    UpstreamTry& t = r.upstream_tries[r.nupstream - 1];
    if (t.status == 0) t.status = status;
    t.time = static_cast<Msec>(msec_diff(clock::current_msec(), u.try_msec));
    t.has_time = true;
  }
  // A cached keepalive connection the backend closed as we used it: the
  // request never reached it. Once more, on a fresh connection, when it is
  // safe to send again (seed of the keepalive rule in issue 9).
  if (u.pc.cached && !u.resp_any && !u.retried_fresh && next == kNextError && idempotent(r) &&
      u.body_replayable && rewind_request(u)) {
    u.retried_fresh = true;
    u.pr.retry_fresh(u.pc);
    if (u.u != nullptr) {
      r.c->loop->pool().close_connection(*u.u);
      u.u = nullptr;
      u.pc.connection = nullptr;
    }
    if (r.nupstream > 0) --r.nupstream;  // the same server again: one entry
    connect(u);
    return;
  }
  end_attempt(u, kPeerFailed);
  const bool allowed =
      (u.conf->next_upstream & next) != 0 && u.pc.tries > 0 && within_timeout(u) &&
      (!u.sent_any || idempotent(r) || (u.conf->next_upstream & kNextNonIdempotent));
  if (allowed && rewind_request(u)) {
    connect(u);
    return;
  }
  answer(u, status);
}

bool may_retry(Upstream& u, unsigned next) {
  return (u.conf->next_upstream & next) != 0 && u.pc.tries > 1 && within_timeout(u) &&
         u.body_replayable && (idempotent(*u.r) || (u.conf->next_upstream & kNextNonIdempotent));
}

void retry_after_response(Upstream& u, bool failed) {
  end_attempt(u, failed ? kPeerFailed : 0);
  if (!rewind_request(u)) {
    answer(u, 502);
    return;
  }
  connect(u);
}

void close_upstream(Upstream& u, bool reusable) {
  end_attempt(u, reusable ? kPeerKeepalive : 0);
}

void finish(Upstream& u, bool error) {
  if (u.stage == Stage::kDone) return;
  const bool reusable = !error && u.resp_done && u.upstream_reusable && u.request_sent &&
                        u.resp.keep_alive && !u.upstream_eof && u.ctl_pending == nullptr &&
                        (u.u == nullptr || tls_drained(*u.u));
  u.stage = Stage::kDone;
  close_upstream(u, reusable);
  client_finish(u, error);
}

void release(Request& r) {
  Upstream* u = r.upstream;
  if (u == nullptr) return;
  if (u->run_time != nullptr && u->run_time->resolver != nullptr) {
    // The request ends while its name is resolved: the query goes on for
    // the cache, this request is forgotten.
    u->run_time->resolver->cancel(u->run_time->query);
    u->run_time->resolver = nullptr;
  }
  if (u->u != nullptr) end_attempt(*u, 0);
  BufferCache& cache = r.hc->worker->buffers();
  if (u->head.start != nullptr) cache.put(u->head.start, u->head_cap);
  if (u->hash_key_mem != nullptr) cache.put(u->hash_key_mem, u->hash_key_mem_size);
  release_ring(*u);
  char* mem = u->state_mem;
  const std::size_t size = u->state_size;
  char* url_mem = u->url_mem;  // the protocol's views of the URL live until finalize
  const std::uint32_t url_mem_size = u->url_mem_size;
  u->protocol->finalize(*u);  // the protocol's state is destroyed here
  if (url_mem != nullptr) cache.put(url_mem, url_mem_size);
  cache.put(mem, size);
  r.upstream = nullptr;
  r.accel_fields = nullptr;  // they pointed into the head given back
  r.naccel = 0;
  r.accel_content_type = {};
}

void upstream_handler(Event& ev) {
  Connection& c = *ev.owner<Connection>();
  Upstream& u = *static_cast<Upstream*>(c.data);
  Request& r = *u.r;
  if (r.c->close || c.close) {
    end_attempt(u, 0);
    u.stage = Stage::kDone;
    terminate_request(r, 0);
    return;
  }
  switch (u.stage) {
    case Stage::kConnecting: {
      if (ev.timedout) {
        ev.timedout = 0;
        log_error(u, static_cast<int>(LogLevel::kError), ETIMEDOUT, "upstream timed out");
        next_upstream(u, kNextTimeout, 504);
        return;
      }
      if (int err = peer_connect_result(c); err != 0) {
        log_error(u, static_cast<int>(LogLevel::kError), err, "connect() failed");
        next_upstream(u, kNextError, 502);
        return;
      }
      if (!ev.write) return;  // the write event says when it is connected
      r.c->loop->del_timer(*c.write);
      connected(u);
      return;
    }
    case Stage::kHandshake:  // the TLS layer's handlers run the handshake
      return;
    case Stage::kSending:
    case Stage::kHead:
      if (ev.timedout) {
        ev.timedout = 0;
        log_error(u, static_cast<int>(LogLevel::kError), ETIMEDOUT, "upstream timed out");
        next_upstream(u, kNextTimeout, 504);
        return;
      }
      if (ev.write) {
        if (!u.request_sent) {
          send_request(u);
        } else if (!send_control(u)) {
          log_error(u, static_cast<int>(LogLevel::kError), 0, "upstream closed the connection");
          next_upstream(u, kNextError, 502);
        }
        return;
      }
      read_response_head(u);
      return;
    case Stage::kRelay:
      if (ev.timedout && ev.delayed) {  // *_limit_rate's delay is over
        ev.timedout = 0;
        ev.delayed = 0;
        relay(u);
        return;
      }
      if (ev.timedout) {
        ev.timedout = 0;
        log_error(u, static_cast<int>(LogLevel::kError), ETIMEDOUT, "upstream timed out");
        finish(u, true);
        return;
      }
      if (ev.write) {
        // Only a protocol's own bytes go to the backend now (control_output).
        if (!send_control(u)) {
          log_error(u, static_cast<int>(LogLevel::kError), 0, "upstream closed the connection");
          finish(u, true);
        }
        return;
      }
      relay(u);
      return;
    case Stage::kTunnel:
      tunnel(u);
      return;
    case Stage::kBody:
    case Stage::kDone:
      return;
  }
}

}  // namespace vigil::http::upstream_core

namespace vigil::http {

unsigned next_upstream_bit(int status) {
  switch (status) {
    case 500:
      return kNextHttp500;
    case 502:
      return kNextHttp502;
    case 503:
      return kNextHttp503;
    case 504:
      return kNextHttp504;
    case 403:
      return kNextHttp403;
    case 404:
      return kNextHttp404;
    case 429:
      return kNextHttp429;
    default:
      return 0;
  }
}

}  // namespace vigil::http
