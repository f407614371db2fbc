#include "upstream/run_time_group.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <new>
#include <string>

namespace vigil::upstream {

bool fill_run_time_group(Group& group, std::unique_ptr<PeerHealth[]>& health,
                         std::unique_ptr<PeerStats[]>& stats, const sockaddr_storage* addrs,
                         const socklen_t* lens, std::size_t n, std::string_view server) {
  health.reset(new (std::nothrow) PeerHealth[n]);
  stats.reset(new (std::nothrow) PeerStats[n]);
  if (health == nullptr || stats == nullptr) return false;
  try {
    group.name.assign(server);
    group.implicit = true;
    group.peers.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      Peer& p = group.peers[i];
      p.addr = addrs[i];
      p.addrlen = lens[i];
      char text[INET6_ADDRSTRLEN] = "";
      if (addrs[i].ss_family == AF_INET6) {
        const auto& a = reinterpret_cast<const sockaddr_in6&>(addrs[i]);
        ::inet_ntop(AF_INET6, &a.sin6_addr, text, sizeof text);
        p.name = "[" + std::string(text) + "]:" + std::to_string(ntohs(a.sin6_port));
      } else {
        const auto& a = reinterpret_cast<const sockaddr_in&>(addrs[i]);
        ::inet_ntop(AF_INET, &a.sin_addr, text, sizeof text);
        p.name = std::string(text) + ":" + std::to_string(ntohs(a.sin_port));
      }
      p.server.assign(server);
      p.index = i;
      p.health = &health[i];
      p.stats = &stats[i];
    }
  } catch (const std::bad_alloc&) {
    return false;
  }
  group.primaries = n;
  return true;
}

}  // namespace vigil::upstream
