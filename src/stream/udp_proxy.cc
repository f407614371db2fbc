#include "stream/udp_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>

#include "event/udp.h"
#include "stream/proxy.h"
#include "stream/session.h"
#include "stream/stream_conf.h"
#include "upstream/peer_connected.h"
#include "vigil/core/log.h"
#include "vigil/event/loop.h"
#include "vigil/event/peer.h"

namespace vigil::stream {

namespace {

// The server's socket: one datagram per call; 0 is an empty datagram, not
// an end. kIoError keeps errno (an ICMP error: ECONNREFUSED).
long peer_recv(Connection& u, char* buf, std::size_t size) {
  for (;;) {
    const ssize_t n = ::recv(u.fd, buf, size, 0);
    if (n >= 0) return static_cast<long>(n);
    if (errno == EINTR) continue;
    u.read->ready = 0;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return kIoAgain;
    u.read->error = 1;
    return kIoError;
  }
}

long peer_send(Connection& u, const char* buf, std::size_t size) {
  for (;;) {
    const ssize_t n = ::send(u.fd, buf, size, 0);
    if (n >= 0) {
      u.sent += n;
      return static_cast<long>(n);
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return kIoAgain;
    u.write->error = 1;
    return kIoError;
  }
}

// Whether the replies expected for the client's datagrams so far came back.
bool answered(const Session& s) {
  const unsigned per = s.conf->proxy_responses;
  return per == kNoResponseLimit || s.responses >= static_cast<std::uint64_t>(per) * s.requests;
}

// nginx's ngx_stream_proxy_test_finalize for datagrams: true when it ended
// the session.
bool test_finalize(Session& s) {
  const StreamSrvConf& conf = *s.conf;
  if (conf.proxy_requests != 0) {
    if (s.requests < conf.proxy_requests) return false;
    udp_detach(*s.client);  // the client's next datagram is another session's
  }
  if (conf.proxy_responses == kNoResponseLimit || !answered(s) || s.upstream == nullptr) {
    return false;
  }
  finalize(s, "udp done");
  return true;
}

// May `moved` bytes so far allow another datagram under `rate`? nginx's
// rule: rate * (whole seconds since the start + 1) bytes; when spent, the
// read event waits until the next one is due.
bool rate_allows(Session& s, Event& rev, std::size_t rate, std::uint64_t moved) {
  if (rate == 0) return true;
  MsecDiff elapsed = msec_diff(clock::current_msec(), s.start_msec);
  if (elapsed < 0) elapsed = 0;
  const auto limit =
      static_cast<std::int64_t>(rate) * (elapsed / 1000 + 1) - static_cast<std::int64_t>(moved);
  if (limit > 0) return true;
  rev.delayed = 1;
  s.client->loop->add_timer(rev,
                            static_cast<Msec>(-limit * 1000 / static_cast<std::int64_t>(rate) + 1));
  return false;
}

// After a datagram of n bytes: the time it takes at `rate`.
void rate_delay(Session& s, Event& rev, std::size_t rate, long n) {
  if (rate == 0) return;
  const auto delay = static_cast<Msec>(n * 1000 / static_cast<long>(rate));
  if (delay == 0) return;
  rev.delayed = 1;
  s.client->loop->add_timer(rev, delay);
}

// The client's datagram at hand (at most one: event/udp.h) to the server.
// False when the session ended.
bool from_client(Session& s) {
  Connection& c = *s.client;
  Connection& u = *s.upstream;
  while (c.read->ready && !c.read->delayed) {
    if (!rate_allows(s, *c.read, s.upload_rate, s.from_client)) break;
    const long n = c.recv(c, s.up.start, static_cast<std::size_t>(s.up.end - s.up.start));
    if (n < 0) break;  // none (kIoAgain)
    ++s.requests;
    s.from_client += static_cast<std::uint64_t>(n);
    rate_delay(s, *c.read, s.upload_rate, n);
    const long sent = peer_send(u, s.up.start, static_cast<std::size_t>(n));
    if (sent == kIoAgain) {
      VIGIL_LOG(*c.log, kInfo, 0, "*%llu the upstream socket is full, datagram dropped",
                static_cast<unsigned long long>(c.number));
    } else if (sent < 0) {
      // As nginx: the send error ends the session; the server counts as failed.
      VIGIL_LOG(*c.log, kError, errno, "*%llu send() failed while proxying to upstream %s",
                static_cast<unsigned long long>(c.number), s.peer.name.c_str());
      s.upstream_failed = true;
      finalize(s, "upstream error");
      return false;
    }
  }
  return true;
}

// The server's datagrams to the client. False when the session ended.
bool from_upstream(Session& s) {
  Connection& c = *s.client;
  Connection& u = *s.upstream;
  while (!u.read->delayed && !s.upstream_failed) {
    if (!rate_allows(s, *u.read, s.download_rate, s.from_upstream)) break;
    const long n = peer_recv(u, s.down.start, static_cast<std::size_t>(s.down.end - s.down.start));
    if (n == kIoAgain) break;
    ++s.responses;  // an error too: nginx counts it as the server's answer
    if (n < 0) {
      VIGIL_LOG(*c.log, kError, errno,
                "*%llu recv() failed while proxying and reading from upstream %s, client: %.*s",
                static_cast<unsigned long long>(c.number), s.peer.name.c_str(),
                static_cast<int>(c.addr_text.size()), c.addr_text.data());
      s.upstream_failed = true;
      break;
    }
    s.from_upstream += static_cast<std::uint64_t>(n);
    if (UpstreamTry* t = s.current_try(); t != nullptr && t->first_byte_time == kNoTime) {
      t->first_byte_time =
          static_cast<Msec>(std::max<MsecDiff>(0, msec_diff(clock::current_msec(), t->start)));
    }
    rate_delay(s, *u.read, s.download_rate, n);
    const long sent = c.send(c, s.down.start, static_cast<std::size_t>(n));
    if (sent == kIoAgain) {
      VIGIL_LOG(*c.log, kInfo, 0, "*%llu the client's socket is full, datagram dropped",
                static_cast<unsigned long long>(c.number));
    } else if (sent < 0) {
      finalize(s, "client error");
      return false;
    }
  }
  return true;
}

void process(Session& s) {
  // As nginx, the end is checked after each direction: with
  // proxy_responses 0 the session ends before a reply could be read.
  if (!from_client(s) || test_finalize(s) || !from_upstream(s) || test_finalize(s)) return;
  Connection& c = *s.client;
  Connection& u = *s.upstream;
  EventLoop& loop = *c.loop;
  // The server's socket stays registered unless it failed; a level-triggered
  // backend leaves it while its rate makes it wait.
  const Status st = loop.handle_read_event(*u.read, s.upstream_failed ? kEvClose : 0);
  if (!st) {
    VIGIL_LOG(*c.log, kAlert, st.err(), "%s", st.message().c_str());
    return finalize_with(s, 500, "event registration failed");
  }
  // proxy_timeout: on the client's write event, which a shared socket never
  // uses otherwise; stopped while a rate makes either side wait (nginx's).
  if (!c.read->delayed && !u.read->delayed) {
    loop.add_timer(*c.write, s.conf->proxy_timeout);
  } else {
    loop.del_timer(*c.write);
  }
}

void udp_handler(Event& ev) {
  Connection* owner = ev.owner<Connection>();
  Session& s = *static_cast<Session*>(owner->data);
  Connection& c = *s.client;
  if (c.close || owner->close) return finalize(s, "disconnected on shutdown");
  if (ev.timedout) {
    ev.timedout = 0;
    if (!ev.delayed) {  // proxy_timeout
      if (answered(s)) return finalize(s, "udp timed out");
      VIGIL_LOG(*c.log, kError, ETIMEDOUT, "*%llu upstream timed out, client: %.*s",
                static_cast<unsigned long long>(c.number), static_cast<int>(c.addr_text.size()),
                c.addr_text.data());
      s.upstream_failed = true;
      return finalize_with(s, 502, "upstream timed out");
    }
    ev.delayed = 0;  // the rate's wait is over
  } else if (ev.delayed) {
    // A client datagram now is dropped; the server's waits in its socket
    // (a level-triggered backend stops reporting it meanwhile).
    if (&ev == s.upstream->read) {
      if (Status st = c.loop->handle_read_event(ev, 0); !st) {
        VIGIL_LOG(*c.log, kAlert, st.err(), "%s", st.message().c_str());
        finalize_with(s, 500, "event registration failed");
      }
    }
    return;
  }
  process(s);
}

// A UDP socket connected to the server the balancer picked (nginx's
// ngx_event_connect_peer for SOCK_DGRAM). kPeerOk, kPeerDeclined (try the
// next) or kPeerError.
int connect_peer(Session& s) {
  EventLoop& loop = *s.client->loop;
  PeerConnection& pc = s.peer;
  Log& log = *s.client->log;
  const int fd = ::socket(pc.addr.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd == -1) {
    VIGIL_LOG(log, kAlert, errno, "socket() failed");
    return kPeerError;
  }
  Connection* u = loop.pool().get(fd, log);
  if (u == nullptr) {
    (void)::close(fd);
    return kPeerError;
  }
  auto fail = [&](int rc) {
    loop.pool().close_connection(*u);
    return rc;
  };
  const StreamSrvConf& conf = *s.conf;
  if (conf.bind_len != 0) {  // proxy_bind
    const int one = 1;
    if (conf.bind_transparent &&
        ::setsockopt(fd, conf.bind_addr.ss_family == AF_INET6 ? IPPROTO_IPV6 : IPPROTO_IP,
                     conf.bind_addr.ss_family == AF_INET6 ? IPV6_TRANSPARENT : IP_TRANSPARENT, &one,
                     sizeof one) == -1) {
      VIGIL_LOG(log, kAlert, errno, "setsockopt(IP_TRANSPARENT) failed");
      return fail(kPeerError);
    }
    if (::bind(fd, reinterpret_cast<const sockaddr*>(&conf.bind_addr), conf.bind_len) == -1) {
      VIGIL_LOG(log, kCrit, errno, "bind() for the upstream %s failed", pc.name.c_str());
      return fail(kPeerError);
    }
  }
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&pc.addr), pc.addrlen) == -1) {
    VIGIL_LOG(log, kError, errno, "connect() to %s failed", pc.name.c_str());
    return fail(kPeerDeclined);
  }
  u->peer_addr = reinterpret_cast<sockaddr*>(u->arena->dup(&pc.addr, pc.addrlen));
  if (u->peer_addr == nullptr) return fail(kPeerError);
  u->peer_addrlen = pc.addrlen;
  u->addr_text = pc.name;
  u->recv = peer_recv;
  u->send = peer_send;
  u->write->ready = 1;
  const Status st = (loop.capabilities() & kCapClear) ? loop.backend().add_conn(*u)
                                                      : loop.backend().add(*u->read, kEvLevel);
  if (!st) {
    VIGIL_LOG(log, kAlert, st.err(), "%s", st.message().c_str());
    return fail(kPeerError);
  }
  pc.connection = u;
  return kPeerOk;
}

void start(Session& s) {
  s.connected = true;
  s.start_msec = clock::current_msec();
  s.upload_rate = session_rate(s, s.conf->proxy_upload_rate, s.conf->proxy_upload_rate_var.get());
  s.download_rate =
      session_rate(s, s.conf->proxy_download_rate, s.conf->proxy_download_rate_var.get());
  upstream::peer_connected(s.balancer);
  if (UpstreamTry* t = s.current_try()) {
    t->connect_time = static_cast<Msec>(std::max<MsecDiff>(0, msec_diff(s.start_msec, t->start)));
  }
  Connection& c = *s.client;
  Connection& u = *s.upstream;
  u.data = &s;
  u.read->handler = udp_handler;
  u.write->handler = udp_handler;
  c.read->handler = udp_handler;
  c.write->handler = udp_handler;
  VIGIL_LOG(*c.log, kDebug, 0, "stream: udp to %s", s.peer.name.c_str());
  process(s);
}

}  // namespace

void udp_connect_upstream(Session& s) {
  Connection& c = *s.client;
  for (;;) {
    s.peer.log = c.log;
    const int got = s.peer.get != nullptr ? s.peer.get(s.peer, s.peer.data) : kPeerOk;
    if (got != kPeerOk) {
      VIGIL_LOG(*c.log, kError, 0,
                "no live upstreams while connecting to upstream \"%s\", client: %.*s",
                s.group->name.c_str(), static_cast<int>(c.addr_text.size()), c.addr_text.data());
      begin_try(s, s.group->name);
      break;
    }
    begin_try(s, s.peer.name);
    const int rc = connect_peer(s);
    if (rc == kPeerOk) {
      s.upstream = s.peer.connection;
      return start(s);
    }
    end_try(s);
    if (rc == kPeerError) {  // a local failure: don't hammer the others
      s.peer.free(s.peer, s.peer.data, kPeerNext);
      break;
    }
    s.peer.free(s.peer, s.peer.data, kPeerFailed);
    if (!s.conf->proxy_next_upstream || s.peer.tries == 0) break;
  }
  finalize_with(s, 502, "no live upstreams");
}

void udp_return(Session& s, std::string_view text) {
  Connection& c = *s.client;
  // The datagram that started the session counts as the client's.
  if (const Buf* b = c.buffer; b != nullptr && b->pos != nullptr) {
    ++s.requests;
    s.from_client += static_cast<std::uint64_t>(b->last - b->pos);
  }
  const long n = c.send(c, text.data(), text.size());
  if (n >= 0) ++s.responses;
  finalize(s, n >= 0 ? "udp done" : "udp send failed");
}

}  // namespace vigil::stream
