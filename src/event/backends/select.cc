#include "event/backends/select.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/time.h>

#include <algorithm>
#include <cerrno>
#include <new>
#include <string>

#include "event/backends/dispatch.h"
#include "vigil/core/clock.h"
#include "vigil/core/log.h"
#include "vigil/event/connection.h"
#include "vigil/event/loop.h"

namespace vigil::backends {

Status SelectBackend::init(EventLoop& loop, const BackendConfig& cfg) {
  done();
  // fd_set is a fixed bitmap of FD_SETSIZE bits (select(2)): a connection
  // count above it cannot be served (nginx's ngx_select_init_conf check).
  if (cfg.connections > FD_SETSIZE) {
    return Status::error("the maximum number of files supported by select() is " +
                         std::to_string(FD_SETSIZE));
  }
  FD_ZERO(&master_read_);
  FD_ZERO(&master_write_);
  max_fd_ = -1;
  max_fd_stale_ = false;
  Status st = open_table(loop, cfg.connections);
  if (!st) done();
  return st;
}

void SelectBackend::done() {
  close_table();
  max_fd_ = -1;
}

Status SelectBackend::add(Event& ev, unsigned /*flags: always level-triggered*/) {
  const int fd = ev.owner<Connection>()->fd;
  if (fd < 0) return Status::error("select: cannot watch fd -1");
  if (fd >= FD_SETSIZE) {
    return Status::error("fd " + std::to_string(fd) + " is too large for select() (FD_SETSIZE " +
                         std::to_string(FD_SETSIZE) + "); use epoll or poll");
  }
  Status st = table_.add(ev);
  if (!st) return st;
  FD_SET(fd, ev.write ? &master_write_ : &master_read_);
  if (!max_fd_stale_ && fd > max_fd_) max_fd_ = fd;
  ev.active = 1;
  return Status::ok();
}

Status SelectBackend::del(Event& ev, unsigned /*flags*/) {
  if (table_.contains(ev)) {
    const int fd = table_.fd(ev.index);
    FD_CLR(fd, ev.write ? &master_write_ : &master_read_);
    table_.del(ev);
    if (fd == max_fd_) max_fd_stale_ = true;
  } else {
    table_.del(ev);  // clears a leftover index
  }
  ev.active = 0;
  return Status::ok();
}

void SelectBackend::recompute_max_fd() {
  max_fd_ = -1;
  for (std::uint32_t i = 0; i < table_.size(); ++i) max_fd_ = std::max(max_fd_, table_.fd(i));
  max_fd_stale_ = false;
}

std::size_t SelectBackend::repair() {
  std::size_t nready = 0;
  for (std::uint32_t i = 0; i < table_.size();) {
    const int fd = table_.fd(i);
    if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) {
      ++i;
      continue;
    }
    VIGIL_LOG(loop_->log(), kAlert, 0, "invalid descriptor #%d in select() sets, dropped", fd);
    FD_CLR(fd, &master_read_);
    FD_CLR(fd, &master_write_);
    table_.ready()[nready++] = table_.ready_fd(i, POLLNVAL);
    table_.drop(i);  // slot i now holds the former last one: look at it next
    max_fd_stale_ = true;
  }
  return nready;
}

Status SelectBackend::process_events(Msec timer, unsigned flags) {
  if (max_fd_stale_) recompute_max_fd();
  work_read_ = master_read_;
  work_write_ = master_write_;

  timeval tv{};
  timeval* tp = nullptr;
  if (timer != kTimerInfinite) {
    tv.tv_sec = static_cast<time_t>(timer / 1000);
    tv.tv_usec = static_cast<suseconds_t>((timer % 1000) * 1000);
    tp = &tv;
  }
  const int n = ::select(max_fd_ + 1, &work_read_, &work_write_, nullptr, tp);
  const int err = n == -1 ? errno : 0;

  if (flags & kProcUpdateTime) clock::time_update();

  LoopStats& stats = loop_->stats();
  if (err != 0) {
    if (err == EINTR) return Status::ok();
    if (err != EBADF) return Status::sys("select()", err);
    // One bad fd would fail every select() from now on: find and drop it.
    const std::size_t nready = repair();
    if (nready == 0) return Status::sys("select()", err);
    stats.events += nready;
    deliver_ready(*loop_, notify_, table_.ready(), nready, flags);
    return Status::ok();
  }

  if (n == 0) {
    ++stats.empty_waits;
    if (timer != kTimerInfinite) return Status::ok();
    return Status::error("select() returned no events without timeout");
  }

  // Copy the ready slots out first: handlers reorder the table.
  std::size_t nready = 0;
  for (std::uint32_t i = 0; i < table_.size(); ++i) {
    const int fd = table_.fd(i);
    const short interest = table_.interest(i);
    short revents = 0;
    if ((interest & POLLIN) && FD_ISSET(fd, &work_read_)) revents |= POLLIN;
    if ((interest & POLLOUT) && FD_ISSET(fd, &work_write_)) revents |= POLLOUT;
    if (revents == 0) continue;
    table_.ready()[nready++] = table_.ready_fd(i, revents);
  }
  stats.events += nready;

  deliver_ready(*loop_, notify_, table_.ready(), nready, flags);
  return Status::ok();
}

}  // namespace vigil::backends
