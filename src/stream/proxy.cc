#include "stream/proxy.h"

#include <sys/socket.h>

#include <cstring>
#include <new>

#include "stream/stream_conf.h"
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
  unsigned tries_left = 0;
  Buf up;    // client -> upstream
  Buf down;  // upstream -> client
  bool client_eof = false;
  bool upstream_eof = false;
  bool upstream_shut = false;  // we sent FIN to the upstream
  bool client_shut = false;    // we sent FIN to the client
  bool done = false;
  std::uint64_t from_client = 0;
  std::uint64_t from_upstream = 0;
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
  VIGIL_LOG(*client.log, kInfo, 0,
            "stream %s: %s, bytes from/to client: %llu/%llu, upstream %s",
            std::string(client.addr_text).c_str(), why,
            static_cast<unsigned long long>(s.from_client),
            static_cast<unsigned long long>(s.from_upstream), s.peer.name.c_str());
  if (s.upstream != nullptr) {
    loop.pool().close_connection(*s.upstream);
    s.upstream = nullptr;
  }
  s.~Session();  // the arena frees the memory with the client connection
  loop.pool().close_connection(client);
}

// Moves bytes src -> buf -> dst as far as the sockets allow. Returns false on
// an error (the session is finished by the caller).
bool pump(Connection& src, Connection& dst, Buf& buf, bool& src_eof, bool& dst_shut,
          std::uint64_t& counter, bool& progress) {
  for (;;) {
    bool moved = false;
    if (buf.pos < buf.last && dst.write->ready) {
      long n = dst.send(dst, buf.pos, static_cast<std::size_t>(buf.last - buf.pos));
      if (n == kIoError) return false;
      if (n > 0) {
        buf.pos += n;
        if (buf.pos == buf.last) buf.pos = buf.last = buf.start;
        moved = true;
      }
    }
    if (!src_eof && buf.last < buf.end && src.read->ready) {
      long n = src.recv(src, buf.last, static_cast<std::size_t>(buf.end - buf.last));
      if (n == kIoError) return false;
      if (n == 0) {
        src_eof = true;
        moved = true;
      } else if (n > 0) {
        buf.last += n;
        counter += static_cast<std::uint64_t>(n);
        moved = true;
      }
    }
    if (!moved) break;
    progress = true;
  }
  // Everything the side sent is delivered: pass its EOF on as a half-close.
  if (src_eof && buf.pos == buf.last && !dst_shut) {
    dst_shut = true;
    if (shutdown_write(dst) == -1 && errno != ENOTCONN) return false;
  }
  return true;
}

void process(Session& s) {
  Connection& c = *s.client;
  Connection& u = *s.upstream;
  EventLoop& loop = *c.loop;
  bool progress = false;
  if (!pump(c, u, s.up, s.client_eof, s.upstream_shut, s.from_client, progress) ||
      !pump(u, c, s.down, s.upstream_eof, s.client_shut, s.from_upstream, progress)) {
    return finalize(s, "connection error");
  }
  if (s.client_eof && s.upstream_eof && s.up.pos == s.up.last && s.down.pos == s.down.last) {
    return finalize(s, "both sides closed");
  }
  // Idle timer: re-armed on traffic (lazily, so this is cheap per pass).
  if (progress || !c.read->timer_set) loop.add_timer(*c.read, s.conf->proxy_timeout);
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
  if (ev.timedout || close) {
    ev.timedout = 0;
    return finalize(s, close ? "closed by the worker" : "timed out");
  }
  if (s.upstream == nullptr) return;  // still connecting: nothing to relay yet
  process(s);
}

void start_relay(Session& s) {
  Connection& u = *s.upstream;
  u.data = &s;
  u.read->handler = proxy_handler;
  u.write->handler = proxy_handler;
  s.client->read->handler = proxy_handler;
  s.client->write->handler = proxy_handler;
  VIGIL_LOG(*s.client->log, kDebug, 0, "stream: connected to %s", s.peer.name.c_str());
  process(s);
}

// The connect failed or timed out: close this attempt and try the next server.
void next_upstream(Session& s, const char* why, int err) {
  VIGIL_LOG(*s.client->log, kError, err, "%s while connecting to upstream %s, client: %s", why,
            s.peer.name.c_str(), std::string(s.client->addr_text).c_str());
  if (s.upstream != nullptr) {
    s.client->loop->pool().close_connection(*s.upstream);
    s.upstream = nullptr;
  }
  if (!s.conf->proxy_next_upstream || s.tries_left == 0) return finalize(s, "no live upstreams");
  connect_upstream(s);
}

void connect_handler(Event& ev) {
  auto* u = ev.owner<Connection>();
  Session& s = *static_cast<Session*>(u->data);
  if (ev.timedout) return next_upstream(s, "upstream timed out", ETIMEDOUT);
  if (s.client->close || u->close) return finalize(s, "closed by the worker");
  if (int err = peer_connect_result(*u); err != 0) return next_upstream(s, "connect() failed", err);
  s.client->loop->del_timer(*u->write);
  start_relay(s);
}

void connect_upstream(Session& s) {
  Upstream& group = *s.conf->upstream;
  EventLoop& loop = *s.client->loop;
  while (s.tries_left > 0) {
    --s.tries_left;
    const PeerAddress& p = group.servers[group.next++ % group.servers.size()];
    std::memcpy(&s.peer.addr, &p.addr, sizeof p.addr);
    s.peer.addrlen = p.addrlen;
    s.peer.name = p.name;
    s.peer.log = s.client->log;
    int rc = event_connect_peer(loop, s.peer);
    if (rc == kPeerDeclined) {
      VIGIL_LOG(*s.client->log, kError, 0, "upstream %s refused the connection, client: %s",
                p.name.c_str(), std::string(s.client->addr_text).c_str());
      if (!s.conf->proxy_next_upstream) break;
      continue;
    }
    if (rc != kPeerOk && rc != kPeerAgain) break;  // a local failure: don't hammer the others
    s.upstream = s.peer.connection;
    s.upstream->data = &s;
    if (rc == kPeerOk) return start_relay(s);
    s.upstream->read->handler = connect_handler;
    s.upstream->write->handler = connect_handler;
    loop.add_timer(*s.upstream->write, s.conf->proxy_connect_timeout);
    return;
  }
  finalize(s, "no live upstreams");
}

}  // namespace

void init_connection(Connection& c) {
  const auto* conf = static_cast<const StreamSrvConf*>(c.listening->servers);
  std::size_t n = conf->proxy_buffer_size;
  char* mem = static_cast<char*>(c.arena->alloc(2 * n, 16));
  auto* s = new (c.arena->alloc(sizeof(Session), alignof(Session))) Session();
  s->client = &c;
  s->conf = conf;
  s->up.reset(mem, n);
  s->down.reset(mem + n, n);
  const std::size_t servers = conf->upstream->servers.size();
  s->tries_left = conf->proxy_next_upstream_tries == 0
                      ? static_cast<unsigned>(servers)
                      : std::min<unsigned>(conf->proxy_next_upstream_tries,
                                           static_cast<unsigned>(servers));
  c.data = s;
  // Until the upstream answers, client events only matter as timeouts/close.
  c.read->handler = proxy_handler;
  c.write->handler = proxy_handler;
  connect_upstream(*s);
}

}  // namespace vigil::stream
