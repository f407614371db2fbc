#pragma once
// Internal: the poll(2) backend (nginx's ngx_poll_module). Level-triggered:
// the loop deletes an event once it is ready (handle_read_event), or poll
// would report it on every pass. One pollfd per connection, shared by both
// directions; see FdTable.

#include <memory>
#include <string_view>

#include "event/backends/level_backend.h"

namespace vigil::backends {

class PollBackend final : public LevelBackend {
 public:
  PollBackend() = default;
  ~PollBackend() override { done(); }
  PollBackend(const PollBackend&) = delete;
  PollBackend& operator=(const PollBackend&) = delete;

  std::string_view name() const override { return "poll"; }

  Status init(EventLoop& loop, const BackendConfig& cfg) override;
  void done() override;

  Status add(Event& ev, unsigned flags) override;
  Status del(Event& ev, unsigned flags) override;
  Status process_events(Msec timer, unsigned flags) override;
};

}  // namespace vigil::backends
