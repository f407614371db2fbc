#pragma once
// The backend interface (seed 000 ngx_event_actions_t): one table of
// operations, one implementation per kernel mechanism, chosen by `use` or
// automatically (best available first: epoll, else kqueue; io_uring is opt-in;
// poll, select).

#include <sys/socket.h>

#include <memory>
#include <string_view>
#include <vector>

#include "vigil/core/result.h"
#include "vigil/event/event.h"

namespace vigil {

class Connection;
class EventLoop;

struct BackendConfig {
  std::size_t connections = 512;  // worker_connections: the most fds it must watch
  std::size_t events = 512;       // epoll_events: batch size of one wait
  std::size_t kqueue_changes = 512;  // kqueue_changes: changes batched into one kevent()
  std::size_t kqueue_events = 512;   // kqueue_events: batch size of one kevent() wait
  Msec timer_resolution = 0;         // kqueue: an EVFILT_TIMER of this period (0: none)
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  virtual unsigned capabilities() const = 0;  // kCap* flags

  // `loop` receives posted events and owns the notify event.
  virtual Status init(EventLoop& loop, const BackendConfig& cfg) = 0;
  virtual void done() = 0;

  // Register interest in ev's direction (ev.write). Sets ev.active. With
  // kEvClose, del only clears the bookkeeping: the fd is about to be closed.
  virtual Status add(Event& ev, unsigned flags) = 0;
  virtual Status del(Event& ev, unsigned flags) = 0;

  // Both directions at once, edge-triggered, for the connection's lifetime.
  // Level-triggered backends register the read direction only.
  virtual Status add_conn(Connection& c) = 0;
  virtual Status del_conn(Connection& c, unsigned flags) = 0;

  // Wakes a process_events that is waiting; safe from any thread and from a
  // signal handler. The loop then runs its notify event's handler.
  virtual Status notify() = 0;
  // The eventfd notify() writes to, for a signal handler to write to itself
  // (async-signal-safe, no Status to build); -1 when the backend has none.
  virtual int wake_fd() const { return -1; }

  // Waits at most `timer` ms (kTimerInfinite: no limit), refreshes the cached
  // time when kProcUpdateTime is set or the timer_resolution alarm fired, and
  // dispatches ready events: handlers are called, or with kProcPostEvents the
  // events are posted (accept events to the loop's posted_accept queue, others
  // to posted). Stale events (fd == -1 or an older generation) are dropped.
  // EINTR is not an error.
  virtual Status process_events(Msec timer, unsigned flags) = 0;

  // Completion-based I/O (io_uring): the backend may give a connection of its
  // loop's pool its own recv/send functions. The default installs the socket
  // primitives (unix_recv, unix_send, readv_chain, writev_chain).
  virtual void init_io(Connection& c);
  // close_connection() of a ring connection (c.ring): the backend stops its
  // requests. True: the backend took over closing c.fd (sends still in
  // flight drain first); false: the caller closes it.
  virtual bool release(Connection& /*c*/) { return false; }
  // shutdown(SHUT_WR) after the data already accepted for sending.
  virtual int shutdown_write(Connection& c);
  // The next connection of listening connection lc, as accept4(2) with
  // SOCK_NONBLOCK | SOCK_CLOEXEC: the fd, or -1 with errno (EAGAIN: none).
  // io_uring hands out the connections its multishot accept took.
  virtual int accept(Connection& lc, sockaddr* addr, socklen_t* len);
  // Connections already taken for lc that accept() has not handed out yet
  // (close_listening serves them before closing the socket).
  virtual std::size_t accepted_waiting(const Connection& /*lc*/) const { return 0; }
};

// Names of the backends compiled in, best first.
std::vector<std::string_view> backend_names();
// "epoll", "poll", "select", "io_uring", "kqueue"; empty: the best available
// (epoll where it exists, else kqueue).
Result<std::unique_ptr<Backend>> make_backend(std::string_view name);
// Whether `name` can run here: compiled in, and (io_uring) a ring can be set
// up on this kernel. The error says why not.
Status probe_backend(std::string_view name);

}  // namespace vigil
