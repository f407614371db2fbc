#include "stream/proxy.h"

#include <sys/socket.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>

#include "core/cidr.h"
#include "core/conf/values.h"
#include "core/proxy_protocol.h"
#include "core/rate_limit.h"
#include "core/unix_addr.h"
#include "event/proxy_protocol.h"
#include "event/tls/tls.h"
#include "event/udp.h"
#include "stream/access.h"
#include "stream/limit_conn.h"
#include "stream/log.h"
#include "stream/proxy_target.h"
#include "stream/session.h"
#include "stream/ssl_preread.h"
#include "stream/stream_conf.h"
#include "stream/udp_proxy.h"
#include "upstream/peer_connected.h"
#include "upstream/relay.h"
#include "upstream/run_time_group.h"
#include "vigil/core/log.h"
#include "vigil/event/listening.h"
#include "vigil/event/loop.h"
#include "vigil/event/peer.h"

namespace vigil::stream {

namespace {

void proxy_handler(Event& ev);
void connect_handler(Event& ev);
void connect_upstream(Session& s);

Session& session_of(Event& ev) {
  auto* c = ev.owner<Connection>();
  return *static_cast<Session*>(c->data);
}

}  // namespace

// The current attempt is over: its times and counts for the variables.
void end_try(Session& s) {
  UpstreamTry* t = s.current_try();
  if (t == nullptr || t->session_time != kNoTime) return;
  t->session_time = static_cast<Msec>(std::max<MsecDiff>(0, msec_diff(clock::current_msec(), t->start)));
  if (s.upstream != nullptr) {
    t->bytes_sent = s.upstream->sent;
    t->bytes_received = s.from_upstream;
  }
}

// A new attempt at the server the balancer picked (or at the group's name
// when there was none, as nginx's $upstream_addr tells).
void begin_try(Session& s, std::string_view addr) {
  if (s.ntries == kMaxUpstreamTries) return;  // later ones are not recorded
  UpstreamTry& t = s.tries[s.ntries++];
  char* copy = s.client->arena->dup(addr.data(), addr.size());
  t.addr = copy != nullptr ? std::string_view(copy, addr.size()) : std::string_view();
  t.start = clock::current_msec();
}

// The session ends: its log lines, then both connections close.
void finalize(Session& s, const char* why) {
  if (s.done) return;
  s.done = true;
  Connection& client = *s.client;
  EventLoop& loop = *client.loop;
  end_try(s);
  if (s.udp) {
    // nginx's words for a datagram session.
    VIGIL_LOG(*client.log, kInfo, 0,
              "*%llu %s, packets from/to client:%llu/%llu, bytes from/to client:%llu/%llu, "
              "bytes from/to upstream:%llu/%llu",
              static_cast<unsigned long long>(client.number), why,
              static_cast<unsigned long long>(s.requests),
              static_cast<unsigned long long>(s.responses),
              static_cast<unsigned long long>(s.from_client),
              static_cast<unsigned long long>(client.sent),
              static_cast<unsigned long long>(s.from_upstream),
              static_cast<unsigned long long>(s.upstream != nullptr ? s.upstream->sent : 0));
  } else if (s.conf->has_return) {
    VIGIL_LOG(*client.log, kInfo, 0, "*%llu %s, bytes from/to client:%llu/%llu",
              static_cast<unsigned long long>(client.number), why,
              static_cast<unsigned long long>(s.from_client),
              static_cast<unsigned long long>(client.sent));
  } else {
    // nginx's words and counters, then its stream log context.
    VIGIL_LOG(*client.log, kInfo, 0,
              "*%llu %s, bytes from/to client:%llu/%llu, bytes from/to upstream:%llu/%llu, "
              "client: %.*s, server: %.*s, upstream: \"%s\"",
              static_cast<unsigned long long>(client.number), why,
              static_cast<unsigned long long>(s.from_client),
              static_cast<unsigned long long>(client.sent),
              static_cast<unsigned long long>(s.from_upstream),
              static_cast<unsigned long long>(s.upstream != nullptr ? s.upstream->sent : 0),
              static_cast<int>(client.addr_text.size()), client.addr_text.data(),
              static_cast<int>(client.listening->addr_text.size()),
              client.listening->addr_text.data(), s.peer.name.c_str());
  }
  cancel_target(s);
  write_access_logs(s);
  limit_conn_release_all(s);
  if (s.upstream != nullptr) {
    // Connected: the attempt succeeded, whatever happened to the session
    // since, unless the server answered with an error (a UDP one's ICMP).
    s.peer.free(s.peer, s.peer.data,
                s.upstream_failed ? kPeerFailed : (s.connected ? 0 : kPeerNext));
    loop.pool().close_connection(*s.upstream);
    s.upstream = nullptr;
  }
  if (s.run_time != nullptr) s.run_time->~SessionGroup();
  s.~Session();  // the arena frees the memory with the client connection
  loop.pool().close_connection(client);
}

// finalize with the session's $status.
void finalize_with(Session& s, int status, const char* why) {
  s.status = status;
  finalize(s, why);
}

namespace {

// What `src` may be read now under `rate` bytes per second, `moved` read so
// far (-1: no limit). As nginx's stream proxy, time counts in whole seconds
// and the first second's bytes may go at once (rate * (seconds + 1)): a
// short exchange is not cut into pieces. Nothing: its read event is delayed
// with a timer until the second in which the next byte is due
// (proxy_handler tells that timer from a timeout).
off_t read_allowance(Session& s, Connection& src, std::size_t rate, std::uint64_t moved) {
  if (rate == 0) return -1;
  MsecDiff elapsed = msec_diff(clock::current_msec(), s.start_msec);
  if (elapsed < 0) elapsed = 0;
  const off_t allowed =
      limit_rate_allowance(rate, rate, static_cast<off_t>(moved), elapsed / 1000 * 1000);
  if (allowed > 0) return allowed;
  // The next byte comes with second moved / rate (then rate * (k + 1) > moved).
  const auto due = static_cast<MsecDiff>(moved / rate * 1000);
  src.read->delayed = 1;
  src.loop->add_timer(*src.read, static_cast<Msec>(due > elapsed ? due - elapsed : 1));
  return 0;
}

// After a relay pass: a side that may still be read but used up its rate's
// allowance waits for the next byte's time (nothing else would wake it when
// its peer has sent everything).
void arm_rate_delay(Session& s, Connection& src, std::size_t rate, std::uint64_t moved,
                    bool eof) {
  if (rate == 0 || eof || src.read->delayed || !src.read->ready) return;
  if (read_allowance(s, src, rate, moved) != 0) {
    // Credit came in meanwhile: read on right after this pass.
    src.read->delayed = 1;
    src.loop->add_timer(*src.read, 1);
  }
}

void process(Session& s) {
  Connection& c = *s.client;
  Connection& u = *s.upstream;
  EventLoop& loop = *c.loop;
  bool progress = false;
  const off_t up_limit =
      c.read->delayed ? 0 : read_allowance(s, c, s.upload_rate, s.from_client);
  const off_t down_limit =
      u.read->delayed ? 0 : read_allowance(s, u, s.download_rate, s.from_upstream);
  if (!upstream::relay(c, u, s.up, s.client_eof, s.upstream_shut, progress, &s.from_client,
                       up_limit) ||
      !upstream::relay(u, c, s.down, s.upstream_eof, s.client_shut, progress, &s.from_upstream,
                       down_limit)) {
    return finalize(s, "connection error");
  }
  if (s.from_upstream > 0) {
    UpstreamTry* t = s.current_try();
    if (t != nullptr && t->first_byte_time == kNoTime) {
      t->first_byte_time =
          static_cast<Msec>(std::max<MsecDiff>(0, msec_diff(clock::current_msec(), t->start)));
    }
  }
  arm_rate_delay(s, c, s.upload_rate, s.from_client, s.client_eof);
  arm_rate_delay(s, u, s.download_rate, s.from_upstream, s.upstream_eof);
  if (s.client_eof && s.upstream_eof && s.up.pos == s.up.last && s.down.pos == s.down.last) {
    return finalize(s, "both sides closed");
  }
  // proxy_half_close off (nginx's default): a side's EOF, once what it sent
  // is delivered, ends the session instead of being passed on as a half-close.
  if (!s.conf->proxy_half_close) {
    if (s.client_eof && s.up.pos == s.up.last) return finalize(s, "client closed");
    if (s.upstream_eof && s.down.pos == s.down.last) return finalize(s, "upstream closed");
  }
  // Idle timer: re-armed on traffic (lazily, so this is cheap per pass);
  // while the client's reading waits for its rate, that timer is the delay's.
  if (!c.read->delayed && (progress || !c.read->timer_set)) {
    loop.add_timer(*c.read, s.conf->proxy_timeout);
  }
  // A side at EOF must leave a level-triggered backend, which would otherwise
  // report it readable forever; edge-triggered registrations stay as they are.
  Status st = loop.handle_read_event(*c.read, s.client_eof ? kEvClose : 0);
  if (st) st = loop.handle_read_event(*u.read, s.upstream_eof ? kEvClose : 0);
  if (st) st = loop.handle_write_event(*c.write);
  if (st) st = loop.handle_write_event(*u.write);
  if (!st) {
    VIGIL_LOG(*c.log, kAlert, st.err(), "%s", st.message().c_str());
    finalize_with(s, 500, "event registration failed");
  }
}

void proxy_handler(Event& ev) {
  Session& s = session_of(ev);
  // The worker asks a connection to close (pool drain, shutdown) through
  // `close` on whichever of the two it picked.
  bool close = s.client->close || ev.owner<Connection>()->close;
  if (ev.timedout && ev.delayed && !close) {
    // A rate's delay is over: the side may be read again.
    ev.timedout = 0;
    ev.delayed = 0;
    if (s.connected) process(s);
    return;
  }
  if (ev.timedout || close) {
    ev.timedout = 0;
    return finalize(s, close ? "closed by the worker" : "timed out");
  }
  // Still connecting, or in the TLS handshake with the upstream: nothing to
  // relay yet. (The upstream connection exists from the connect on; relaying
  // then would put the client's bytes on the upstream's socket in the middle
  // of its TLS handshake.) A client read event meanwhile leaves `ready` set,
  // and start_relay reads what came.
  if (!s.connected) return;
  process(s);
}

}  // namespace

// Not a size: no limit, as nginx's 0.
std::size_t session_rate(const Session& s, std::size_t rate, const VarTemplate* var) {
  if (var == nullptr) return rate;
  std::string_view text;
  if (!var->evaluate(s, text)) return 0;
  const auto v = parse_size(text);
  if (!v) {
    VIGIL_LOG(*s.client->log, kError, 0, "*%llu invalid size \"%.*s\"",
              static_cast<unsigned long long>(s.client->number), static_cast<int>(text.size()),
              text.data());
    return 0;
  }
  return static_cast<std::size_t>(*v);
}

namespace {

void start_relay(Session& s) {
  s.connected = true;
  s.start_msec = clock::current_msec();
  s.upload_rate = session_rate(s, s.conf->proxy_upload_rate, s.conf->proxy_upload_rate_var.get());
  s.download_rate =
      session_rate(s, s.conf->proxy_download_rate, s.conf->proxy_download_rate_var.get());
  upstream::peer_connected(s.balancer);  // a recovered server takes new sessions at once
  if (UpstreamTry* t = s.current_try()) {
    t->connect_time = static_cast<Msec>(std::max<MsecDiff>(0, msec_diff(s.start_msec, t->start)));
  }
  Connection& u = *s.upstream;
  // Small writes go out as they come, to the upstream as to the client
  // (tcp_nodelay, on by default, covers both sides; the listener set the client's).
  if (s.conf->tcp_nodelay && u.tcp_nodelay == 0 && u.peer_addr != nullptr &&
      u.peer_addr->sa_family != AF_UNIX) {
    int on = 1;
    if (::setsockopt(u.fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on) == -1) {
      VIGIL_LOG(*s.client->log, kAlert, errno, "setsockopt(TCP_NODELAY) failed");
    }
    u.tcp_nodelay = 1;
  }
  u.data = &s;
  u.read->handler = proxy_handler;
  u.write->handler = proxy_handler;
  s.client->read->handler = proxy_handler;
  s.client->write->handler = proxy_handler;
  VIGIL_LOG(*s.client->log, kDebug, 0, "stream: connected to %s", s.peer.name.c_str());
  process(s);
}

// The connect failed or timed out: close this attempt, tell the balancer
// (max_fails), and try the next server while tries are left.
void next_upstream(Session& s, const char* why, int err) {
  VIGIL_LOG(*s.client->log, kError, err, "%s while connecting to upstream %s, client: %s", why,
            s.peer.name.c_str(), std::string(s.client->addr_text).c_str());
  end_try(s);
  s.peer.free(s.peer, s.peer.data, kPeerFailed);
  if (s.upstream != nullptr) {
    s.client->loop->pool().close_connection(*s.upstream);
    s.upstream = nullptr;
  }
  if (!s.conf->proxy_next_upstream || s.peer.tries == 0) {
    return finalize_with(s, 502, "no live upstreams");
  }
  connect_upstream(s);
}

void upstream_handshake_done(Connection& u, TlsHandshake result) {
  Session& s = *static_cast<Session*>(u.data);
  if (result != TlsHandshake::kOk) {
    // Why (the certificate, the peer, a timeout), as the handshake recorded it.
    std::string why = "SSL handshake failed";
    if (u.ssl != nullptr && !u.ssl->failure.empty()) {
      why += " (";
      why += u.ssl->failure;
      why += ")";
    }
    return next_upstream(s, why.c_str(), 0);
  }
  start_relay(s);
}

// Keeps the newest upstream session of this worker for the next connection.
void upstream_session_saved(Connection& u, SSL_SESSION* sess) {
  Session& s = *static_cast<Session*>(u.data);
  auto* conf = const_cast<StreamSrvConf*>(s.conf);
  if (conf->upstream_session.session != nullptr) SSL_SESSION_free(conf->upstream_session.session);
  conf->upstream_session.session = sess;
}

bool is_ipv4_literal(std::string_view name) {
  char text[INET_ADDRSTRLEN];
  if (name.empty() || name.size() >= sizeof text) return false;
  std::memcpy(text, name.data(), name.size());
  text[name.size()] = '\0';
  in_addr a{};
  return ::inet_pton(AF_INET, text, &a) == 1;
}

// proxy_protocol on: "PROXY TCP4 <client> <local> <client port> <local
// port>" in one piece before anything else (before TLS, too). The client is
// the session's peer, as realip may have set it; the local address is the
// one the client reached.
bool send_proxy_protocol(Session& s) {
  Connection& c = *s.client;
  sockaddr_storage local{};
  socklen_t len = sizeof local;
  const sockaddr* dst = nullptr;
  if (::getsockname(c.fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
    dst = reinterpret_cast<const sockaddr*>(&local);
  }
  const std::string h = proxy_protocol_v1_line(c.peer_addr, dst);
  const long n = s.upstream->send(*s.upstream, h.data(), h.size());
  if (n != static_cast<long>(h.size())) {
    VIGIL_LOG(*c.log, kError, n < 0 ? errno : 0,
              "could not send PROXY protocol header at once to upstream %s, client: %.*s",
              s.peer.name.c_str(), static_cast<int>(c.addr_text.size()), c.addr_text.data());
    return false;
  }
  return true;
}

// The TCP connection to the upstream is up: relay, or first a TLS handshake.
void connected(Session& s) {
  const StreamSrvConf& conf = *s.conf;
  if (conf.proxy_protocol && !send_proxy_protocol(s)) {
    return next_upstream(s, "sending the PROXY protocol header failed", 0);
  }
  if (!conf.proxy_ssl.enable) return start_relay(s);
  // proxy_ssl_name (with its variables), else the host of proxy_pass.
  std::string_view written = conf.proxy_ssl.name.empty() ? s.target : conf.proxy_ssl.name;
  if (conf.proxy_ssl_name_var != nullptr && !conf.proxy_ssl_name_var->evaluate(s, written)) {
    return finalize_with(s, 500, "out of memory");
  }
  const std::string_view name = target_host(written);
  // The certificate is checked against the name; SNI carries it only when
  // it is a host name, never an IP literal (RFC 6066 §3), as nginx.
  const bool literal = name.starts_with('[') || is_ipv4_literal(name);
  const std::string_view verify =
      name.starts_with('[') && name.ends_with(']') ? name.substr(1, name.size() - 2) : name;
  Status st =
      tls_start_client(*s.upstream, *conf.upstream_tls,
                       conf.proxy_ssl.server_name && !literal ? name : std::string_view(), verify,
                       conf.proxy_ssl.session_reuse ? conf.upstream_session.session : nullptr,
                       conf.proxy_connect_timeout, upstream_handshake_done,
                       conf.proxy_ssl.session_reuse ? upstream_session_saved : nullptr);
  if (!st) {
    VIGIL_LOG(*s.client->log, kAlert, 0, "%s", st.message().c_str());
    finalize_with(s, 500, "TLS to the upstream failed");
  }
}

void connect_handler(Event& ev) {
  auto* u = ev.owner<Connection>();
  Session& s = *static_cast<Session*>(u->data);
  if (ev.timedout) return next_upstream(s, "upstream timed out", ETIMEDOUT);
  if (s.client->close || u->close) return finalize(s, "closed by the worker");
  if (int err = peer_connect_result(*u); err != 0) return next_upstream(s, "connect() failed", err);
  s.client->loop->del_timer(*u->write);
  connected(s);
}

void connect_upstream(Session& s) {
  EventLoop& loop = *s.client->loop;
  for (;;) {
    s.peer.log = s.client->log;
    s.peer.local = s.conf->bind_addr;  // proxy_bind
    s.peer.local_len = s.conf->bind_len;
    s.peer.transparent = s.conf->bind_transparent;
    int rc = event_connect_peer(loop, s.peer);
    if (rc == kPeerBusy) {
      VIGIL_LOG(*s.client->log, kError, 0,
                "no live upstreams while connecting to upstream \"%s\", client: %s",
                s.group->name.c_str(), std::string(s.client->addr_text).c_str());
      begin_try(s, s.group->name);
      break;
    }
    begin_try(s, s.peer.name);
    if (rc == kPeerDeclined) {
      VIGIL_LOG(*s.client->log, kError, 0, "upstream %s refused the connection, client: %s",
                s.peer.name.c_str(), std::string(s.client->addr_text).c_str());
      end_try(s);
      s.peer.free(s.peer, s.peer.data, kPeerFailed);
      if (!s.conf->proxy_next_upstream || s.peer.tries == 0) break;
      continue;
    }
    if (rc == kPeerError) {  // a local failure: don't hammer the others
      s.peer.free(s.peer, s.peer.data, kPeerNext);
      break;
    }
    s.upstream = s.peer.connection;
    s.upstream->data = &s;
    if (rc == kPeerOk || rc == kPeerDone) return connected(s);
    s.upstream->read->handler = connect_handler;
    s.upstream->write->handler = connect_handler;
    loop.add_timer(*s.upstream->write, s.conf->proxy_connect_timeout);
    return;
  }
  finalize_with(s, 502, "no live upstreams");
}


std::string_view port_text(Connection& c, const sockaddr* sa) {
  if (sa == nullptr || (sa->sa_family != AF_INET && sa->sa_family != AF_INET6)) return {};
  char buf[8];
  const int n = std::snprintf(buf, sizeof buf, "%d", sockaddr_port(sa));
  const std::size_t len = n > 0 ? static_cast<std::size_t>(n) : 0;
  char* p = c.arena->dup(buf, len);
  return p == nullptr ? std::string_view() : std::string_view(p, len);
}

void proxy_to_group(Session& s);

// proxy_pass with variables chose the group (proxy_target.h), or failed.
void target_chosen(Session& s, int status) {
  if (status != 0) return finalize_with(s, status, "proxy_pass failed");
  proxy_to_group(s);
}

// Connects to the group's servers and relays.
void start_proxy(Session& s) {
  const StreamSrvConf& conf = *s.conf;
  s.group = conf.upstream;
  s.target = conf.proxy_pass;
  if (conf.proxy_pass_var != nullptr) {
    const int status = choose_target(s, target_chosen);
    if (status == kTargetResolving) {
      // Until the resolver answers, client events only matter as close.
      s.client->read->handler = proxy_handler;
      s.client->write->handler = proxy_handler;
      return;
    }
    return target_chosen(s, status);
  }
  proxy_to_group(s);
}

void proxy_to_group(Session& s) {
  Connection& c = *s.client;
  const StreamSrvConf& conf = *s.conf;
  // What ssl_preread read goes first; the buffer toward the upstream holds
  // it whole even when proxy_buffer_size is smaller.
  const std::size_t n = conf.proxy_buffer_size;
  const std::size_t pre = s.preread.size();
  const std::size_t up_size = std::max(n, pre);
  char* mem = static_cast<char*>(c.arena->alloc(up_size + n, 16));
  if (mem == nullptr) return finalize_with(s, 500, "out of memory");
  s.up.reset(mem, up_size);
  s.down.reset(mem + up_size, n);
  if (pre > 0) {
    std::memcpy(s.up.last, s.preread.pos, pre);
    s.up.last += pre;
  }
  upstream::Group& group = *s.group;
  std::string_view key;
  if (const VarTemplate* k = conf.fin->hash_key(group); k != nullptr && !k->evaluate(s, key)) {
    return finalize_with(s, 500, "out of memory");
  }
  s.balancer.init(group, *c.loop, conf.proxy_next_upstream_tries, key, c.peer_addr);
  s.balancer.attach(s.peer);
  if (s.udp) return udp_connect_upstream(s);
  // Until the upstream answers, client events only matter as timeouts/close.
  c.read->handler = proxy_handler;
  c.write->handler = proxy_handler;
  connect_upstream(s);
}

// "return text": the text with its variables, then the session ends
// (nginx's ngx_stream_return_module).
void return_handler(Event& ev) {
  Connection& c = *ev.owner<Connection>();
  Session& s = *static_cast<Session*>(c.data);
  if (ev.timedout || c.close) {
    if (ev.timedout) {
      VIGIL_LOG(*c.log, kInfo, ETIMEDOUT, "*%llu client timed out",
                static_cast<unsigned long long>(c.number));
    }
    return finalize(s, ev.timedout ? "timed out" : "closed by the worker");
  }
  if (!ev.write) return;
  while (s.ret_left > 0) {
    const long n = c.send(c, s.ret_pos, s.ret_left);
    if (n == kIoAgain) {
      if (!c.write->timer_set) c.loop->add_timer(*c.write, s.conf->proxy_timeout);
      if (!c.loop->handle_write_event(*c.write)) finalize_with(s, 500, "event registration failed");
      return;
    }
    if (n < 0) return finalize(s, "connection error");
    s.ret_pos += n;
    s.ret_left -= static_cast<std::size_t>(n);
  }
  finalize(s, "returned");
}

void start_return(Session& s) {
  Connection& c = *s.client;
  std::string_view text;
  if (!s.conf->return_value.evaluate(s, text)) return finalize_with(s, 500, "out of memory");
  if (s.udp) return udp_return(s, text);
  s.ret_pos = text.data();
  s.ret_left = text.size();
  c.read->handler = return_handler;
  c.write->handler = return_handler;
  return_handler(*c.write);
}

// The content phase: `return`, or proxying.
void start_content(Session& s) {
  if (s.conf->has_return) return start_return(s);
  start_proxy(s);
}

// After admit() and the TLS handshake: ssl_preread (the preread phase),
// then the content.
void start_session(Session& s) {
  if (s.conf->ssl_preread && !s.udp) return ssl_preread(s, start_content);
  start_content(s);
}

// set_real_ip_from: a trusted peer's PROXY protocol header names the client
// from here on (nginx's ngx_stream_realip_module).
void apply_realip(Session& s) {
  Connection& c = *s.client;
  const ProxyProtocolInfo* pp = c.proxy_protocol;
  if (pp == nullptr || pp->header.family == AF_UNSPEC ||
      !cidr_match(s.conf->realip_from, c.peer_addr)) {
    return;
  }
  auto* sa = static_cast<sockaddr*>(c.arena->alloc(sizeof(sockaddr_storage)));
  if (sa == nullptr) return;
  s.realip_addr = c.addr_text;
  s.realip_port = port_text(c, c.peer_addr);
  std::memcpy(sa, &pp->header.src, sizeof(sockaddr_storage));
  c.peer_addr = sa;
  c.peer_addrlen = pp->header.addrlen;
  c.addr_text = pp->src_addr;
}

// nginx's phases before TLS and the content: post-accept (realip),
// pre-access (set, limit_conn), access (allow / deny). False when they ended the
// session: 503 for a limit, 403 for a rule; a datagram's session ends as
// well, so its datagram is dropped.
bool admit(Session& s) {
  apply_realip(s);
  if (!s.conf->sets.empty() && !run_sets(s, s.conf->sets)) {
    finalize_with(s, 500, "out of memory");
    return false;
  }
  if (!s.conf->limit_conns.empty() && !limit_conn_pass(s)) {
    finalize_with(s, 503, "limiting connections");
    return false;
  }
  if (!s.conf->access_rules.empty() && !access_allows(s)) {
    finalize_with(s, 403, "access forbidden by rule");
    return false;
  }
  return true;
}

void client_handshake_done(Connection& c, TlsHandshake result) {
  Session& s = *static_cast<Session*>(c.data);
  if (result != TlsHandshake::kOk) return finalize_with(s, 500, "SSL handshake failed");
  // ssl_verify_client: a certificate that is missing or does not verify
  // ends the session (nginx's stream has no error page to send).
  if (tls_client_verify_status(c) != 0) {
    bool found = false;
    char reason[256];
    const std::size_t n = tls_fact(c, TlsFact::kClientVerify, nullptr, found);
    std::size_t len = 0;
    if (found && n < sizeof reason) len = tls_fact(c, TlsFact::kClientVerify, reason, found);
    VIGIL_LOG(*c.log, kInfo, 0, "*%llu client SSL certificate verify error: %.*s",
              static_cast<unsigned long long>(c.number), static_cast<int>(len), reason);
    return finalize_with(s, 500, "SSL certificate verify error");
  }
  start_session(s);
}

}  // namespace

namespace {

// The session of a connection just accepted (null without memory: closed).
Session* new_session(Connection& c) {
  const auto* conf = static_cast<const StreamSrvConf*>(c.listening->servers);
  if (conf->error_log != nullptr) c.log = conf->error_log;
  VIGIL_LOG(*c.log, kInfo, 0, "*%llu client %.*s connected to %s",
            static_cast<unsigned long long>(c.number), static_cast<int>(c.addr_text.size()),
            c.addr_text.data(), c.listening->addr_text.c_str());
  auto* s = c.arena->make<Session>();
  if (s == nullptr) {
    VIGIL_LOG(*c.log, kAlert, 0, "*%llu out of memory for a stream session",
              static_cast<unsigned long long>(c.number));
    c.loop->pool().close_connection(c);
    return nullptr;
  }
  s->client = &c;
  s->conf = conf;
  s->udp = is_udp_session(c);
  s->accepted = clock::current_msec();
  c.data = s;
  return s;
}

}  // namespace

void init_connection(Connection& c) {
  Session* s = new_session(c);
  if (s != nullptr && admit(*s)) start_session(*s);
}

void end_proxy_protocol_failure(Connection& c) {
  const bool broken = !c.timedout && !c.error && !c.close;
  Session* s = new_session(c);
  if (s == nullptr) return;
  // nginx's: a header that is not one is 400, a timeout or a failed read 200.
  finalize_with(*s, broken ? 400 : 200,
                broken ? "broken PROXY protocol header" : "PROXY protocol not read");
}

void init_tls_connection(Connection& c) {
  Session* s = new_session(c);
  if (s == nullptr || !admit(*s)) return;
  const StreamSrvConf& conf = *s->conf;
  // The session starts once the client's handshake is done. Unset,
  // ssl_handshake_timeout is 60 s, nginx's stream default.
  const Msec timeout = conf.ssl.handshake_timeout != 0 ? conf.ssl.handshake_timeout : 60000;
  if (Status st =
          tls_start_server(c, *conf.tls, /*detect_plain=*/false, timeout, client_handshake_done);
      !st) {
    VIGIL_LOG(*c.log, kAlert, 0, "%s", st.message().c_str());
    finalize_with(*s, 500, "SSL handshake failed");
  }
}

}  // namespace vigil::stream
