#pragma once
// Outgoing (active) connections (seed 000 "主动连接", ngx_peer_connection_t):
// a nonblocking connect whose completion arrives as a write event.

#include <sys/socket.h>

#include <string>
#include <string_view>

#include "vigil/event/connection.h"

namespace vigil {

class EventLoop;
class Log;
class PeerConnection;

// The upstream layer's hooks: pick the next peer (fills addr/addrlen/name),
// and learn how the attempt went.
using GetPeerFn = int (*)(PeerConnection& pc, void* data);  // kPeerOk or kPeerBusy
using FreePeerFn = void (*)(PeerConnection& pc, void* data, unsigned state);

inline constexpr int kPeerOk = 0;          // connected
inline constexpr int kPeerAgain = -2;      // connecting: wait for the write event
inline constexpr int kPeerError = -1;      // failed for a local reason (no fds, ...)
inline constexpr int kPeerDeclined = -5;   // refused or unreachable: try the next peer
inline constexpr int kPeerBusy = -3;       // no live peer left
// get() handed out a cached (keepalive) connection: pc.connection is set,
// connected, and pc.cached is true. event_connect_peer passes it on.
inline constexpr int kPeerDone = -4;

inline constexpr unsigned kPeerFailed = 1u << 0;  // FreePeerFn state bits
inline constexpr unsigned kPeerNext = 1u << 1;
// The connection is reusable (a complete response, nothing unread): free()
// may keep it in the keepalive cache and then sets pc.connection to null.
inline constexpr unsigned kPeerKeepalive = 1u << 2;

// Lifetime: the PeerConnection is the caller's (the upstream layer's or
// yours) and must outlive the connect attempt. `connection` is set when
// event_connect_peer returns kPeerOk or kPeerAgain; it is a pool connection
// like any other, ended with close_connection(*pc.connection) (after which
// set pc.connection to null: the slot is reused), or handed to pc.free.
class PeerConnection {
 public:
  Connection* connection = nullptr;
  sockaddr_storage addr{};
  socklen_t addrlen = 0;
  std::string name;  // for log messages
  unsigned tries = 1;  // attempts left before giving up

  GetPeerFn get = nullptr;
  FreePeerFn free = nullptr;
  void* data = nullptr;  // passed to get/free; not owned

  int rcvbuf = -1;
  // The local address to connect from (proxy_bind), when local_len is not 0;
  // port 0: any port (chosen at connect time). `transparent`: the address
  // need not be this host's (IP_TRANSPARENT, which needs CAP_NET_ADMIN).
  sockaddr_storage local{};
  socklen_t local_len = 0;
  bool transparent = false;
  Log* log = nullptr;  // not owned; null: the loop's log
  bool cached = false;
};

// Gets the peer (pc.get, if set), a pool connection and a socket, and starts a
// nonblocking connect. Returns kPeerOk, kPeerAgain, kPeerDone (get() gave a
// cached connection), kPeerDeclined, kPeerBusy or kPeerError; on anything but
// kPeerOk/kPeerAgain/kPeerDone no connection is held.
int event_connect_peer(EventLoop& loop, PeerConnection& pc);
// After the write event of a kPeerAgain connect: 0 when connected, else the
// socket error (SO_ERROR).
int peer_connect_result(Connection& c);
// Parses a numeric local address for PeerConnection::local: "a.b.c.d",
// "a.b.c.d:port", "v6" or "[v6]:port" (no host names). False when `text`
// is none of these.
bool parse_local_address(std::string_view text, sockaddr_storage& out, socklen_t& len);

}  // namespace vigil
