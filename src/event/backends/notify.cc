#include "event/backends/notify.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include "vigil/core/log.h"
#include "vigil/event/loop.h"

namespace vigil::backends {

NotifyFd::NotifyFd() {
  conn_.read = &rev_;
  conn_.write = &wev_;
  rev_.data = &conn_;
  wev_.data = &conn_;
  wev_.write = 1;
}

Status NotifyFd::open() {
  if (conn_.fd != -1) return Status::ok();
  int fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd == -1) return Status::sys("eventfd()");
  conn_.fd = fd;
  return Status::ok();
}

void NotifyFd::close() {
  if (conn_.fd == -1) return;
  ::close(conn_.fd);  // nothing useful to do on failure: the fd is gone either way
  conn_.fd = -1;
  rev_.active = 0;
  rev_.index = Event::kNoIndex;
}

Status NotifyFd::signal() {
  const std::uint64_t one = 1;
  for (;;) {
    ssize_t n = ::write(conn_.fd, &one, sizeof one);
    if (n == static_cast<ssize_t>(sizeof one)) return Status::ok();
    if (n == -1 && errno == EINTR) continue;
    if (n == -1 && errno == EAGAIN) return Status::ok();  // counter saturated: already pending
    return Status::sys("write() to notify eventfd");
  }
}

void NotifyFd::fire(EventLoop& loop) {
  std::uint64_t count = 0;
  ssize_t n;
  do {
    n = ::read(conn_.fd, &count, sizeof count);
  } while (n == -1 && errno == EINTR);
  if (n == -1 && errno != EAGAIN) {
    VIGIL_LOG(loop.log(), kAlert, errno, "read() from notify eventfd failed");
  }
  Event& ev = loop.notify_event();
  if (ev.handler != nullptr) ev.handler(ev);
}

}  // namespace vigil::backends
