#pragma once
// The connection pool (seed 000 "ngx_connection_t 连接池"): connections[],
// read_events[] and write_events[] preallocated to worker_connections, with a
// free list. get() bumps the connection's `generation` so a kernel event
// still queued for the slot's previous fd is recognised as stale.

#include <cstddef>
#include <memory>
#include <memory_resource>

#include "vigil/core/result.h"
#include "vigil/event/connection.h"

namespace vigil {

class EventLoop;
class Log;

class ConnectionPool {
 public:
  ConnectionPool() = default;
  ~ConnectionPool();
  ConnectionPool(const ConnectionPool&) = delete;
  ConnectionPool& operator=(const ConnectionPool&) = delete;

  Status init(EventLoop& loop, std::size_t n);

  // A free connection for `fd` (-1 allowed), events reset, `generation`
  // one more than the slot's previous life. When free slots fall to n/16 it first closes up to 32 of
  // the oldest reusable (idle) connections, logging "N worker_connections are
  // not enough, reusing connections" at most once a second. When none is free
  // it logs "N worker_connections are not enough" and returns nullptr: the
  // caller closes fd.
  Connection* get(int fd, Log& log);
  // Returns c to the free list (does not close its fd; see close_connection).
  void free(Connection& c);

  // Closes c: deletes its timers and posted events, unregisters it from the
  // backend, closes the fd, resets its arena and frees it. Safe on fd == -1.
  void close_connection(Connection& c);

  // Marks c idle-and-closable (on) or in use (off); reusable connections are
  // kept in least-recently-used order.
  void reusable(Connection& c, bool on);
  // Closes up to `max` of the oldest reusable connections (their read handler
  // runs with c.close set, as nginx's ngx_drain_connections). Returns how many.
  std::size_t drain(std::size_t max);
  // Every reusable connection: used by graceful shutdown.
  std::size_t close_idle();

  std::size_t size() const { return n_; }
  std::size_t free_count() const { return free_n_; }
  std::size_t reusable_count() const { return reusable_n_; }
  // The pool's figures in /metrics (VIGIL_LOOP_STATS's POOL entries, vigil/event/stats.h).
  std::uint64_t connections_used() const { return n_ - free_n_; }
  std::uint64_t connections_max() const { return n_; }
  Connection* connections() { return connections_.get(); }
  Event* read_events() { return read_events_.get(); }
  Event* write_events() { return write_events_.get(); }

 private:
  EventLoop* loop_ = nullptr;
  std::size_t n_ = 0;
  std::unique_ptr<Connection[]> connections_;
  std::unique_ptr<Event[]> read_events_;
  std::unique_ptr<Event[]> write_events_;
  std::unique_ptr<std::pmr::unsynchronized_pool_resource> blocks_;  // upstream of the arenas
  std::unique_ptr<std::unique_ptr<Arena>[]> arenas_;
  Connection* free_ = nullptr;  // singly linked through Connection::data
  std::size_t free_n_ = 0;
  QueueNode reusable_head_;  // oldest first
  std::size_t reusable_n_ = 0;
  std::time_t last_reuse_log_ = 0;
  std::time_t last_exhausted_log_ = 0;
};

}  // namespace vigil
