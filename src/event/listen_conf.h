#pragma once
// The "listen" directive's arguments, shared by every protocol module
// (http, stream): an address and the socket options nginx accepts after it.
//   listen address:port[-port] | unix:path [ssl] [reuseport] [deferred] [bind] [backlog=N]
//          [rcvbuf=size] [sndbuf=size] [ipv6only=on|off] [so_keepalive=on|off]
//          [proxy_protocol] [default_server] [udp];

#include <sys/socket.h>

#include <string>
#include <vector>

#include "core/conf/module.h"

namespace vigil {

struct ListenArgs {
  std::string text;  // as written, for messages
  sockaddr_storage addr{};
  socklen_t addrlen = 0;
  std::string addr_text;  // normalised "127.0.0.1:8080"
  bool default_server = false;
  bool ssl = false;  // "ssl": TLS on every connection of the address
  // "proxy_protocol": a PROXY protocol header before anything else (an
  // address property, as "ssl").
  bool proxy_protocol = false;
  // "http2" (HTTP only): HTTP/2 on the address, by ALPN with "ssl", else
  // with prior knowledge (an address property, as "ssl").
  bool http2 = false;  // layer-names-ok: a listen flag
  // "udp" (stream only): a datagram socket; `backlog`/`deferred` set,
  // for the protocol's own checks.
  bool udp = false;
  bool backlog_set = false;
  // Socket options: protocols allow only one listen per address to set them
  // (nginx's "duplicate listen options").
  bool has_options = false;
  bool reuseport = false;
  bool deferred = false;
  int backlog = 511;  // nginx's NGX_LISTEN_BACKLOG on Linux
  int rcvbuf = -1;    // -1: the kernel's default
  int sndbuf = -1;
  bool ipv6only = true;
  bool so_keepalive = false;
  std::string where;
};

// Parses the directive's arguments into one ListenArgs per port (a range
// "127.0.0.1:8000-8003" names several), appended to `out`; `default_server`
// (and its old spelling `default`) is accepted only where the protocol
// chooses servers by name (HTTP), and `http2` with it; `udp` only where the
// protocol serves datagrams (stream), which then rejects what UDP cannot do.
Status parse_listen(const DirectiveCall& call, std::vector<ListenArgs>& out,
                    bool allow_default_server, bool allow_udp = false);

class Listening;
// The socket options of `l` on the listening socket `ls` (every protocol's).
void apply_listen_options(const ListenArgs& l, Listening& ls);

}  // namespace vigil
