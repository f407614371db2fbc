#pragma once
// Internal: the registration table of the level-triggered backends (poll,
// select), nginx's event_list/event_index of ngx_poll_module. One slot per
// connection, shared by its read and write events (each event's `index` names
// the slot), kept dense by swapping the last slot into a freed one, so add and
// del are O(1) and the table is exactly the pollfd array poll(2) wants.

#include <poll.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "vigil/core/result.h"
#include "vigil/event/event.h"

namespace vigil {
class Connection;
class EventLoop;
}  // namespace vigil

namespace vigil::backends {

// One ready slot, copied out of the table before any handler runs: a handler
// may add or delete events and so reorder the table.
struct ReadyFd {
  Connection* conn;
  std::uint32_t generation;  // the connection's generation when it was registered
  short revents;             // POLLIN/POLLOUT, POLLERR/POLLHUP, POLLNVAL for a dropped fd
};

class FdTable {
 public:
  // Allocates room for `capacity` connections, and a ready list as long, once.
  Status init(std::size_t capacity);
  void clear();

  // Adds POLLIN (read event) or POLLOUT (write event) for ev's connection and
  // sets ev.index. Does not touch ev.active. Fails only when the table is full.
  Status add(Event& ev);
  // Removes ev's direction; the slot goes when no direction is left. Safe when
  // ev is not in the table.
  void del(Event& ev);
  // Forgets slot `slot` entirely (its fd turned out to be invalid): both
  // events of its connection lose their index but keep `active`.
  void drop(std::uint32_t slot);

  // True when ev has a live slot in this table.
  bool contains(const Event& ev) const;

  pollfd* pollfds() { return fds_.get(); }
  std::size_t size() const { return n_; }
  std::size_t capacity() const { return cap_; }
  Connection* connection(std::uint32_t slot) const { return conns_[slot]; }
  // The generation of the connection when its slot was made: a report for
  // the slot is stale once the connection's generation moved on.
  std::uint32_t generation(std::uint32_t slot) const { return gens_[slot]; }
  ReadyFd ready_fd(std::uint32_t slot, short revents) const {
    return ReadyFd{conns_[slot], gens_[slot], revents};
  }
  int fd(std::uint32_t slot) const { return fds_[slot].fd; }
  short interest(std::uint32_t slot) const { return fds_[slot].events; }
  // Where a wait collects its ready slots (capacity() entries).
  ReadyFd* ready() { return ready_.get(); }

 private:
  void remove_slot(std::uint32_t slot);

  std::unique_ptr<pollfd[]> fds_;
  std::unique_ptr<Connection*[]> conns_;
  std::unique_ptr<std::uint32_t[]> gens_;
  std::unique_ptr<ReadyFd[]> ready_;
  std::size_t n_ = 0;
  std::size_t cap_ = 0;
};

class NotifyFd;

// Dispatches ready slots collected by poll or select. An error, hang-up or
// invalid fd goes to both registered directions: the handler meets it in its
// next recv()/send() and closes the connection.
void deliver_ready(EventLoop& loop, NotifyFd& notify, const ReadyFd* ready, std::size_t n,
                   unsigned flags);

}  // namespace vigil::backends
