#pragma once
// Internal: the kqueue backend (seed 003, nginx's ngx_kqueue_module).
//
// - EVFILT_READ / EVFILT_WRITE with EV_CLEAR: edge-triggered, as epoll ET.
// - Changes are batched: add/del append to a change list of kqueue_changes
//   entries that the next kevent() wait submits; a full list is flushed at
//   once (ngx_kqueue_set_event), a change still in the list is taken out
//   again instead of being passed to the kernel (ngx_kqueue_del_event).
// - A change the kernel refuses comes back in the event list as an EV_ERROR
//   entry; it is handled per entry (stale: dropped; a live connection: its
//   event is delivered with error set, as a failed epoll_ctl closes it).
// - udata carries the connection's address and generation (dispatch.h's
//   tag), so a report for a closed or reused slot is dropped.
// - EVFILT_TIMER ticks every timer_resolution ms (NGX_USE_TIMER_EVENT), so
//   the loop needs no timerfd tick; EVFILT_USER wakes the wait for notify(); a pipe
//   serves signal handlers, which must not call kevent() (libkqueue takes
//   locks there) and where EVFILT_USER is missing it serves notify() too.
//
// VIGIL_KQUEUE_EMULATED (set by CMake when built against libkqueue, the
// user-space kqueue on epoll): closing a descriptor does not remove its
// registrations there, so every delete is submitted at once, before the
// close; and its EV_EOF is unreliable both ways (missing for a FIN that came
// with data while both filters are registered, set for any stream socket
// with 0 bytes to read), so pending_eof comes from poll(POLLRDHUP) there.

#include <sys/types.h>
// sys/types.h first: BSD's sys/event.h uses its types without including it.
#include <sys/event.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "vigil/event/backend.h"

namespace vigil::backends {

class KqueueBackend final : public Backend {
 public:
  KqueueBackend() = default;
  ~KqueueBackend() override { done(); }
  KqueueBackend(const KqueueBackend&) = delete;
  KqueueBackend& operator=(const KqueueBackend&) = delete;

  std::string_view name() const override { return "kqueue"; }
  unsigned capabilities() const override;

  Status init(EventLoop& loop, const BackendConfig& cfg) override;
  void done() override;

  Status add(Event& ev, unsigned flags) override;
  Status del(Event& ev, unsigned flags) override;
  Status add_conn(Connection& c) override;
  Status del_conn(Connection& c, unsigned flags) override;
  Status notify() override;
  int wake_fd() const override { return wake_[1]; }
  Status process_events(Msec timer, unsigned flags) override;

  // Whether this build talks to libkqueue rather than a kernel kqueue.
  static constexpr bool emulated() {
#if VIGIL_KQUEUE_EMULATED
    return true;
#else
    return false;
#endif
  }

 private:
  // Appends one change; a full list is submitted first (seed 003, 2.1).
  Status queue_change(Event& ev, int fd, short filter, unsigned short kflags, bool was_active);
  // Takes ev's change out of the list if it is still there. True when it was
  // there and the kernel never saw the event (nothing left to delete).
  bool unqueue_change(Event& ev);
  // Submits the change list now without taking any pending event: every
  // change carries EV_RECEIPT and the list returned is exactly as long.
  Status flush_changes();
  // An EV_ERROR entry from the change list.
  void change_failed(const struct kevent& kev, unsigned flags);
  void drain_wake_pipe();
  Status del_one(Event& ev, unsigned flags);

  EventLoop* loop_ = nullptr;
  int kq_ = -1;
  int wake_[2] = {-1, -1};  // read end watched, write end for signal handlers
  bool timer_event_ = false;

  std::unique_ptr<struct kevent[]> changes_;
  std::unique_ptr<bool[]> change_was_active_;  // the event was registered before this change
  std::unique_ptr<struct kevent[]> receipts_;
  int nchanges_ = 0;
  int max_changes_ = 0;
  std::unique_ptr<struct kevent[]> events_;
  int nevents_ = 0;
};

}  // namespace vigil::backends
