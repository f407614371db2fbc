// Outgoing connections (seed 000 "主动连接", ngx_event_connect_peer).
#include "vigil/event/peer.h"

#include <sys/socket.h>
#include <unistd.h>

#include "vigil/core/log.h"
#include "vigil/event/loop.h"

namespace vigil {

namespace {

// Errors that say "this peer is not there": the caller tries the next one.
bool peer_unreachable(int err) {
  return err == ECONNREFUSED || err == ECONNRESET || err == ENETDOWN || err == ENETUNREACH ||
         err == EHOSTDOWN || err == EHOSTUNREACH || err == ETIMEDOUT;
}

}  // namespace

int event_connect_peer(EventLoop& loop, PeerConnection& pc) {
  Log& log = pc.log ? *pc.log : loop.log();
  pc.connection = nullptr;
  pc.cached = false;
  if (pc.get != nullptr) {
    int rc = pc.get(pc, pc.data);
    if (rc != kPeerOk) return rc;
  }

  int s = ::socket(pc.addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (s == -1) {
    VIGIL_LOG(log, kAlert, errno, "socket() failed");
    return kPeerError;
  }
  Connection* c = loop.pool().get(s, log);
  if (c == nullptr) {
    ::close(s);
    return kPeerError;
  }
  if (pc.rcvbuf > 0 &&
      ::setsockopt(s, SOL_SOCKET, SO_RCVBUF, &pc.rcvbuf, sizeof pc.rcvbuf) == -1) {
    VIGIL_LOG(log, kAlert, errno, "setsockopt(SO_RCVBUF) failed");
    loop.pool().close_connection(*c);
    return kPeerError;
  }
  c->recv = unix_recv;
  c->send = unix_send;
  c->recv_chain = readv_chain;
  c->send_chain = writev_chain;
  c->peer_addr = reinterpret_cast<sockaddr*>(c->arena->dup(&pc.addr, pc.addrlen));
  if (c->peer_addr == nullptr) {
    VIGIL_LOG(log, kAlert, 0, "out of memory connecting to %s", pc.name.c_str());
    loop.pool().close_connection(*c);
    return kPeerError;
  }
  c->peer_addrlen = pc.addrlen;
  c->addr_text = pc.name;

  bool edge = loop.capabilities() & kCapClear;
  if (edge) {
    // Both directions once, edge-triggered: the connect completes as a write event.
    if (Status st = loop.backend().add_conn(*c); !st) {
      VIGIL_LOG(log, kAlert, st.err(), "%s", st.message().c_str());
      loop.pool().close_connection(*c);
      return kPeerError;
    }
  }

  int rc = ::connect(s, reinterpret_cast<const sockaddr*>(&pc.addr), pc.addrlen);
  if (rc == -1) {
    int err = errno;
    if (err != EINPROGRESS) {
      // As nginx: any failed connect() declines this peer (the next one is
      // tried); only the level says whether it was expected.
      if (peer_unreachable(err)) {
        VIGIL_LOG(log, kError, err, "connect() to %s failed", pc.name.c_str());
      } else {
        VIGIL_LOG(log, kCrit, err, "connect() to %s failed", pc.name.c_str());
      }
      loop.pool().close_connection(*c);
      return kPeerDeclined;
    }
  }
  pc.connection = c;

  if (!edge) {
    Status st = loop.backend().add(*c->read, kEvLevel);
    if (st && rc == -1) st = loop.backend().add(*c->write, kEvLevel);
    if (!st) {
      VIGIL_LOG(log, kAlert, st.err(), "%s", st.message().c_str());
      loop.pool().close_connection(*c);
      pc.connection = nullptr;
      return kPeerError;
    }
  }
  if (rc == -1) return kPeerAgain;  // EINPROGRESS
  c->write->ready = 1;
  return kPeerOk;
}

int peer_connect_result(Connection& c) {
  // kqueue reported the error with EV_EOF (nginx's kq_errno); libkqueue read
  // SO_ERROR to do so, which left nothing there.
  if (c.write->kq_errno != 0) return c.write->kq_errno;
  if (c.read->kq_errno != 0) return c.read->kq_errno;
  int err = 0;
  socklen_t len = sizeof err;
  if (::getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len) == -1) return errno;
  return err;
}

}  // namespace vigil
