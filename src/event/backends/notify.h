#pragma once
// Internal: the eventfd behind Backend::notify() (nginx's notify_fd in
// ngx_epoll_module). It is watched like any connection, through a
// pseudo-connection of its own that is never part of the ConnectionPool, so a
// backend recognises it by address and runs the loop's notify event.

#include "vigil/core/result.h"
#include "vigil/event/connection.h"
#include "vigil/event/event.h"

namespace vigil {
class EventLoop;
}

namespace vigil::backends {

class NotifyFd {
 public:
  NotifyFd();
  ~NotifyFd() { close(); }
  NotifyFd(const NotifyFd&) = delete;
  NotifyFd& operator=(const NotifyFd&) = delete;

  Status open();
  void close();
  int fd() const { return conn_.fd; }

  // The pseudo-connection watched for readability; its read event's handler is
  // never called: backends test `is(c)` and call fire() instead.
  Connection& connection() { return conn_; }
  Event& event() { return rev_; }
  bool is(const Connection* c) const { return c == &conn_; }
  bool is(const Event* ev) const { return ev == &rev_; }

  // Adds 1 to the counter: one write(2), safe from any thread. A full counter
  // (EAGAIN) already means "wake up", so it is not an error. Its failure path
  // builds a Status (allocates): a signal handler writes to fd() itself
  // (Backend::wake_fd, core/process/signals.h).
  Status signal();
  // Resets the counter and runs loop.notify_event().handler, if one is set.
  void fire(EventLoop& loop);

 private:
  Connection conn_;
  Event rev_;
  Event wev_;  // never registered; only so conn_.write is never null
};

}  // namespace vigil::backends
