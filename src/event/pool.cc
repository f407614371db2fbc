// The preallocated connection pool (seed 000, "ngx_connectino_t 连接池").
#include "vigil/event/pool.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>

#include "core/fault.h"
#include "event/tls/tls.h"
#include "vigil/core/counters.h"
#include "vigil/core/log.h"
#include "event/udp.h"
#include "vigil/event/listening.h"
#include "vigil/event/loop.h"

namespace vigil {

namespace {
// Serial numbers of connections, process-wide (nginx's ngx_connection_counter).
std::atomic<std::uint64_t> g_connection_serial{0};
}  // namespace

ConnectionPool::~ConnectionPool() {
  // Connections a protocol left open at exit still own their TLS state:
  // free it (quietly: the peer gets no close_notify from a dying worker).
  for (std::size_t i = 0; connections_ && i < n_; ++i) {
    Connection& c = connections_[i];
    if (c.ssl != nullptr) {
      c.error = 1;
      tls_close(c);
    }
  }
}

Status ConnectionPool::init(EventLoop& loop, std::size_t n) {
  if (n == 0) return Status::error("worker_connections must be at least 1");
  loop_ = &loop;
  n_ = n;
  connections_ = std::make_unique<Connection[]>(n);
  read_events_ = std::make_unique<Event[]>(n);
  write_events_ = std::make_unique<Event[]>(n);
  // Arenas draw their blocks from one pool resource, which keeps released
  // blocks for the next connection instead of returning them to malloc.
  std::pmr::pool_options opts;
  opts.largest_required_pool_block = 64 * 1024;
  blocks_ = std::make_unique<std::pmr::unsynchronized_pool_resource>(opts);
  arenas_ = std::make_unique<std::unique_ptr<Arena>[]>(n);

  free_ = nullptr;
  for (std::size_t i = n; i-- > 0;) {
    Connection& c = connections_[i];
    arenas_[i] = std::make_unique<Arena>(512, blocks_.get());
    c.read = &read_events_[i];
    c.write = &write_events_[i];
    c.arena = arenas_[i].get();
    c.fd = -1;
    c.write->write = 1;
    c.data = free_;
    free_ = &c;
  }
  free_n_ = n;
  reusable_head_.prev = reusable_head_.next = &reusable_head_;
  reusable_n_ = 0;
  return Status::ok();
}

Connection* ConnectionPool::get(int fd, Log& log) {
  if (fault::hit(fault::kPool)) return nullptr;  // as if exhausted (tests only)
  // Running short: close some idle keep-alive connections first, as nginx's
  // ngx_drain_connections does, so a burst of new clients is not refused while
  // idle ones hold slots.
  if (free_n_ <= n_ / 16 && reusable_n_ > 0) {
    std::time_t now = clock::now_sec();
    if (now != last_reuse_log_) {
      last_reuse_log_ = now;
      VIGIL_LOG(log, kWarn, 0, "%zu worker_connections are not enough, reusing connections", n_);
    }
    drain(std::max<std::size_t>(1, std::min<std::size_t>(32, reusable_n_ / 8)));
  }

  Connection* c = free_;
  if (c == nullptr) {
    std::time_t now = clock::now_sec();
    if (now != last_exhausted_log_) {
      last_exhausted_log_ = now;
      VIGIL_LOG(log, kAlert, 0, "%zu worker_connections are not enough", n_);
    }
    return nullptr;
  }
  free_ = static_cast<Connection*>(c->data);
  --free_n_;

  Event* rev = c->read;
  Event* wev = c->write;
  Arena* arena = c->arena;
  // A kernel report still queued for the slot's previous fd carries the old
  // generation and is dropped by the backend (seed 001, 1.3 Instance 机制,
  // with a counter instead of one bit).
  const std::uint32_t generation = c->generation + 1;

  *c = Connection{};
  c->read = rev;
  c->write = wev;
  c->arena = arena;
  c->generation = generation;
  c->fd = fd;
  c->log = &log;
  c->loop = loop_;
  c->number = g_connection_serial.fetch_add(1, std::memory_order_relaxed) + 1;

  *rev = Event{};
  *wev = Event{};
  rev->data = c;
  wev->data = c;
  wev->write = 1;
  rev->log = &log;
  wev->log = &log;
  return c;
}

void ConnectionPool::free(Connection& c) {
  if (c.reusable) reusable(c, false);
  c.data = free_;
  free_ = &c;
  ++free_n_;
}

void ConnectionPool::close_connection(Connection& c) {
  if (c.fd == -1) {
    if (c.log) VIGIL_LOG(*c.log, kAlert, 0, "connection already closed");
    return;
  }
  // A UDP session leaves its listener's table while its address is known.
  if (c.shared) udp_forget(c);
  // close_notify goes out (if the socket takes it) before the fd closes.
  if (c.ssl != nullptr) tls_close(c);
  EventLoop& loop = *loop_;
  Event& rev = *c.read;
  Event& wev = *c.write;
  loop.del_timer(rev);
  loop.del_timer(wev);

  if (!c.shared) {
    Backend& b = loop.backend();
    if (loop.capabilities() & kCapClear) {
      // Closing the fd removes it from epoll; kEvClose skips the syscall.
      if (rev.active || wev.active) (void)b.del_conn(c, kEvClose);
    } else {
      // Level-triggered tables (poll, select) must forget the fd for real.
      if (rev.active) (void)b.del(rev, 0);
      if (wev.active) (void)b.del(wev, 0);
    }
    rev.active = 0;
    wev.active = 0;
  }
  PostedQueue::remove(rev);
  PostedQueue::remove(wev);
  if (c.reusable) reusable(c, false);

  // An accepted connection counted as active by event_accept is gone.
  if (c.listening != nullptr && c.listening->connection != &c) shared_counters()->active.add(-1);

  // A ring connection: the backend cancels its requests, and may keep the
  // fd open until the sends it accepted have left.
  const bool owned = !c.shared && c.ring && loop.backend().release(c);
  c.ring = 0;
  int fd = c.fd;
  c.fd = -1;
  if (c.arena) c.arena->reset();
  c.buffer = nullptr;
  bool shared = c.shared;
  Log* log = c.log;
  free(c);
  if (!shared && !owned && ::close(fd) == -1 && log) {
    VIGIL_LOG(*log, kAlert, errno, "close() socket %d failed", fd);
  }
}

void close_connection(Connection& c) {
  c.loop->pool().close_connection(c);
}

void ConnectionPool::reusable(Connection& c, bool on) {
  if (c.reusable) {
    c.queue.prev->next = c.queue.next;
    c.queue.next->prev = c.queue.prev;
    c.queue.prev = c.queue.next = nullptr;
    --reusable_n_;
  }
  c.reusable = on ? 1 : 0;
  if (on) {
    // Newest at the tail: drain() takes the oldest from the head.
    c.queue.prev = reusable_head_.prev;
    c.queue.next = &reusable_head_;
    reusable_head_.prev->next = &c.queue;
    reusable_head_.prev = &c.queue;
    ++reusable_n_;
  }
}

std::size_t ConnectionPool::drain(std::size_t max) {
  std::size_t closed = 0;
  while (closed < max && reusable_n_ > 0) {
    Connection* c = Connection::from_queue(reusable_head_.next);
    reusable(*c, false);
    // The owner closes it from its read handler when it sees `close`, as
    // nginx's keep-alive handler does; if it doesn't, close it here.
    c->close = 1;
    if (c->read->handler) c->read->handler(*c->read);
    if (c->fd != -1 && c->close) close_connection(*c);
    ++closed;
  }
  return closed;
}

std::size_t ConnectionPool::close_idle() {
  return drain(reusable_n_);
}

}  // namespace vigil
