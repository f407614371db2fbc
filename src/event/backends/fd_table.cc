#include "event/backends/fd_table.h"

#include <new>
#include <string>

#include "event/backends/dispatch.h"
#include "event/backends/notify.h"
#include "vigil/event/connection.h"

namespace vigil::backends {

namespace {

short direction_bit(const Event& ev) {
  return ev.write ? POLLOUT : POLLIN;
}

}  // namespace

Status FdTable::init(std::size_t capacity) {
  fds_.reset(new (std::nothrow) pollfd[capacity]);
  conns_.reset(new (std::nothrow) Connection*[capacity]);
  gens_.reset(new (std::nothrow) std::uint32_t[capacity]);
  ready_.reset(new (std::nothrow) ReadyFd[capacity]);
  if (!fds_ || !conns_ || !gens_ || !ready_)
    return Status::error("cannot allocate the event table", ENOMEM);
  cap_ = capacity;
  n_ = 0;
  return Status::ok();
}

void FdTable::clear() {
  fds_.reset();
  conns_.reset();
  gens_.reset();
  ready_.reset();
  n_ = cap_ = 0;
}

bool FdTable::contains(const Event& ev) const {
  // The index is checked against the slot's owner too: an index left over from
  // a previous life of the event must never alias another connection's slot.
  return ev.index != Event::kNoIndex && ev.index < n_ && conns_[ev.index] == ev.owner<Connection>();
}

Status FdTable::add(Event& ev) {
  auto* c = ev.owner<Connection>();
  const short bit = direction_bit(ev);
  if (contains(ev)) {
    fds_[ev.index].events |= bit;
    return Status::ok();
  }
  Event* other = ev.write ? c->read : c->write;
  if (other != nullptr && contains(*other)) {
    ev.index = other->index;
    fds_[ev.index].events |= bit;
    return Status::ok();
  }
  if (n_ == cap_) {
    return Status::error("the event table is full (" + std::to_string(cap_) + " fds)");
  }
  const auto slot = static_cast<std::uint32_t>(n_++);
  fds_[slot].fd = c->fd;
  fds_[slot].events = bit;
  fds_[slot].revents = 0;
  conns_[slot] = c;
  gens_[slot] = c->generation;
  ev.index = slot;
  return Status::ok();
}

void FdTable::del(Event& ev) {
  if (!contains(ev)) {
    ev.index = Event::kNoIndex;
    return;
  }
  const std::uint32_t slot = ev.index;
  ev.index = Event::kNoIndex;
  fds_[slot].events = static_cast<short>(fds_[slot].events & ~direction_bit(ev));
  if (fds_[slot].events == 0) remove_slot(slot);
}

void FdTable::drop(std::uint32_t slot) {
  Connection* c = conns_[slot];
  if (c->read != nullptr && c->read->index == slot) c->read->index = Event::kNoIndex;
  if (c->write != nullptr && c->write->index == slot) c->write->index = Event::kNoIndex;
  remove_slot(slot);
}

void FdTable::remove_slot(std::uint32_t slot) {
  const auto last = static_cast<std::uint32_t>(n_ - 1);
  if (slot != last) {
    fds_[slot] = fds_[last];
    conns_[slot] = conns_[last];
    gens_[slot] = gens_[last];
    Connection* moved = conns_[slot];
    if (moved->read != nullptr && moved->read->index == last) moved->read->index = slot;
    if (moved->write != nullptr && moved->write->index == last) moved->write->index = slot;
  }
  --n_;
}

void deliver_ready(EventLoop& loop, NotifyFd& notify, const ReadyFd* ready, std::size_t n,
                   unsigned flags) {
  for (std::size_t i = 0; i < n; ++i) {
    const ReadyFd& r = ready[i];
    if (notify.is(r.conn)) {
      notify.fire(loop);
      continue;
    }
    const bool failed = (r.revents & (POLLERR | POLLHUP | POLLNVAL)) != 0;
    deliver_conn(loop, *r.conn, r.generation, failed || (r.revents & POLLIN),
                 failed || (r.revents & POLLOUT), false, flags);
  }
}

}  // namespace vigil::backends
