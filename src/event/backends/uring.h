#pragma once
// Internal: the io_uring readiness backend (compiled only with liburing,
// VIGIL_HAVE_URING). It is not a completion-based I/O engine: it replaces
// epoll_wait with IORING_OP_POLL_ADD, so the rest of the engine (recv/send on
// ready events) is unchanged.
//
// Registration, per direction:
//  - kEvClear: a multishot poll (io_uring_prep_poll_multishot). The kernel
//    posts a completion on every wake-up of the socket that matches the mask,
//    not while the condition merely persists, so it behaves edge-triggered.
//    Unlike EPOLLET it may report the same readiness more than once (one
//    completion per wake-up: two segments arriving = two reports); greedy
//    handlers, which read until EAGAIN, do not mind.
//  - level (no kEvClear, e.g. listening sockets without multi_accept): a
//    single-shot poll re-armed each time it completes, so a condition that
//    still holds is reported again on the next pass.
// The request's user_data is the Event pointer | a 16-bit
// registration generation in the top bits. The generation lives in the
// event's `index` (unused by this backend otherwise): a completion from an
// earlier registration of the same event (del + add before the old request's
// last completion was reaped) is recognised as stale and never re-armed.
//
// del cancels the request (IORING_OP_POLL_REMOVE) even with kEvClose: an
// armed poll holds a reference to the file, so close() alone would keep the
// socket open and the peer would never see the FIN.

#include <liburing.h>

#include <cstdint>
#include <memory>
#include <string_view>

#include "event/backends/notify.h"
#include "vigil/event/backend.h"

namespace vigil::backends {

class UringBackend final : public Backend {
 public:
  UringBackend() = default;
  ~UringBackend() override { done(); }
  UringBackend(const UringBackend&) = delete;
  UringBackend& operator=(const UringBackend&) = delete;

  std::string_view name() const override { return "io_uring"; }
  unsigned capabilities() const override { return kCapClear | kCapEpoll; }

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
  struct Completion {
    std::uint64_t user_data;
    std::int32_t res;
    std::uint32_t flags;
  };

  io_uring_sqe* next_sqe(Status* st);
  Status arm(Event& ev, int fd);  // queues the poll described by ev.index
  Status cancel(std::uint64_t user_data);
  void complete(const Completion& cqe, unsigned flags);
  void cancel_everything();  // done(): cancel every request and reap the completions

  EventLoop* loop_ = nullptr;
  io_uring ring_{};
  bool ring_open_ = false;
  bool skip_success_ = false;  // IORING_FEAT_CQE_SKIP: no completion for a successful cancel
  std::unique_ptr<io_uring_cqe*[]> cqes_;
  std::unique_ptr<Completion[]> batch_;
  unsigned batch_size_ = 0;
  std::uint16_t generation_ = 0;
  NotifyFd notify_;
};

}  // namespace vigil::backends
