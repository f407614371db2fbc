#pragma once
// A listening socket (ngx_listening_t): address, options, and the handler the
// accept code calls for every new connection.

#include <netinet/in.h>
#include <sys/socket.h>

#include <string>
#include <string_view>

#include "vigil/core/clock.h"
#include "vigil/core/result.h"
#include "vigil/event/event.h"

namespace vigil {

class Connection;
class Log;

class Listening {
 public:
  using Handler = void (*)(Connection& c);

  sockaddr_storage addr{};
  socklen_t addrlen = 0;
  std::string addr_text;  // "127.0.0.1:8080"

  int fd = -1;
  // SOCK_DGRAM ("listen ... udp"): no accept; its datagrams go to the
  // sessions of event/udp.h, one per client address.
  int type = SOCK_STREAM;
  int backlog = 511;
  int rcvbuf = -1;  // -1: leave the kernel's default
  int sndbuf = -1;
  bool tcp_nodelay = true;
  bool keepalive = false;        // SO_KEEPALIVE on accepted sockets
  bool deferred_accept = false;  // TCP_DEFER_ACCEPT
  bool reuseport = false;        // SO_REUSEPORT: one socket per worker
  bool ipv6only = true;
  // "listen ... proxy_protocol": every accepted connection starts with a
  // PROXY protocol header (src/event/proxy_protocol.h), read within
  // proxy_protocol_timeout before `handler` is called.
  bool proxy_protocol = false;
  Msec proxy_protocol_timeout = 60000;

  Handler handler = nullptr;  // called with every accepted connection
  // Called instead of closing a connection whose PROXY protocol header was
  // not read (broken, timed out, closed: c.timedout, c.error say which), so
  // the protocol can end it as its own (stream logs a session); null: closed.
  Handler proxy_protocol_failed = nullptr;
  // The protocol's configuration for this address, not owned: it must live
  // as long as the Listening (the server keeps the configuration that made
  // it until every worker using it has exited).
  void* servers = nullptr;
  std::size_t pool_size = 512;  // first arena block of accepted connections (grows as needed)
  // Not owned; the log of accepted connections. Must outlive the Listening
  // and its connections.
  Log* log = nullptr;

  // Its connection in a loop's pool, set by EventLoop::add_listening and
  // valid until EventLoop::close_listening or the loop's end. The Listening
  // itself must outlive its registration with a loop.
  Connection* connection = nullptr;
  bool inherited = false;  // received from the previous master (reload)

  // Parses "127.0.0.1:8080", "[::1]:8080", "*:8080", "8080" or
  // "unix:/path" into addr/addr_text.
  Status set_address(std::string_view text);
  // The path of a unix-domain listener; empty for any other.
  std::string_view unix_path() const;
  // Unlinks the socket file of a unix-domain listener (its master, when the
  // socket is given up for good: not on a binary upgrade).
  void remove_unix_file() const;
  // socket(), SO_REUSEADDR (+ SO_REUSEPORT), bind() (retried `tries` times,
  // 500 ms apart, on EADDRINUSE), listen(). Leaves fd nonblocking, close-on-exec.
  // On port 0 the kernel's choice is written back into addr and addr_text.
  Status open(int tries = 1);
  void close();
  // The port actually bound (after binding port 0).
  int port() const;

 private:
  Status set_unix_address(std::string_view text);
};

}  // namespace vigil
