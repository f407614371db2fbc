// Datagram listeners and their sessions (nginx's ngx_event_udp.c: one
// connection per sender address, the sender's later datagrams routed to it).
#include "event/udp.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <unordered_map>
#include <vector>

#include "vigil/core/counters.h"
#include "vigil/core/log.h"
#include "vigil/event/listening.h"
#include "vigil/event/loop.h"

namespace vigil {

namespace {

// The most datagrams one read event takes off a listener: the listener is
// level-triggered, so the rest are reported again after the other events ran.
constexpr int kMaxDatagramsPerEvent = 64;

// The largest UDP payload; the sessions copy what they keep.
thread_local char g_datagram[65535];

// A sender: family, port and address bytes (the rest of a sockaddr is not
// part of who sent it).
struct UdpKey {
  sa_family_t family = 0;
  in_port_t port = 0;
  unsigned char addr[16] = {};
  bool operator==(const UdpKey&) const = default;
};

struct UdpKeyHash {
  std::size_t operator()(const UdpKey& k) const noexcept {
    // FNV-1a over the port and the address.
    std::uint64_t h = 1469598103934665603ull ^ k.family;
    auto mix = [&h](unsigned char b) {
      h ^= b;
      h *= 1099511628211ull;
    };
    mix(static_cast<unsigned char>(k.port & 0xff));
    mix(static_cast<unsigned char>(k.port >> 8));
    for (unsigned char b : k.addr) mix(b);
    return static_cast<std::size_t>(h);
  }
};

// The sessions of one listening connection (kept in its `data`).
struct UdpSessions {
  std::unordered_map<UdpKey, Connection*, UdpKeyHash> by_peer;
  // Sessions taken out of by_peer that still run (udp_detach): the
  // listener's end must reach them too.
  std::vector<Connection*> detached;
};

// Every table of this thread's listeners, owned here: freed by
// udp_close_sessions, or at the thread's exit when a worker ends without
// closing its listeners.
thread_local std::vector<std::unique_ptr<UdpSessions>> g_tables;

UdpSessions* new_table() {
  try {
    g_tables.push_back(std::make_unique<UdpSessions>());
    return g_tables.back().get();
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}

void free_table(UdpSessions* table) {
  std::erase_if(g_tables,
                [table](const std::unique_ptr<UdpSessions>& t) { return t.get() == table; });
}

bool make_key(const sockaddr* sa, UdpKey& k) {
  k = UdpKey{};
  if (sa == nullptr) return false;
  if (sa->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    k.family = AF_INET;
    k.port = in->sin_port;
    std::memcpy(k.addr, &in->sin_addr, sizeof in->sin_addr);
    return true;
  }
  if (sa->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    k.family = AF_INET6;
    k.port = in6->sin6_port;
    std::memcpy(k.addr, &in6->sin6_addr, sizeof in6->sin6_addr);
    return true;
  }
  return false;
}

UdpSessions* table_of(const Connection& c) {
  const Listening* ls = c.listening;
  if (ls == nullptr || ls->connection == nullptr) return nullptr;
  return static_cast<UdpSessions*>(ls->connection->data);
}

std::string_view address_text(Arena& arena, const sockaddr* sa) {
  char text[INET6_ADDRSTRLEN] = "";
  const char* ok = nullptr;
  if (sa->sa_family == AF_INET) {
    ok = ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, text,
                     sizeof text);
  } else if (sa->sa_family == AF_INET6) {
    ok = ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, text,
                     sizeof text);
  }
  if (ok == nullptr) return {};
  const std::size_t n = std::strlen(text);
  char* p = arena.dup(text, n);
  return p == nullptr ? std::string_view() : std::string_view(p, n);
}

// The destination of a datagram on a wildcard listener (IP_PKTINFO,
// IPV6_PKTINFO), with the listener's port; AF_UNSPEC for any other.
sockaddr_storage destination(msghdr& msg, const Listening& ls) {
  sockaddr_storage out{};
  for (cmsghdr* cm = CMSG_FIRSTHDR(&msg); cm != nullptr; cm = CMSG_NXTHDR(&msg, cm)) {
    if (cm->cmsg_level == IPPROTO_IP && cm->cmsg_type == IP_PKTINFO &&
        ls.addr.ss_family == AF_INET) {
      in_pktinfo info{};
      std::memcpy(&info, CMSG_DATA(cm), sizeof info);
      auto& in = reinterpret_cast<sockaddr_in&>(out);
      in = reinterpret_cast<const sockaddr_in&>(ls.addr);
      in.sin_addr = info.ipi_addr;
      return out;
    }
    if (cm->cmsg_level == IPPROTO_IPV6 && cm->cmsg_type == IPV6_PKTINFO &&
        ls.addr.ss_family == AF_INET6) {
      in6_pktinfo info{};
      std::memcpy(&info, CMSG_DATA(cm), sizeof info);
      auto& in6 = reinterpret_cast<sockaddr_in6&>(out);
      in6 = reinterpret_cast<const sockaddr_in6&>(ls.addr);
      in6.sin6_addr = info.ipi6_addr;
      return out;
    }
  }
  return out;
}

// A datagram from a sender without a session: a connection for it, then the
// listener's handler (as an accept would).
void new_session(Connection& lc, UdpSessions& table, const UdpKey& key, const sockaddr_storage& sa,
                 socklen_t len, const sockaddr_storage& local, const char* data, std::size_t n) {
  Listening* ls = lc.listening;
  EventLoop& loop = *lc.loop;
  Log& log = ls->log ? *ls->log : loop.log();
  ConnectionPool& pool = loop.pool();
  ++loop.stats().accepted;
  SharedCounters* counters = shared_counters();
  counters->accepted.add();
  Connection* c = pool.get(lc.fd, log);
  if (c == nullptr) return;  // the pool said why; the datagram is dropped
  counters->handled.add();
  counters->active.add();
  c->shared = 1;  // the listener's fd: never closed nor registered by this connection
  c->listening = ls;
  c->arena->reset(ls->pool_size);
  c->peer_addr = reinterpret_cast<sockaddr*>(c->arena->dup(&sa, len));
  auto* b = c->arena->make<Buf>();
  char* copy = c->arena->dup(data, n);
  if (c->peer_addr == nullptr || b == nullptr || copy == nullptr) {
    VIGIL_LOG(log, kAlert, 0, "out of memory for a UDP session on %s", ls->addr_text.c_str());
    pool.close_connection(*c);
    return;
  }
  c->peer_addrlen = len;
  c->addr_text = address_text(*c->arena, c->peer_addr);
  c->local_addr = reinterpret_cast<const sockaddr*>(&ls->addr);
  c->local_addrlen = ls->addrlen;
  if (local.ss_family != AF_UNSPEC) {
    // A wildcard listener: the address the client reached, which replies
    // are sent from (udp_send) and $server_addr tells.
    void* own = c->arena->alloc(sizeof local, alignof(sockaddr_storage));
    if (own != nullptr) {
      std::memcpy(own, &local, sizeof local);
      c->local_addr = static_cast<const sockaddr*>(own);
    }
  }
  c->recv = udp_shared_recv;
  c->send = udp_send;
  b->pos = copy;
  b->last = copy + n;
  c->buffer = b;
  c->read->ready = 1;
  c->write->ready = 1;
  try {
    table.by_peer.emplace(key, c);
  } catch (const std::bad_alloc&) {
    VIGIL_LOG(log, kAlert, 0, "out of memory for a UDP session on %s", ls->addr_text.c_str());
    pool.close_connection(*c);
    return;
  }
  ls->handler(*c);
}

// A datagram for a session: its read handler takes it now or never.
void deliver(Connection& c, char* data, std::size_t n) {
  if (c.close || c.buffer == nullptr || c.read->handler == nullptr) return;
  const std::uint32_t generation = c.generation;
  c.buffer->pos = data;
  c.buffer->last = data + n;
  c.read->ready = 1;
  c.read->handler(*c.read);
  if (c.generation == generation && c.fd != -1 && c.buffer != nullptr) {
    c.buffer->pos = c.buffer->last = nullptr;  // not read: dropped
    c.read->ready = 0;
  }
}

}  // namespace

void event_recvmsg(Event& ev) {
  auto* lc = ev.owner<Connection>();
  Listening* ls = lc->listening;
  EventLoop& loop = *lc->loop;
  Log& log = ls->log ? *ls->log : loop.log();
  ev.timedout = 0;
  for (int i = 0; i < kMaxDatagramsPerEvent && lc->fd != -1; ++i) {
    sockaddr_storage sa{};
    iovec iov{g_datagram, sizeof g_datagram};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(in6_pktinfo))];
    msghdr msg{};
    msg.msg_name = &sa;
    msg.msg_namelen = sizeof sa;
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    const ssize_t n = ::recvmsg(lc->fd, &msg, 0);
    const socklen_t len = msg.msg_namelen;
    if (n < 0) {
      const int err = errno;
      if (err == EINTR) continue;
      if (err != EAGAIN && err != EWOULDBLOCK) {
        VIGIL_LOG(log, kAlert, err, "recvmsg() on %s failed", ls->addr_text.c_str());
      }
      break;
    }
    UdpKey key;
    if (!make_key(reinterpret_cast<const sockaddr*>(&sa), key)) continue;
    auto* table = static_cast<UdpSessions*>(lc->data);
    if (table == nullptr) {
      table = new_table();
      if (table == nullptr) {
        VIGIL_LOG(log, kAlert, 0, "out of memory for the UDP sessions of %s",
                  ls->addr_text.c_str());
        break;
      }
      lc->data = table;
    }
    const auto size = static_cast<std::size_t>(n);
    if (auto it = table->by_peer.find(key); it != table->by_peer.end()) {
      deliver(*it->second, g_datagram, size);
    } else {
      new_session(*lc, *table, key, sa, len, destination(msg, *ls), g_datagram, size);
    }
  }
}

long udp_shared_recv(Connection& c, char* buf, std::size_t size) {
  Buf* b = c.buffer;
  if (b == nullptr || b->pos == nullptr) {
    c.read->ready = 0;
    return kIoAgain;
  }
  const std::size_t n = std::min(size, static_cast<std::size_t>(b->last - b->pos));
  if (n > 0) std::memcpy(buf, b->pos, n);
  b->pos = b->last = nullptr;
  c.read->ready = 0;
  return static_cast<long>(n);
}

long udp_send(Connection& c, const char* buf, std::size_t size) {
  iovec iov{const_cast<char*>(buf), size};
  msghdr msg{};
  msg.msg_name = c.peer_addr;
  msg.msg_namelen = c.peer_addrlen;
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  // From the address the client reached when the listener is a wildcard
  // (its session has an address of its own).
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(in6_pktinfo))] = {};
  const Listening* ls = c.listening;
  if (ls != nullptr && c.local_addr != reinterpret_cast<const sockaddr*>(&ls->addr)) {
    msg.msg_control = control;
    cmsghdr* cm = reinterpret_cast<cmsghdr*>(control);
    if (c.local_addr->sa_family == AF_INET) {
      in_pktinfo info{};
      info.ipi_spec_dst = reinterpret_cast<const sockaddr_in*>(c.local_addr)->sin_addr;
      cm->cmsg_level = IPPROTO_IP;
      cm->cmsg_type = IP_PKTINFO;
      cm->cmsg_len = CMSG_LEN(sizeof info);
      std::memcpy(CMSG_DATA(cm), &info, sizeof info);
      msg.msg_controllen = CMSG_SPACE(sizeof info);
    } else {
      in6_pktinfo info{};
      info.ipi6_addr = reinterpret_cast<const sockaddr_in6*>(c.local_addr)->sin6_addr;
      cm->cmsg_level = IPPROTO_IPV6;
      cm->cmsg_type = IPV6_PKTINFO;
      cm->cmsg_len = CMSG_LEN(sizeof info);
      std::memcpy(CMSG_DATA(cm), &info, sizeof info);
      msg.msg_controllen = CMSG_SPACE(sizeof info);
    }
  }
  for (;;) {
    const ssize_t n = ::sendmsg(c.fd, &msg, 0);
    if (n >= 0) {
      c.sent += n;
      return static_cast<long>(n);
    }
    const int err = errno;
    if (err == EINTR) continue;
    if (err == EAGAIN || err == EWOULDBLOCK) return kIoAgain;
    c.error = 1;
    if (c.log != nullptr) VIGIL_LOG(*c.log, kError, err, "sendmsg() failed");
    return kIoError;
  }
}

bool is_udp_session(const Connection& c) {
  return c.shared && c.listening != nullptr && c.listening->type == SOCK_DGRAM &&
         c.listening->connection != &c;
}

namespace {

// Takes c out of the routing table; true when it was there.
bool unroute(UdpSessions& table, Connection& c) {
  UdpKey key;
  if (!make_key(c.peer_addr, key)) return false;
  auto it = table.by_peer.find(key);
  if (it == table.by_peer.end() || it->second != &c) return false;
  table.by_peer.erase(it);
  return true;
}

}  // namespace

void udp_detach(Connection& c) {
  UdpSessions* table = is_udp_session(c) ? table_of(c) : nullptr;
  if (table == nullptr || !unroute(*table, c)) return;
  try {
    table->detached.push_back(&c);
  } catch (const std::bad_alloc&) {
    // Not reachable by the listener's end: it ends by its own timeout.
  }
}

void udp_forget(Connection& c) {
  UdpSessions* table = is_udp_session(c) ? table_of(c) : nullptr;
  if (table == nullptr || unroute(*table, c)) return;
  std::erase(table->detached, &c);
}

void udp_close_sessions(Connection& lc) {
  auto* table = static_cast<UdpSessions*>(lc.data);
  if (table == nullptr) return;
  // One at a time: ending a session takes it out of the table.
  for (;;) {
    Connection* c = nullptr;
    if (!table->by_peer.empty()) {
      c = table->by_peer.begin()->second;
    } else if (!table->detached.empty()) {
      c = table->detached.back();
    } else {
      break;
    }
    const std::uint32_t generation = c->generation;
    c->close = 1;
    if (c->read->handler != nullptr) c->read->handler(*c->read);
    if (c->generation == generation && c->fd != -1) lc.loop->pool().close_connection(*c);
    // Still there (a handler that did not close it): drop it from the table.
    if (!table->by_peer.empty() && table->by_peer.begin()->second == c) {
      table->by_peer.erase(table->by_peer.begin());
    } else if (!table->detached.empty() && table->detached.back() == c) {
      table->detached.pop_back();
    }
  }
  lc.data = nullptr;
  free_table(table);
}

}  // namespace vigil
