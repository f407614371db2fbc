#pragma once
// Internal: the select(2) backend (nginx's ngx_select_module). Level-triggered
// like poll; master fd_sets are kept up to date by add/del and copied before
// each wait. Only fds below FD_SETSIZE can be watched, so init refuses more
// connections than that and add refuses larger fds.

#include <sys/select.h>

#include <memory>
#include <string_view>

#include "event/backends/level_backend.h"

namespace vigil::backends {

class SelectBackend final : public LevelBackend {
 public:
  SelectBackend() = default;
  ~SelectBackend() override { done(); }
  SelectBackend(const SelectBackend&) = delete;
  SelectBackend& operator=(const SelectBackend&) = delete;

  std::string_view name() const override { return "select"; }

  Status init(EventLoop& loop, const BackendConfig& cfg) override;
  void done() override;

  Status add(Event& ev, unsigned flags) override;
  Status del(Event& ev, unsigned flags) override;
  Status process_events(Msec timer, unsigned flags) override;

 private:
  // select() failed with EBADF: find the fds that are no longer open, drop
  // them and queue them as failed (nginx's ngx_select_repair_fd_sets).
  std::size_t repair();
  void recompute_max_fd();

  fd_set master_read_;
  fd_set master_write_;
  fd_set work_read_;
  fd_set work_write_;
  int max_fd_ = -1;
  bool max_fd_stale_ = false;  // a del removed max_fd_: recompute before the next wait
};

}  // namespace vigil::backends
