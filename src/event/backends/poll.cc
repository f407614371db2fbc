#include "event/backends/poll.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <new>

#include "event/backends/dispatch.h"
#include "vigil/core/clock.h"
#include "vigil/core/log.h"
#include "vigil/event/connection.h"
#include "vigil/event/loop.h"

namespace vigil::backends {

Status PollBackend::init(EventLoop& loop, const BackendConfig& cfg) {
  done();
  Status st = open_table(loop, cfg.connections);
  if (!st) done();
  return st;
}

void PollBackend::done() { close_table(); }

Status PollBackend::add(Event& ev, unsigned /*flags: always level-triggered*/) {
  if (ev.owner<Connection>()->fd < 0) return Status::error("poll: cannot watch fd -1");
  Status st = table_.add(ev);
  if (!st) return st;
  ev.active = 1;
  return Status::ok();
}

// With kEvClose too: the table is the whole registration, and a closed fd left
// in it would come back as POLLNVAL.
Status PollBackend::del(Event& ev, unsigned /*flags*/) {
  table_.del(ev);
  ev.active = 0;
  return Status::ok();
}

Status PollBackend::process_events(Msec timer, unsigned flags) {
  const int timeout =
      timer == kTimerInfinite ? -1 : static_cast<int>(std::min<Msec>(timer, INT_MAX));
  const int n = ::poll(table_.pollfds(), table_.size(), timeout);
  const int err = n == -1 ? errno : 0;

  if (flags & kProcUpdateTime) clock::time_update();

  if (err != 0) {
    if (err == EINTR) return Status::ok();
    return Status::sys("poll()", err);
  }

  LoopStats& stats = loop_->stats();
  if (n == 0) {
    ++stats.empty_waits;
    if (timer != kTimerInfinite) return Status::ok();
    return Status::error("poll() returned no events without timeout");
  }

  // Copy the ready slots out first: handlers add and delete events, which
  // moves slots around in the table.
  std::size_t nready = 0;
  for (std::uint32_t i = 0; i < table_.size();) {
    pollfd& p = table_.pollfds()[i];
    const short revents = p.revents;
    if (revents == 0) {
      ++i;
      continue;
    }
    p.revents = 0;
    table_.ready()[nready++] = table_.ready_fd(i, revents);
    if (revents & POLLNVAL) {
      // The fd was closed behind our back. Left in the table it would be
      // reported on every pass: drop it, and let the handlers see the error.
      VIGIL_LOG(loop_->log(), kAlert, 0, "poll() reported invalid fd:%d ev:%04x rev:%04x, dropped",
                p.fd, static_cast<unsigned>(p.events), static_cast<unsigned>(revents));
      table_.drop(i);  // slot i now holds the former last one: look at it next
      continue;
    }
    ++i;
  }
  stats.events += nready;

  deliver_ready(*loop_, notify_, table_.ready(), nready, flags);
  return Status::ok();
}

}  // namespace vigil::backends
