#include "server/listeners.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cstring>
#include <string>

#include "server/modules.h"
#include "vigil/core/log.h"

namespace vigil {

namespace {

// TCP_DEFER_ACCEPT's wait when set again on a taken-over socket; the same
// value Listening::open uses.
constexpr int kDeferAcceptSeconds = 60;

bool same_address(const sockaddr_storage& a, const sockaddr_storage& b) {
  if (a.ss_family != b.ss_family) return false;
  if (a.ss_family == AF_INET) {
    const auto& x = reinterpret_cast<const sockaddr_in&>(a);
    const auto& y = reinterpret_cast<const sockaddr_in&>(b);
    return x.sin_port == y.sin_port && x.sin_addr.s_addr == y.sin_addr.s_addr;
  }
  if (a.ss_family == AF_INET6) {
    const auto& x = reinterpret_cast<const sockaddr_in6&>(a);
    const auto& y = reinterpret_cast<const sockaddr_in6&>(b);
    return x.sin6_port == y.sin6_port &&
           std::memcmp(&x.sin6_addr, &y.sin6_addr, sizeof x.sin6_addr) == 0;
  }
  if (a.ss_family == AF_UNIX) {
    const auto& x = reinterpret_cast<const sockaddr_un&>(a);
    const auto& y = reinterpret_cast<const sockaddr_un&>(b);
    return std::strncmp(x.sun_path, y.sun_path, sizeof x.sun_path) == 0;
  }
  return false;
}

in_port_t* port_of(sockaddr_storage& ss) {
  if (ss.ss_family == AF_INET) return &reinterpret_cast<sockaddr_in&>(ss).sin_port;
  if (ss.ss_family == AF_INET6) return &reinterpret_cast<sockaddr_in6&>(ss).sin6_port;
  return nullptr;
}

in_port_t port_value(const sockaddr_storage& ss) {
  if (ss.ss_family == AF_INET) return reinterpret_cast<const sockaddr_in&>(ss).sin_port;
  if (ss.ss_family == AF_INET6) return reinterpret_cast<const sockaddr_in6&>(ss).sin6_port;
  return 0;
}

// A taken-over socket keeps its queue; options the new configuration changed
// are set on it again. A failure is logged, not fatal: the socket still works.
void apply_changed_options(Listening& now, const Listening& before, Log& log) {
  if (now.type == SOCK_STREAM && now.backlog != before.backlog && ::listen(now.fd, now.backlog) == -1) {
    VIGIL_LOG(log, kAlert, errno, "listen() to %s, backlog %d failed", now.addr_text.c_str(),
              now.backlog);
  }
  auto set = [&](int level, int name, int value, const char* what) {
    if (::setsockopt(now.fd, level, name, &value, sizeof value) == -1) {
      VIGIL_LOG(log, kAlert, errno, "setsockopt(%s, %d) for %s failed", what, value,
                now.addr_text.c_str());
    }
  };
  if (now.rcvbuf != before.rcvbuf && now.rcvbuf != -1) {
    set(SOL_SOCKET, SO_RCVBUF, now.rcvbuf, "SO_RCVBUF");
  }
  if (now.sndbuf != before.sndbuf && now.sndbuf != -1) {
    set(SOL_SOCKET, SO_SNDBUF, now.sndbuf, "SO_SNDBUF");
  }
  if (now.deferred_accept != before.deferred_accept) {
    set(IPPROTO_TCP, TCP_DEFER_ACCEPT, now.deferred_accept ? kDeferAcceptSeconds : 0,
        "TCP_DEFER_ACCEPT");
  }
}

}  // namespace

bool same_listener(const Listening& a, int a_worker, const Listening& b, int b_worker) {
  // Port 0 asks the kernel for any port: a new one every time.
  if (a.addr.ss_family != AF_UNIX && port_value(a.addr) == 0) return false;
  return a_worker == b_worker && a.type == b.type && a.reuseport == b.reuseport && a.ipv6only == b.ipv6only &&
         same_address(a.addr, b.addr);
}

Result<ListenerSet> ListenerSet::create(const Configuration& conf, int workers, Log& log) {
  ListenerSet set;
  for (const ServerModule& p : server_modules()) {
    if (p.create_listeners == nullptr) continue;
    std::vector<std::unique_ptr<Listening>> out;
    if (Status s = p.create_listeners(conf, out); !s) return s;
    for (auto& ls : out) {
      if (ls->log == nullptr) ls->log = &log;
      if (!ls->reuseport) {
        set.entries_.push_back({std::move(ls), -1});
        continue;
      }
      // Clone 0 goes first: the others copy its port when it was 0.
      const Listening proto = *ls;
      set.entries_.push_back({std::move(ls), 0});
      for (int w = 1; w < workers; ++w) {
        auto clone = std::make_unique<Listening>(proto);
        clone->fd = -1;
        clone->connection = nullptr;
        set.entries_.push_back({std::move(clone), w});
      }
    }
  }
  return set;
}

ListenerSet ListenerSet::adopt(std::vector<std::unique_ptr<Listening>> sockets) {
  ListenerSet set;
  for (auto& ls : sockets) {
    int worker = -1;
    if (ls->reuseport) {
      worker = 0;
      for (const ListenerEntry& e : set.entries_) {
        if (e.worker != -1 && same_address(e.ls->addr, ls->addr)) ++worker;
      }
    }
    set.entries_.push_back({std::move(ls), worker});
  }
  return set;
}

Status ListenerSet::open(ListenerSet* previous, int tries, Log& log) {
  std::vector<ListenerEntry*> from(entries_.size(), nullptr);
  std::vector<bool> taken(previous ? previous->entries_.size() : 0, false);
  std::vector<Listening*> opened;
  auto undo = [&opened](Status s) {
    for (Listening* ls : opened) {
      ls->remove_unix_file();
      ls->close();
    }
    return s;
  };

  for (std::size_t i = 0; i < entries_.size(); ++i) {
    ListenerEntry& e = entries_[i];
    if (previous != nullptr) {
      for (std::size_t j = 0; j < previous->entries_.size() && from[i] == nullptr; ++j) {
        ListenerEntry& old = previous->entries_[j];
        if (!taken[j] && old.ls->fd != -1 && same_listener(*e.ls, e.worker, *old.ls, old.worker)) {
          taken[j] = true;
          from[i] = &old;
        }
      }
      if (from[i] != nullptr) continue;
    }
    // Clones of a listener on port 0 share the port the kernel gave clone 0.
    if (e.worker > 0 && i > 0) {
      in_port_t* port = port_of(e.ls->addr);
      const Listening& first = *entries_[i - static_cast<std::size_t>(e.worker)].ls;
      if (port != nullptr && *port == 0 && first.fd != -1) {
        *port = htons(static_cast<std::uint16_t>(first.port()));
      }
    }
    if (Status s = e.ls->open(tries); !s) return undo(std::move(s));
    opened.push_back(e.ls.get());
  }

  // Everything is open: now take the old descriptors over.
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    if (from[i] == nullptr) continue;
    Listening& now = *entries_[i].ls;
    Listening& before = *from[i]->ls;
    now.fd = before.fd;
    before.fd = -1;
    now.inherited = true;
    apply_changed_options(now, before, log);
  }
  // Where the server listens, once per address (reuseport clones share it).
  for (const ListenerEntry& e : entries_) {
    if (e.worker > 0) continue;
    VIGIL_LOG(log, kNotice, 0, "listening on %s%s", e.ls->addr_text.c_str(),
              e.ls->inherited ? " (kept across reload)" : "");
  }
  return Status::ok();
}

void ListenerSet::close_all() {
  for (ListenerEntry& e : entries_) {
    if (e.ls) e.ls->close();
  }
}

void ListenerSet::remove_unix_files() const {
  for (const ListenerEntry& e : entries_) {
    // Only a socket still held: one handed on to a new cycle was moved out.
    if (e.ls && e.ls->fd != -1) e.ls->remove_unix_file();
  }
}

void ListenerSet::close_others(int worker) {
  for (ListenerEntry& e : entries_) {
    if (e.worker != -1 && e.worker != worker) e.ls->close();
  }
}

std::vector<Listening*> ListenerSet::for_worker(int worker) const {
  std::vector<Listening*> out;
  for (const ListenerEntry& e : entries_) {
    if (e.worker == -1 || e.worker == worker) out.push_back(e.ls.get());
  }
  return out;
}

}  // namespace vigil
