#include "stream/protocol.h"

#include <cstring>

#include "stream/proxy.h"
#include "stream/stream_conf.h"

namespace vigil::stream {

Status create_listeners(const Configuration& conf, std::vector<std::unique_ptr<Listening>>& out) {
  const StreamFinalConf* fin = stream_final(conf);
  if (fin == nullptr) return Status::ok();
  for (StreamSrvConf* srv : fin->servers) {
    for (const StreamListen& l : srv->listens) {
      auto ls = std::make_unique<Listening>();
      std::memcpy(&ls->addr, &l.addr, sizeof l.addr);
      ls->addrlen = l.addrlen;
      ls->addr_text = l.addr_text;
      apply_listen_options(l, *ls);
      ls->tcp_nodelay = srv->tcp_nodelay;  // a proxy forwards small writes as they come
      // TLS is a property of the address: a server may listen with and without it.
      ls->handler = l.ssl ? init_tls_connection : init_connection;
      ls->proxy_protocol_timeout = srv->proxy_protocol_timeout;
      ls->proxy_protocol_failed = end_proxy_protocol_failure;
      ls->servers = srv;
      out.push_back(std::move(ls));
    }
  }
  return Status::ok();
}

}  // namespace vigil::stream
