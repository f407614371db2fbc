// Backend selection (seed 000: the `use` directive picks one ngx_event_actions_t).

#include "vigil/event/backend.h"

#include <sys/socket.h>

#include <string>

#if VIGIL_HAVE_EPOLL
#include "event/backends/epoll.h"
#endif
#if VIGIL_HAVE_KQUEUE
#include "event/backends/kqueue.h"
#endif
#include "event/backends/poll.h"
#include "event/backends/select.h"
#include "vigil/event/connection.h"
#include "vigil/event/loop.h"
#if VIGIL_HAVE_URING
#include "event/backends/uring.h"
#endif

namespace vigil {

void Backend::init_io(Connection& c) {
  c.recv = unix_recv;
  c.send = unix_send;
  c.recv_chain = readv_chain;
  c.send_chain = writev_chain;
}

int Backend::accept(Connection& lc, sockaddr* addr, socklen_t* len) {
  return ::accept4(lc.fd, addr, len, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

int Backend::shutdown_write(Connection& c) {
  return ::shutdown(c.fd, SHUT_WR);
}

int shutdown_write(Connection& c) {
  if (c.ring && c.loop != nullptr) return c.loop->backend().shutdown_write(c);
  return ::shutdown(c.fd, SHUT_WR);
}

std::vector<std::string_view> backend_names() {
  // epoll first: it is what "" picks. io_uring is opt-in (use io_uring;): a
  // sandbox or an old kernel may refuse it, which only init can tell.
  // Where there is no epoll, kqueue is the best (seed 003); beside epoll
  // (Linux with libkqueue, tests only) it comes last.
  std::vector<std::string_view> names;
#if VIGIL_HAVE_EPOLL
  names.emplace_back("epoll");
#elif VIGIL_HAVE_KQUEUE
  names.emplace_back("kqueue");
#endif
  names.emplace_back("poll");
  names.emplace_back("select");
#if VIGIL_HAVE_URING
  names.emplace_back("io_uring");
#endif
#if VIGIL_HAVE_EPOLL && VIGIL_HAVE_KQUEUE
  names.emplace_back("kqueue");
#endif
  return names;
}

Result<std::unique_ptr<Backend>> make_backend(std::string_view name) {
  std::unique_ptr<Backend> backend;
  if (name.empty()) name = backend_names().front();
  if (false) {
#if VIGIL_HAVE_EPOLL
  } else if (name == "epoll") {
    backend = std::make_unique<backends::EpollBackend>();
#endif
#if VIGIL_HAVE_KQUEUE
  } else if (name == "kqueue") {
    backend = std::make_unique<backends::KqueueBackend>();
#endif
  } else if (name == "poll") {
    backend = std::make_unique<backends::PollBackend>();
  } else if (name == "select") {
    backend = std::make_unique<backends::SelectBackend>();
#if VIGIL_HAVE_URING
  } else if (name == "io_uring") {
    backend = std::make_unique<backends::UringBackend>();
#endif
  } else {
    // nginx's wording for an unknown `use` value.
    return Status::error("invalid event type \"" + std::string(name) + "\"");
  }
  return backend;
}

Status probe_backend(std::string_view name) {
  auto backend = make_backend(name);
  if (!backend) return backend.status();
#if VIGIL_HAVE_URING
  if (name == "io_uring") return backends::UringBackend::probe();
#endif
  return Status::ok();
}

}  // namespace vigil
