#pragma once
// The "stream { }" block (nginx's ngx_stream_core_module, ngx_stream_proxy_module
// and ngx_stream_upstream_module, the part a TCP proxy needs):
//
//   stream {
//       upstream backend { server 127.0.0.1:9001; server 127.0.0.1:9002; }
//       server {
//           listen 127.0.0.1:9000 [reuseport] [deferred] [backlog=N];
//           proxy_pass backend;               # or an address
//           proxy_connect_timeout 60s;  proxy_timeout 10m;  proxy_buffer_size 16k;
//           proxy_next_upstream on;     proxy_next_upstream_tries 0;
//       }
//   }

#include <sys/socket.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "core/conf/loader.h"
#include "core/conf/module.h"
#include "event/listen_conf.h"
#include "vigil/core/clock.h"

namespace vigil {
// The stream block's contexts (core knows only the main context).
inline constexpr ConfContextMask kStreamMainConf = 1u << 8;
inline constexpr ConfContextMask kStreamSrvConf = 1u << 9;
inline constexpr ConfContextMask kStreamUpsConf = 1u << 10;
}  // namespace vigil

namespace vigil::stream {

struct PeerAddress {
  sockaddr_storage addr{};
  socklen_t addrlen = 0;
  std::string name;  // "127.0.0.1:9001"
};

// A group of servers tried in turn (round robin; the next one on failure).
struct Upstream {
  std::string name;
  std::vector<PeerAddress> servers;
  std::size_t next = 0;  // round-robin position, per worker process
};

using StreamListen = ListenArgs;  // event/listen_conf.h: the same listen syntax as http

struct StreamSrvConf {
  std::vector<StreamListen> listens;
  std::string proxy_pass;  // as written
  Msec proxy_connect_timeout = 60000;
  Msec proxy_timeout = 600000;
  std::size_t proxy_buffer_size = 16384;
  bool proxy_next_upstream = true;
  unsigned proxy_next_upstream_tries = 0;  // 0: as many as the group has servers
  Upstream* upstream = nullptr;            // resolved once the block is read
  std::string where;
};

struct StreamUpsConf {
  std::vector<PeerAddress> servers;
};

// Built when the stream block closes: every server, every upstream group.
struct StreamFinalConf {
  std::vector<StreamSrvConf*> servers;
  std::vector<std::unique_ptr<Upstream>> upstreams;  // named groups and proxy_pass addresses
};

const Module& stream_module();
// Null when the configuration has no stream block.
const StreamFinalConf* stream_final(const Configuration& conf);

}  // namespace vigil::stream
