#pragma once
// The connection object (seed 000 "被动连接", ngx_connection_t). Connections live
// in the ConnectionPool's preallocated array; `get` hands one out with its two
// events, `free` puts it back. recv/send are function pointers so a protocol
// (or TLS later) can swap the I/O primitives per connection.

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
  void* data = nullptr;  // the protocol's state (request, session, ...)
  Event* read = nullptr;
  Event* write = nullptr;
  int fd = -1;

  RecvFn recv = nullptr;
  SendFn send = nullptr;
  RecvChainFn recv_chain = nullptr;
  SendChainFn send_chain = nullptr;

  EventLoop* loop = nullptr;
  Listening* listening = nullptr;  // the listener that accepted it (passive)
  off_t sent = 0;                  // bytes sent on this connection
  Log* log = nullptr;
  Arena* arena = nullptr;  // released when the connection is freed

  ::sockaddr* peer_addr = nullptr;  // the peer, copied into the arena
  socklen_t peer_addrlen = 0;
  std::string_view addr_text;              // the peer's address as text, in the arena
  const ::sockaddr* local_addr = nullptr;  // the listener's address
  socklen_t local_addrlen = 0;

  Buf* buffer = nullptr;  // the protocol's read buffer
  QueueNode queue;        // the pool's reusable (idle) list

  // Bumped by ConnectionPool::get on every reuse of the slot; backends tag
  // what they register with it and drop reports of an older generation
  // (io_uring: the completions of a ring connection's receive and sends).
  std::uint32_t generation = 0;
  std::uint64_t number = 0;    // the process-wide connection serial number
  std::uint64_t requests = 0;  // requests handled on it

  unsigned log_error : 3 = 0;
  unsigned timedout : 1 = 0;
  unsigned error : 1 = 0;
  unsigned destroyed : 1 = 0;
  unsigned idle : 1 = 0;      // between requests (keep-alive)
  unsigned reusable : 1 = 0;  // may be closed when the pool runs short
  unsigned close : 1 = 0;     // close it as soon as the handler sees this
  unsigned shared : 1 = 0;
  unsigned sendfile : 1 = 0;
  unsigned tcp_nodelay : 2 = 0;
  unsigned tcp_nopush : 2 = 0;
  unsigned ring : 1 = 0;  // recv/send go through the backend's io_uring (Backend::init_io)

  static Connection* from_queue(QueueNode* n) {
    return reinterpret_cast<Connection*>(reinterpret_cast<char*>(n) - offsetof(Connection, queue));
  }
};

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
