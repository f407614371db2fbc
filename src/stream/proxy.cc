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
#include "core/proxy_protocol.h"
#include "event/proxy_protocol.h"
#include "event/tls/tls.h"
#include "stream/stream_conf.h"
#include "core/rate_limit.h"
#include "upstream/relay.h"
#include "vigil/core/log.h"
#include "vigil/event/listening.h"
#include "vigil/event/loop.h"
#include "vigil/event/peer.h"

namespace vigil::stream {

namespace {

struct Session {
  Connection* client = nullptr;
  Connection* upstream = nullptr;
  const StreamSrvConf* conf = nullptr;
  PeerConnection peer;
  upstream::PeerRequest balancer;  // pick the server, count, health (peer.get/free)
  Buf up;                          // client -> upstream
  Buf down;                        // upstream -> client
  bool client_eof = false;
  bool upstream_eof = false;
  bool upstream_shut = false;  // we sent FIN to the upstream
  bool client_shut = false;    // we sent FIN to the client
  bool done = false;
  bool connected = false;  // the upstream connect completed
  std::uint64_t from_client = 0;
  std::uint64_t from_upstream = 0;
  Msec start_msec = 0;  // the relay began: proxy_upload_rate / proxy_download_rate count from here
};

void proxy_handler(Event& ev);
void connect_handler(Event& ev);
void connect_upstream(Session& s);

Session& session_of(Event& ev) {
  auto* c = ev.owner<Connection>();
  return *static_cast<Session*>(c->data);
}

void finalize(Session& s, const char* why) {
  if (s.done) return;
  s.done = true;
  Connection& client = *s.client;
  EventLoop& loop = *client.loop;
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
  if (s.upstream != nullptr) {
    // Connected: the attempt succeeded, whatever happened to the session since.
    s.peer.free(s.peer, s.peer.data, s.connected ? 0 : kPeerNext);
    loop.pool().close_connection(*s.upstream);
    s.upstream = nullptr;
  }
  s.~Session();  // the arena frees the memory with the client connection
  loop.pool().close_connection(client);
}

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
      c.read->delayed ? 0 : read_allowance(s, c, s.conf->proxy_upload_rate, s.from_client);
  const off_t down_limit =
      u.read->delayed ? 0 : read_allowance(s, u, s.conf->proxy_download_rate, s.from_upstream);
  if (!upstream::relay(c, u, s.up, s.client_eof, s.upstream_shut, progress, &s.from_client,
                       up_limit) ||
      !upstream::relay(u, c, s.down, s.upstream_eof, s.client_shut, progress, &s.from_upstream,
                       down_limit)) {
    return finalize(s, "connection error");
  }
  arm_rate_delay(s, c, s.conf->proxy_upload_rate, s.from_client, s.client_eof);
  arm_rate_delay(s, u, s.conf->proxy_download_rate, s.from_upstream, s.upstream_eof);
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
    finalize(s, "event registration failed");
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

void start_relay(Session& s) {
  s.connected = true;
  s.start_msec = clock::current_msec();
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
  s.peer.free(s.peer, s.peer.data, kPeerFailed);
  if (s.upstream != nullptr) {
    s.client->loop->pool().close_connection(*s.upstream);
    s.upstream = nullptr;
  }
  if (!s.conf->proxy_next_upstream || s.peer.tries == 0) return finalize(s, "no live upstreams");
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

// The host of proxy_ssl_name or proxy_pass: the text up to its port's colon
// ("[v6]:port" keeps its brackets), as nginx takes it for both.
std::string_view ssl_host(std::string_view text) {
  std::size_t from = 0;
  if (text.starts_with('[')) {
    const std::size_t close = text.find(']');
    if (close != std::string_view::npos) from = close;
  }
  const std::size_t colon = text.find(':', from);
  return colon == std::string_view::npos ? text : text.substr(0, colon);
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
  const std::string_view name =
      ssl_host(conf.proxy_ssl.name.empty() ? conf.proxy_pass : conf.proxy_ssl.name);
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
    finalize(s, "TLS to the upstream failed");
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
                s.conf->upstream->name.c_str(), std::string(s.client->addr_text).c_str());
      break;
    }
    if (rc == kPeerDeclined) {
      VIGIL_LOG(*s.client->log, kError, 0, "upstream %s refused the connection, client: %s",
                s.peer.name.c_str(), std::string(s.client->addr_text).c_str());
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
  finalize(s, "no live upstreams");
}

// The `hash` key of the session: the key as written with the stream
// variables $remote_addr, $remote_port, $server_addr, $server_port,
// $binary_remote_addr, $proxy_protocol_addr, $proxy_protocol_port,
// $proxy_protocol_server_addr and $proxy_protocol_server_port
// substituted, built in the connection's arena.
// The connection's own address before set_real_ip_from replaced it
// ($realip_remote_addr, $realip_remote_port); empty: not replaced.
struct RealIpOriginal {
  std::string_view addr;
  std::string_view port;
};

std::string_view port_text(Connection& c, const sockaddr* sa) {
  const int port = sockaddr_port(sa);
  if (sa == nullptr || (sa->sa_family != AF_INET && sa->sa_family != AF_INET6)) return {};
  char buf[8];
  const int n = std::snprintf(buf, sizeof buf, "%d", port);
  char* p = c.arena->dup(buf, n > 0 ? static_cast<std::size_t>(n) : 0);
  return p == nullptr ? std::string_view() : std::string_view(p, n > 0 ? static_cast<std::size_t>(n) : 0);
}

std::string_view hash_key(Connection& c, const std::string& key, const RealIpOriginal& orig = {}) {
  if (key.find('$') == std::string::npos) return key;
  // addr_text is the client's address without the port (as nginx's); the
  // listener's text is "host:port".
  std::string_view remote_host = c.addr_text, local, local_port;
  char remote_port_text[8] = {};
  std::string_view remote_port;
  if (c.peer_addr != nullptr &&
      (c.peer_addr->sa_family == AF_INET || c.peer_addr->sa_family == AF_INET6)) {
    const in_port_t port = c.peer_addr->sa_family == AF_INET
                               ? reinterpret_cast<const sockaddr_in*>(c.peer_addr)->sin_port
                               : reinterpret_cast<const sockaddr_in6*>(c.peer_addr)->sin6_port;
    int n = std::snprintf(remote_port_text, sizeof remote_port_text, "%u", ntohs(port));
    remote_port = std::string_view(remote_port_text, n > 0 ? static_cast<std::size_t>(n) : 0);
  }
  if (c.listening != nullptr) {
    std::string_view text = c.listening->addr_text;
    std::size_t colon = text.rfind(':');
    local = colon == std::string_view::npos ? text : text.substr(0, colon);
    local_port = colon == std::string_view::npos ? std::string_view() : text.substr(colon + 1);
    if (local.size() >= 2 && local.front() == '[') local = local.substr(1, local.size() - 2);
  }
  std::string_view binary;
  if (c.peer_addr != nullptr && c.peer_addr->sa_family == AF_INET) {
    binary = std::string_view(
        reinterpret_cast<const char*>(&reinterpret_cast<const sockaddr_in*>(c.peer_addr)->sin_addr),
        4);
  } else if (c.peer_addr != nullptr && c.peer_addr->sa_family == AF_INET6) {
    binary = std::string_view(reinterpret_cast<const char*>(
                                  &reinterpret_cast<const sockaddr_in6*>(c.peer_addr)->sin6_addr),
                              16);
  }
  struct Var {
    std::string_view name;
    std::string_view value;
  };
  // Longest names first: $remote_addr must not match inside $remote_address.
  // The PROXY protocol's are empty for a connection that came without a
  // header (as nginx's).
  const ProxyProtocolInfo* pp = c.proxy_protocol;
  const Var vars[] = {{"binary_remote_addr", binary},
                      {"proxy_protocol_addr", pp ? pp->src_addr : std::string_view()},
                      {"proxy_protocol_port", pp ? pp->src_port_text : std::string_view()},
                      {"proxy_protocol_server_addr", pp ? pp->dst_addr : std::string_view()},
                      {"proxy_protocol_server_port", pp ? pp->dst_port_text : std::string_view()},
                      {"realip_remote_addr", orig.addr.empty() ? remote_host : orig.addr},
                      {"realip_remote_port", orig.addr.empty() ? remote_port : orig.port},
                      {"remote_addr", remote_host},
                      {"remote_port", remote_port},   {"server_addr", local},
                      {"server_port", local_port}};
  // Room for every variable's longest value (an IPv6 address).
  const std::size_t cap =
      key.size() + 64 * static_cast<std::size_t>(std::count(key.begin(), key.end(), '$'));
  char* out = static_cast<char*>(c.arena->alloc(cap, 1));
  if (out == nullptr) return key;
  std::size_t len = 0;
  for (std::size_t i = 0; i < key.size();) {
    bool matched = false;
    if (key[i] == '$') {
      std::string_view rest = std::string_view(key).substr(i + 1);
      bool braced = rest.starts_with("{");
      if (braced) rest.remove_prefix(1);
      for (const Var& v : vars) {
        if (!rest.starts_with(v.name)) continue;
        if (braced && !rest.substr(v.name.size()).starts_with("}")) continue;
        std::size_t n = std::min(v.value.size(), cap - len);
        if (n > 0) std::memcpy(out + len, v.value.data(), n);  // an empty value may have no data
        len += n;
        i += 1 + v.name.size() + (braced ? 2 : 0);
        matched = true;
        break;
      }
    }
    if (!matched) {
      if (len < cap) out[len++] = key[i];
      ++i;
    }
  }
  return std::string_view(out, len);
}

}  // namespace

namespace {

// "return text": the text with its variables, then the connection closes
// (nginx's ngx_stream_return_module).
struct ReturnState {
  const char* pos = nullptr;
  std::size_t left = 0;
};

void return_handler(Event& ev) {
  Connection& c = *ev.owner<Connection>();
  auto& st = *static_cast<ReturnState*>(c.data);
  const auto* conf = static_cast<const StreamSrvConf*>(c.listening->servers);
  if (ev.timedout || c.close) {
    if (ev.timedout) {
      VIGIL_LOG(*c.log, kInfo, ETIMEDOUT, "*%llu client timed out",
                static_cast<unsigned long long>(c.number));
    }
    c.loop->pool().close_connection(c);
    return;
  }
  if (!ev.write) return;
  while (st.left > 0) {
    const long n = c.send(c, st.pos, st.left);
    if (n == kIoAgain) {
      if (!c.write->timer_set) c.loop->add_timer(*c.write, conf->proxy_timeout);
      if (!c.loop->handle_write_event(*c.write)) c.loop->pool().close_connection(c);
      return;
    }
    if (n < 0) {
      c.loop->pool().close_connection(c);
      return;
    }
    st.pos += n;
    st.left -= static_cast<std::size_t>(n);
  }
  c.loop->pool().close_connection(c);
}

void start_return(Connection& c, const StreamSrvConf& conf, const RealIpOriginal& orig) {
  auto* st = c.arena->make<ReturnState>();
  if (st == nullptr) {
    VIGIL_LOG(*c.log, kAlert, 0, "*%llu out of memory for a stream return",
              static_cast<unsigned long long>(c.number));
    c.loop->pool().close_connection(c);
    return;
  }
  const std::string_view text = hash_key(c, conf.return_text, orig);
  st->pos = text.data();
  st->left = text.size();
  c.data = st;
  c.read->handler = return_handler;
  c.write->handler = return_handler;
  return_handler(*c.write);
}

void start_session(Connection& c) {
  const auto* conf = static_cast<const StreamSrvConf*>(c.listening->servers);
  // set_real_ip_from: a trusted peer's PROXY protocol header names the
  // client from here on (nginx's ngx_stream_realip_module).
  RealIpOriginal orig;
  const ProxyProtocolInfo* pp = c.proxy_protocol;
  if (pp != nullptr && pp->header.family != AF_UNSPEC && cidr_match(conf->realip_from, c.peer_addr)) {
    auto* sa = static_cast<sockaddr*>(c.arena->alloc(sizeof(sockaddr_storage)));
    if (sa != nullptr) {
      orig.addr = c.addr_text;
      orig.port = port_text(c, c.peer_addr);
      std::memcpy(sa, &pp->header.src, sizeof(sockaddr_storage));
      c.peer_addr = sa;
      c.peer_addrlen = pp->header.addrlen;
      c.addr_text = pp->src_addr;
    }
  }
  if (conf->has_return) return start_return(c, *conf, orig);
  std::size_t n = conf->proxy_buffer_size;
  char* mem = static_cast<char*>(c.arena->alloc(2 * n, 16));
  auto* s = c.arena->make<Session>();
  if (mem == nullptr || s == nullptr) {
    VIGIL_LOG(*c.log, kAlert, 0, "*%llu out of memory for a stream session",
              static_cast<unsigned long long>(c.number));
    c.loop->pool().close_connection(c);
    return;
  }
  s->client = &c;
  s->conf = conf;
  s->up.reset(mem, n);
  s->down.reset(mem + n, n);
  upstream::Group& group = *conf->upstream;
  std::string_view key;
  if (group.method == upstream::Method::kHash ||
      group.method == upstream::Method::kConsistentHash) {
    key = hash_key(c, group.hash_key, orig);
  }
  s->balancer.init(group, *c.loop, conf->proxy_next_upstream_tries, key, c.peer_addr);
  s->balancer.attach(s->peer);
  c.data = s;
  // Until the upstream answers, client events only matter as timeouts/close.
  c.read->handler = proxy_handler;
  c.write->handler = proxy_handler;
  connect_upstream(*s);
}

void client_handshake_done(Connection& c, TlsHandshake result) {
  if (result != TlsHandshake::kOk) {
    c.loop->pool().close_connection(c);
    return;
  }
  start_session(c);
}

}  // namespace

void init_connection(Connection& c) {
  const auto* conf = static_cast<const StreamSrvConf*>(c.listening->servers);
  if (conf->error_log != nullptr) c.log = conf->error_log;
  VIGIL_LOG(*c.log, kInfo, 0, "*%llu client %.*s connected to %s",
            static_cast<unsigned long long>(c.number), static_cast<int>(c.addr_text.size()),
            c.addr_text.data(), c.listening->addr_text.c_str());
  if (!conf->ssl_listen) return start_session(c);
  // TLS termination: the upstream is contacted once the client's handshake is done.
  // Unset, ssl_handshake_timeout is 60 s, nginx's stream default.
  const Msec timeout = conf->ssl.handshake_timeout != 0 ? conf->ssl.handshake_timeout : 60000;
  if (Status st =
          tls_start_server(c, *conf->tls, /*detect_plain=*/false, timeout, client_handshake_done);
      !st) {
    VIGIL_LOG(*c.log, kAlert, 0, "%s", st.message().c_str());
    c.loop->pool().close_connection(c);
  }
}

}  // namespace vigil::stream
