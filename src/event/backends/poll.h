#pragma once
// Internal: the poll(2) backend (nginx's ngx_poll_module). Level-triggered:
// the loop deletes an event once it is ready (handle_read_event), or poll
// would report it on every pass. One pollfd per connection, shared by both
// directions; see FdTable.

#include <memory>
#include <string_view>

#include "event/backends/fd_table.h"
#include "event/backends/notify.h"
#include "vigil/event/backend.h"

namespace vigil::backends {

class PollBackend final : public Backend {
 public:
  PollBackend() = default;
  ~PollBackend() override { done(); }
  PollBackend(const PollBackend&) = delete;
  PollBackend& operator=(const PollBackend&) = delete;

  std::string_view name() const override { return "poll"; }
  unsigned capabilities() const override { return kCapLevel | kCapFd; }

  Status init(EventLoop& loop, const BackendConfig& cfg) override;
  void done() override;

  Status add(Event& ev, unsigned flags) override;
  Status del(Event& ev, unsigned flags) override;
  // Level-triggered backends have no persistent both-direction registration
  // (nginx leaves ngx_add_conn NULL for poll): add_conn registers the read
  // event only, the write event is added when a send would block.
  Status add_conn(Connection& c) override;
  // Deletes whichever directions are registered.
  Status del_conn(Connection& c, unsigned flags) override;
  Status notify() override;
  Status process_events(Msec timer, unsigned flags) override;

 private:
  EventLoop* loop_ = nullptr;
  FdTable table_;
  NotifyFd notify_;
};

}  // namespace vigil::backends
