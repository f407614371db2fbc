// Accepting connections (seed 001, 4.1 ngx_event_accept; seed 002, 9.8.1).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "core/fault.h"
#include "event/proxy_protocol.h"
#include "vigil/core/counters.h"
#include "vigil/core/log.h"
#include "vigil/event/connection.h"
#include "vigil/event/listening.h"
#include "vigil/event/loop.h"

namespace vigil {

namespace {

// The peer's address as text ("127.0.0.1", "::1"), stored in the arena.
std::string_view address_text(Arena& arena, const sockaddr* sa) {
  char text[INET6_ADDRSTRLEN] = "";
  const char* ok = nullptr;
  if (sa->sa_family == AF_INET) {
    ok = inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, text, sizeof text);
  } else if (sa->sa_family == AF_INET6) {
    ok = inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, text,
                   sizeof text);
  } else if (sa->sa_family == AF_UNIX) {
    return "unix:";
  }
  if (ok == nullptr) return {};
  std::size_t n = std::strlen(text);
  return {arena.dup(text, n), n};
}

// accept(2) ran out of descriptors: stop listening for accept_mutex_delay
// instead of spinning on a listening socket that stays readable.
void back_off_accept(EventLoop& loop, Event& ev) {
  if (Status s = loop.disable_accept_events(); !s) {
    VIGIL_LOG(loop.log(), kAlert, s.err(), "%s", s.message().c_str());
    return;
  }
  if (loop.accept_mutex() != nullptr) {
    // Let another worker, which may have descriptors left, take over; the
    // next successful trylock listens again. A timer here would re-register
    // the sockets without the lock (nginx arms none either).
    loop.accept_disabled = 1;
    return;
  }
  loop.add_timer(ev, loop.config().accept_mutex_delay);
}

// With EPOLLEXCLUSIVE Linux wakes the first epoll instance on the socket's
// wait queue that is asleep, so the worker that registered first gets nearly
// every connection. Every 16 accept rounds (or whenever it is loaded, as
// accept_disabled says) a worker deletes and re-adds its registration, which
// moves it to the back of the queue (nginx's ngx_reorder_accept_events).
// The header of a "listen ... proxy_protocol" connection was read (or not).
void proxy_protocol_done(Connection& c, bool ok) {
  if (!ok) {
    if (c.listening->proxy_protocol_failed != nullptr) return c.listening->proxy_protocol_failed(c);
    close_connection(c);
    return;
  }
  c.listening->handler(c);
}

void reorder_accept_event(EventLoop& loop, Connection& lc, Event& ev) {
  if (!(loop.accept_flags() & kEvExclusive) || lc.listening->reuseport || !ev.active) return;
  if (lc.requests++ % 16 != 0 && loop.accept_disabled <= 0) return;
  Status s = loop.backend().del(ev, kEvLevel);
  if (s) s = loop.backend().add(ev, loop.accept_flags());
  if (!s) VIGIL_LOG(loop.log(), kAlert, s.err(), "%s", s.message().c_str());
}

// Accepts one connection, or with multi_accept all that are queued; returns
// how many.
std::size_t accept_connections(Event& ev);

}  // namespace

void event_accept(Event& ev) {
  auto* lc = ev.owner<Connection>();
  if (accept_connections(ev) > 0 && lc->fd != -1) reorder_accept_event(*lc->loop, *lc, ev);
}

namespace {

std::size_t accept_connections(Event& ev) {
  auto* lc = ev.owner<Connection>();
  Listening* ls = lc->listening;
  EventLoop& loop = *lc->loop;
  Log& log = ls->log ? *ls->log : loop.log();

  if (ev.timedout) {
    // The back-off after EMFILE/ENFILE is over: listen again.
    ev.timedout = 0;
    if (Status s = loop.enable_accept_events(); !s) {
      VIGIL_LOG(log, kAlert, s.err(), "%s", s.message().c_str());
      return 0;
    }
  }

  ev.available = loop.config().multi_accept ? 1 : 0;
  ev.ready = 0;
  ConnectionPool& pool = loop.pool();
  std::size_t accepted = 0;

  do {
    sockaddr_storage sa;
    socklen_t len = sizeof sa;
    int s = VIGIL_FAULT(fault::kAccept, ECONNABORTED,
                        loop.backend().accept(*lc, reinterpret_cast<sockaddr*>(&sa), &len));
    if (s == -1) {
      int err = errno;
      if (err == EAGAIN || err == EWOULDBLOCK) return accepted;
      if (err == ECONNABORTED || err == EINTR) {
        // The client gave up before we took it; the next one may be waiting.
        VIGIL_LOG(log, kInfo, err, "accept4() on %s failed", ls->addr_text.c_str());
        continue;
      }
      VIGIL_LOG(log, kCrit, err, "accept4() on %s failed", ls->addr_text.c_str());
      if (err == EMFILE || err == ENFILE) back_off_accept(loop, ev);
      return accepted;
    }

    ++accepted;
    ++loop.stats().accepted;
    SharedCounters* counters = shared_counters();
    counters->accepted.add();
    // Seed 002, 9.8.3: positive once fewer than 1/8 of the slots are free.
    loop.accept_disabled =
        static_cast<std::int64_t>(pool.size() / 8) - static_cast<std::int64_t>(pool.free_count());

    Connection* c = pool.get(s, log);
    if (c == nullptr) {
      if (::close(s) == -1) VIGIL_LOG(log, kAlert, errno, "close() socket %d failed", s);
      return accepted;
    }
    counters->handled.add();
    counters->active.add();
    // From here the connection is an accepted one: close_connection takes
    // it out of the active count on every path, the failures below included.
    c->listening = ls;
    // The first block of the connection's arena is what an idle connection
    // costs: the protocol says how much it needs (nginx's pool_size).
    c->arena->reset(ls->pool_size);
    c->peer_addr = reinterpret_cast<sockaddr*>(c->arena->dup(&sa, len));
    if (c->peer_addr == nullptr) {
      VIGIL_LOG(log, kAlert, 0, "out of memory for an accepted connection on %s",
                ls->addr_text.c_str());
      pool.close_connection(*c);
      continue;
    }
    c->peer_addrlen = len;
    c->addr_text = address_text(*c->arena, c->peer_addr);  // "" when out of memory
    // A PROXY protocol header is read with readiness I/O: a ring receive
    // would take the bytes after it too (event/proxy_protocol.h).
    if (ls->proxy_protocol) {
      loop.backend().Backend::init_io(*c);
    } else {
      loop.backend().init_io(*c);
    }
    c->local_addr = reinterpret_cast<const sockaddr*>(&ls->addr);
    c->local_addrlen = ls->addrlen;

    if (sa.ss_family == AF_UNIX) {
      // No TCP options on a unix-domain socket (nginx's "disabled" state):
      // keep-alive and tcp_nopush leave it alone.
      c->tcp_nodelay = 2;
      c->tcp_nopush = 2;
    } else if (ls->tcp_nodelay) {
      int one = 1;
      if (::setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == -1) {
        VIGIL_LOG(log, kAlert, errno, "setsockopt(TCP_NODELAY) failed");
        pool.close_connection(*c);
        continue;
      }
      c->tcp_nodelay = 1;
    }
    if (ls->keepalive) {
      int one = 1;
      if (::setsockopt(s, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one) == -1) {
        VIGIL_LOG(log, kAlert, errno, "setsockopt(SO_KEEPALIVE) failed");
        pool.close_connection(*c);
        continue;
      }
    }

    // A fresh socket can be written at once; with TCP_DEFER_ACCEPT data is
    // already waiting, so the protocol may read before any event arrives.
    c->write->ready = 1;
    if (ev.deferred_accept) {
      c->read->ready = 1;
      c->read->available = -1;
    }
    if (ls->proxy_protocol) {
      // The PROXY protocol header first; the protocol's handler once it is read.
      if (Status st = proxy_protocol_read(*c, ls->proxy_protocol_timeout, proxy_protocol_done);
          !st) {
        VIGIL_LOG(log, kAlert, 0, "%s", st.message().c_str());
        pool.close_connection(*c);
      }
      continue;
    }
    ls->handler(*c);
  } while (ev.available);
  return accepted;
}

}  // namespace
}  // namespace vigil
