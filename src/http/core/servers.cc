#include "http/core/servers.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstring>

#include "http/core/request.h"

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
  if (name[0] == '~') return;  // the expressions: add_regex_names
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

const HttpSrvConf& HttpAddress::find_server(std::string_view host, Request* r) const {
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
    if (!regex_names.empty()) {
      // As nginx's: the expressions see the name in lower case (their
      // groups too); they are compiled caseless as well.
      // With a request, in its memory: the groups point into the subject.
      char small[256];  // SNI names: at most 255 bytes
      char* lowered = r != nullptr               ? request_alloc(*r, host.size())
                      : host.size() <= sizeof small ? small
                                                    : nullptr;
      if (lowered == nullptr) return *default_server;
      for (std::size_t i = 0; i < host.size(); ++i) lowered[i] = lower(host[i]);
      const std::string_view name(lowered, host.size());
      for (const auto& n : regex_names) {
        // A matching error is taken as no match: the default server answers.
        const int rc = r != nullptr ? match_with_captures(*r, *n.re, name)
                                    : (n.re->re.matches(name) ? 1 : 0);
        if (rc > 0) return *n.srv;
      }
    }
  } else if (r != nullptr && empty_name != nullptr) {
    return *empty_name;  // no Host (HTTP/1.0): the server named ""
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
        addr->listen.proxy_protocol = addr->listen.proxy_protocol || l.proxy_protocol;
        addr->listen.http2 = addr->listen.http2 || l.http2;
        if (l.has_options) {
          if (addr->listen.has_options) {
            return Status::error("duplicate listen options for " + l.addr_text + l.where);
          }
          const bool def = addr->listen.default_server;
          const bool ssl = addr->listen.ssl;
          const bool proxy_protocol = addr->listen.proxy_protocol;
          const bool http2 = addr->listen.http2;
          addr->listen = l;
          addr->listen.http2 = http2;
          addr->listen.default_server = def;
          addr->listen.ssl = ssl;
          addr->listen.proxy_protocol = proxy_protocol;
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
      const bool unnamed =
          srv->server_names.empty() ||
          std::find(srv->server_names.begin(), srv->server_names.end(), "") != srv->server_names.end();
      if (unnamed && a->empty_name == nullptr) a->empty_name = srv;
      for (const std::string& name : srv->server_names) add_name(*a, name, srv);
      for (const auto& re : srv->server_regexes) a->regex_names.push_back({re.get(), srv});
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
      if (log->path_var != nullptr) continue;  // opened per line
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

bool names_with_slash(const HttpLocConf& loc, std::string_view path) {
  return loc.name.size() == path.size() + 1 && loc.name.back() == '/' &&
         std::string_view(loc.name).starts_with(path);
}

// The location of `level` named path + "/" whose handler asks for
// auto_redirect, or null. With an exact and a prefix location of that name,
// the exact one is the redirect's (nginx's tree node keeps both).
const HttpLocConf* slashed_in(const HttpLocConf& level, std::string_view path) {
  const HttpLocConf* exact = nullptr;
  const HttpLocConf* prefix = nullptr;
  for (const HttpLocConf* e : level.exact_locations) {
    if (names_with_slash(*e, path)) exact = e;
  }
  for (const HttpLocConf* p : level.prefix_locations) {
    if (names_with_slash(*p, path)) prefix = p;
  }
  const auto asks = [](const HttpLocConf* l) {
    return l != nullptr && l->content != nullptr && l->content->auto_redirect;
  };
  if (!asks(exact) && !asks(prefix)) return nullptr;
  return exact != nullptr ? exact : prefix;
}

struct Found {
  const HttpLocConf* loc = nullptr;
  bool final = false;  // an exact name, an expression, or the redirect: no more searching
  bool error = false;  // matching an expression failed (500)
};

// nginx's ngx_http_core_find_location at one level: an exact name wins; else
// the longest prefix, searched again among its nested locations; then,
// unless the prefix found says "^~", the level's expressions in order, the
// first that matches (and its nested locations) winning. `redirect` null:
// no auto_redirect (find_location); `r` null: no captures are kept.
Found find_in(const HttpLocConf& level, std::string_view path, bool* redirect, Request* r) {
  for (const HttpLocConf* e : level.exact_locations) {
    if (e->name == path) return {e, true};
  }
  const HttpLocConf* prefix = nullptr;
  for (const HttpLocConf* p : level.prefix_locations) {  // longest first
    if (path.starts_with(p->name)) {
      prefix = p;
      break;
    }
  }
  // A prefix of the very name wins over the redirect; a shorter one not.
  if (redirect != nullptr && (prefix == nullptr || prefix->name.size() != path.size())) {
    if (const HttpLocConf* slashed = slashed_in(level, path); slashed != nullptr) {
      *redirect = true;
      return {slashed, true};
    }
  }
  Found found{prefix, false};
  if (prefix != nullptr) {
    const Found nested = find_in(*prefix, path, redirect, r);
    if (nested.final || nested.error) return nested;
    if (nested.loc != nullptr) found.loc = nested.loc;
  }
  if (found.loc != nullptr && found.loc->noregex) return found;
  for (const HttpLocConf* x : level.regex_locations) {
    const int rc = r != nullptr ? match_with_captures(*r, *x->regex, path)
                                : (x->regex->re.matches(path) ? 1 : 0);
    if (rc < 0) return {nullptr, true, true};
    if (rc == 0) continue;
    const Found nested = find_in(*x, path, redirect, r);
    if (nested.error) return nested;
    return {nested.loc != nullptr ? nested.loc : x, true};
  }
  return found;
}

}  // namespace

LocationMatch match_location(Request& r, std::string_view path) {
  LocationMatch m;
  const Found f = find_in(*r.srv->loc, path, &m.redirect, &r);
  m.error = f.error;
  m.loc = conf_for_method(f.loc != nullptr ? f.loc : r.srv->loc, r.line.method);
  return m;
}

const HttpLocConf& find_location(const HttpSrvConf& srv, std::string_view path) {
  const Found f = find_in(*srv.loc, path, nullptr, nullptr);
  return f.loc != nullptr ? *f.loc : *srv.loc;
}

const HttpLocConf* find_named_location(const HttpSrvConf& srv, std::string_view name) {
  for (const HttpLocConf* loc : srv.named_locations) {
    if (loc->name == name) return loc;
  }
  return nullptr;
}

}  // namespace vigil::http
