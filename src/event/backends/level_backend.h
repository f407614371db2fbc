#pragma once
// Internal: what the level-triggered backends (poll, select) share: the fd
// table, the notify eventfd, and their connection-level registration. Level
// backends have no persistent both-direction registration (nginx leaves
// ngx_add_conn NULL for poll and select): add_conn registers the read event
// only, and the write event is added when a send would block.

#include <cstddef>

#include "event/backends/fd_table.h"
#include "event/backends/notify.h"
#include "vigil/event/backend.h"
#include "vigil/event/connection.h"

namespace vigil::backends {

class LevelBackend : public Backend {
 public:
  unsigned capabilities() const override { return kCapLevel | kCapFd; }
  Status add_conn(Connection& c) override { return add(*c.read, 0); }
  // Deletes whichever directions are registered.
  Status del_conn(Connection& c, unsigned flags) override {
    Status st = del(*c.read, flags);
    if (st) st = del(*c.write, flags);
    return st;
  }
  Status notify() override { return notify_.signal(); }
  int wake_fd() const override { return notify_.fd(); }

 protected:
  // Sizes the table for every pool connection plus the notify eventfd, and
  // registers that eventfd (through the backend's own add).
  Status open_table(EventLoop& loop, std::size_t connections) {
    loop_ = &loop;
    Status st = table_.init(connections + 1);
    if (st) st = notify_.open();
    if (st) st = add(notify_.event(), 0);
    return st;
  }
  void close_table() {
    notify_.close();
    table_.clear();
    loop_ = nullptr;
  }

  EventLoop* loop_ = nullptr;
  FdTable table_;
  NotifyFd notify_;
};

}  // namespace vigil::backends
