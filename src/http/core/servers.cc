#include "http/core/servers.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstring>

namespace vigil::http {
namespace {

char lower(char ch) {
  return ch >= 'A' && ch <= 'Z' ? static_cast<char>(ch - 'A' + 'a') : ch;
}

bool iequal_to(std::string_view stored, std::string_view s) {
  if (stored.size() != s.size()) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (stored[i] != lower(s[i])) return false;
  }
  return true;
}

bool iends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && iequal_to(suffix, s.substr(s.size() - suffix.size()));
}

bool istarts_with(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && iequal_to(prefix, s.substr(0, prefix.size()));
}

bool same_address(const ListenConf& a, const ListenConf& b) {
  return a.addrlen == b.addrlen && std::memcmp(&a.addr, &b.addr, a.addrlen) == 0;
}

int port_of(const ListenConf& l) {
  if (l.addr.ss_family == AF_INET) {
    return ntohs(reinterpret_cast<const sockaddr_in*>(&l.addr)->sin_port);
  }
  if (l.addr.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&l.addr)->sin6_port);
  }
  return -1;
}

bool is_wildcard(const ListenConf& l) {
  if (l.addr.ss_family == AF_INET) {
    return reinterpret_cast<const sockaddr_in*>(&l.addr)->sin_addr.s_addr == htonl(INADDR_ANY);
  }
  if (l.addr.ss_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6*>(&l.addr)->sin6_addr;
    return std::memcmp(&a, &in6addr_any, sizeof a) == 0;
  }
  return false;
}

void add_name(HttpAddress& a, const std::string& name, HttpSrvConf* srv) {
  if (name.empty()) return;  // server_name "": requests without Host reach the default server
  if (name.size() > 2 && name[0] == '*' && name[1] == '.') {
    a.head_wildcards.push_back({name.substr(1), srv});  // "*.example.com" -> ".example.com"
  } else if (name[0] == '.') {
    a.head_wildcards.push_back({name, srv});
    a.dot_names.push_back({name.substr(1), srv});
  } else if (name.size() > 2 && name.compare(name.size() - 2, 2, ".*") == 0) {
    a.tail_wildcards.push_back({name.substr(0, name.size() - 1), srv});  // "www.x.*" -> "www.x."
  } else {
    a.exact.push_back({name, srv});
  }
}

bool longer_first(const ServerName& x, const ServerName& y) {
  return x.name.size() > y.name.size();
}

}  // namespace

const HttpSrvConf& HttpAddress::find_server(std::string_view host) const {
  if (!host.empty()) {
    // Few names per address in practice: a binary search over the sorted exact
    // names, then linear scans of the (rare) wildcards.
    auto it = std::lower_bound(exact.begin(), exact.end(), host,
                               [](const ServerName& n, std::string_view h) {
                                 const std::size_t m = std::min(n.name.size(), h.size());
                                 for (std::size_t i = 0; i < m; ++i) {
                                   const char x = n.name[i];
                                   const char y = lower(h[i]);
                                   if (x != y) return x < y;
                                 }
                                 return n.name.size() < h.size();
                               });
    if (it != exact.end() && iequal_to(it->name, host)) return *it->srv;
    for (const auto& n : dot_names) {
      if (iequal_to(n.name, host)) return *n.srv;
    }
    for (const auto& n : head_wildcards) {
      if (host.size() > n.name.size() && iends_with(host, n.name)) return *n.srv;
    }
    for (const auto& n : tail_wildcards) {
      if (host.size() > n.name.size() && istarts_with(host, n.name)) return *n.srv;
    }
  }
  return *default_server;
}

Result<std::shared_ptr<HttpServers>> HttpServers::build(std::vector<HttpSrvConf*> servers,
                                                        std::vector<HttpLocConf*> locations) {
  auto out = std::make_shared<HttpServers>();
  out->servers = std::move(servers);
  out->locations = std::move(locations);

  for (HttpSrvConf* srv : out->servers) {
    out->max_large_buffer = std::max(out->max_large_buffer, srv->large_buffers_size);
    out->max_header_buffer = std::max(out->max_header_buffer, srv->client_header_buffer_size);
    for (const ListenConf& l : srv->listens) {
      HttpAddress* addr = nullptr;
      for (auto& a : out->addresses) {
        if (same_address(a->listen, l)) addr = a.get();
      }
      if (addr == nullptr) {
        // A wildcard and a specific address on one port would need nginx's
        // dispatch by getsockname(); refuse rather than fail at bind().
        for (auto& a : out->addresses) {
          if (a->listen.addr.ss_family == l.addr.ss_family && port_of(a->listen) == port_of(l) &&
              is_wildcard(a->listen) != is_wildcard(l)) {
            return Status::error("listen \"" + l.text + "\" and \"" + a->listen.text +
                                 "\" share a port with a wildcard address, which is not "
                                 "supported" +
                                 l.where);
          }
        }
        out->addresses.push_back(std::make_unique<HttpAddress>());
        addr = out->addresses.back().get();
        addr->listen = l;
      } else {
        if (std::find(addr->servers.begin(), addr->servers.end(), srv) != addr->servers.end()) {
          return Status::error("a duplicate listen " + l.addr_text + l.where);
        }
        addr->listen.ssl = addr->listen.ssl || l.ssl;
        if (l.has_options) {
          if (addr->listen.has_options) {
            return Status::error("duplicate listen options for " + l.addr_text + l.where);
          }
          const bool def = addr->listen.default_server;
          const bool ssl = addr->listen.ssl;
          addr->listen = l;
          addr->listen.default_server = def;
          addr->listen.ssl = ssl;
        }
      }
      if (l.default_server) {
        if (addr->default_server != nullptr && addr->listen.default_server) {
          return Status::error("a duplicate default server for " + l.addr_text + l.where);
        }
        addr->default_server = srv;
        addr->listen.default_server = true;
      }
      addr->servers.push_back(srv);
    }
  }

  for (auto& a : out->addresses) {
    if (a->default_server == nullptr) a->default_server = a->servers.front();
    for (HttpSrvConf* srv : a->servers) {
      for (const std::string& name : srv->server_names) add_name(*a, name, srv);
    }
    // The first server to name a host keeps it, as nginx warns "conflicting
    // server name ... ignored" and keeps the first.
    std::stable_sort(a->exact.begin(), a->exact.end(),
                     [](const ServerName& x, const ServerName& y) { return x.name < y.name; });
    a->exact.erase(
        std::unique(a->exact.begin(), a->exact.end(),
                    [](const ServerName& x, const ServerName& y) { return x.name == y.name; }),
        a->exact.end());
    std::stable_sort(a->head_wildcards.begin(), a->head_wildcards.end(), longer_first);
    std::stable_sort(a->tail_wildcards.begin(), a->tail_wildcards.end(), longer_first);
  }

  // One open file per path, whatever the formats written to it.
  for (HttpLocConf* loc : out->locations) {
    for (const auto& log : loc->access_logs) {
      log->index = -1;
      for (std::size_t i = 0; i < out->access_logs.size(); ++i) {
        if (out->access_logs[i]->path == log->path) log->index = static_cast<int>(i);
      }
      if (log->index < 0) {
        log->index = static_cast<int>(out->access_logs.size());
        out->access_logs.push_back(log.get());
      }
    }
  }
  return out;
}

namespace {

const HttpLocConf* find_in(const HttpLocConf& level, std::string_view path) {
  for (const HttpLocConf* e : level.exact_locations) {
    if (e->name == path) return e;
  }
  for (const HttpLocConf* p : level.prefix_locations) {
    if (path.starts_with(p->name)) {
      const HttpLocConf* nested = find_in(*p, path);
      return nested != nullptr ? nested : p;
    }
  }
  return nullptr;
}

}  // namespace

const HttpLocConf& find_location(const HttpSrvConf& srv, std::string_view path) {
  const HttpLocConf* loc = find_in(*srv.loc, path);
  return loc != nullptr ? *loc : *srv.loc;
}

}  // namespace vigil::http
