#pragma once
// Internal: the epoll backend (seed 000 ngx_epoll_module, seed 001 算法 3).
// Edge-triggered where the caller asks for it (kEvClear), one epoll_event list
// of cfg.events entries allocated in init, the connection's address and
// generation carried in data.u64 (dispatch.h, tag_connection).

#include <sys/epoll.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "event/backends/notify.h"
#include "vigil/event/backend.h"

namespace vigil::backends {

class EpollBackend final : public Backend {
 public:
  EpollBackend() = default;
  ~EpollBackend() override { done(); }
  EpollBackend(const EpollBackend&) = delete;
  EpollBackend& operator=(const EpollBackend&) = delete;

  std::string_view name() const override { return "epoll"; }
  unsigned capabilities() const override;

  Status init(EventLoop& loop, const BackendConfig& cfg) override;
  void done() override;

  Status add(Event& ev, unsigned flags) override;
  Status del(Event& ev, unsigned flags) override;
  Status add_conn(Connection& c) override;
  Status del_conn(Connection& c, unsigned flags) override;
  Status notify() override;
  int wake_fd() const override { return notify_.fd(); }
  Status process_events(Msec timer, unsigned flags) override;

 private:
  // may_fail: a point of fault injection (core/fault.h), for connections only.
  Status ctl(int op, int fd, std::uint32_t events, std::uint64_t tag, bool may_fail = false);

  EventLoop* loop_ = nullptr;
  int ep_ = -1;
  std::unique_ptr<epoll_event[]> list_;
  int nevents_ = 0;
  NotifyFd notify_;
};

}  // namespace vigil::backends
