#pragma once
// The connection object (seed 000 "被动连接", ngx_connection_t). Connections live
// in the ConnectionPool's preallocated array; `get` hands one out with its two
// events, `free` puts it back. recv/send are function pointers so a protocol
// or TLS (src/event/tls/) can swap the I/O primitives per connection.
//
// Ownership and lifetime. The pool owns every Connection, its two Events and
// its Arena; a protocol never frees them. A Connection is valid from the
// moment the pool hands it out (Listening::handler, event_connect_peer) until
// close_connection(c): that call deletes both timers, takes both events off
// the posted queues and the backend, closes the fd, resets the arena and
// returns the slot to the free list, where the next accept may take it at
// once. After it returns, c, c.read, c.write and everything in the arena
// (peer_addr, addr_text, the protocol's state if it lived there) must not be
// used: keep no pointer to a closed connection. A kernel event still queued
// for the old fd is recognised by Connection::generation and dropped.

#include <sys/socket.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "vigil/core/arena.h"
#include "vigil/core/buffer.h"
#include "vigil/event/event.h"

namespace vigil {

class Connection;
class EventLoop;
class Listening;
class Log;
struct TlsConnection;
struct ProxyProtocolInfo;

// >0 bytes, 0 EOF, kIoAgain (-2) would block, kIoError (-1) error (c.error set).
using RecvFn = long (*)(Connection& c, char* buf, std::size_t size);
using SendFn = long (*)(Connection& c, const char* buf, std::size_t size);
// Reads into the free space of the chain's buffers (readv). Same return codes.
using RecvChainFn = long (*)(Connection& c, Chain* chain, off_t limit);
// Sends as much of the chain as the socket takes (writev, sendfile for file
// buffers), at most `limit` bytes (0: no limit). Returns the first unsent link
// (nullptr when all was sent) or kChainError.
using SendChainFn = Chain* (*)(Connection& c, Chain* in, off_t limit);

inline Chain* const kChainError = reinterpret_cast<Chain*>(~std::uintptr_t{0});

class Connection {
 public:
  // The protocol's state (request, session, ...); not owned, and reused by
  // the pool as its free-list link once the connection is closed.
  void* data = nullptr;
  Event* read = nullptr;   // owned by the pool, as long as the connection
  Event* write = nullptr;  // (its `data` points back at this connection)
  int fd = -1;             // -1 once closed

  RecvFn recv = nullptr;
  SendFn send = nullptr;
  RecvChainFn recv_chain = nullptr;
  SendChainFn send_chain = nullptr;

  EventLoop* loop = nullptr;  // the loop whose pool holds it
  // The listener that accepted it (passive), null for an outgoing one; the
  // Listening must outlive the connections it accepted.
  Listening* listening = nullptr;
  off_t sent = 0;  // bytes sent on this connection
  // Not owned: the listener's log (or the loop's); must outlive the connection.
  Log* log = nullptr;
  Arena* arena = nullptr;  // owned by the pool; reset when the connection closes

  ::sockaddr* peer_addr = nullptr;  // the peer, copied into the arena
  socklen_t peer_addrlen = 0;
  std::string_view addr_text;  // the peer's address as text, in the arena
  // The listener's address (points into Listening::addr), null for an
  // outgoing connection.
  const ::sockaddr* local_addr = nullptr;
  socklen_t local_addrlen = 0;

  Buf* buffer = nullptr;  // the protocol's read buffer: the protocol owns it
  TlsConnection* ssl = nullptr;  // TLS state (src/event/tls/tls.h); freed by close_connection
  // The PROXY protocol header received before anything else, in the arena
  // (src/event/proxy_protocol.h); null when the listener reads none.
  ProxyProtocolInfo* proxy_protocol = nullptr;
  QueueNode queue;        // the pool's reusable (idle) list

  // Bumped by ConnectionPool::get on every reuse of the slot; backends tag
  // what they register with it and drop reports of an older generation
  // (io_uring: the completions of a ring connection's receive and sends).
  std::uint32_t generation = 0;
  std::uint64_t number = 0;    // the process-wide connection serial number
  std::uint64_t requests = 0;  // requests handled on it

  unsigned timedout : 1 = 0;
  unsigned error : 1 = 0;
  unsigned reusable : 1 = 0;  // may be closed when the pool runs short
  unsigned close : 1 = 0;     // close it as soon as the handler sees this
  unsigned shared : 1 = 0;    // fd not ours: close_connection neither unregisters nor closes it
  // TCP_NODELAY / TCP_CORK: 0 not set, 1 set, 2 not applicable (a
  // unix-domain socket).
  unsigned tcp_nodelay : 2 = 0;
  unsigned tcp_nopush : 2 = 0;
  unsigned ring : 1 = 0;  // recv/send go through the backend's io_uring (Backend::init_io)

  static Connection* from_queue(QueueNode* n) {
    return reinterpret_cast<Connection*>(reinterpret_cast<char*>(n) - offsetof(Connection, queue));
  }
};

// Closes c (the one call to end a connection; the same as
// c.loop->pool().close_connection(c)): pending timers of both events are
// deleted without running, posted events are dropped, the backend forgets
// the fd, the fd is closed, the arena is reset and the slot is free again.
// No handler of c runs afterwards. Safe to call from c's own handlers (return
// right after it). Calling it twice is an error that is logged, not a crash.
void close_connection(Connection& c);

// The default I/O primitives for sockets (src/event/io.cc).
long unix_recv(Connection& c, char* buf, std::size_t size);
long unix_send(Connection& c, const char* buf, std::size_t size);
long readv_chain(Connection& c, Chain* chain, off_t limit);
Chain* writev_chain(Connection& c, Chain* in, off_t limit);  // memory + sendfile(2) for files

// shutdown(fd, SHUT_WR) once everything the connection's send functions
// accepted has left: a ring connection may still have sends in flight.
// 0 or -1 with errno, like shutdown(2).
int shutdown_write(Connection& c);

}  // namespace vigil
