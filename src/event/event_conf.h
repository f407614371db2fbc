#pragma once
// The "events { }" block and its directives (nginx's ngx_events_module,
// ngx_event_core_module, and epoll_events of ngx_epoll_module, kqueue_changes and kqueue_events of
// ngx_kqueue_module).

#include <cstddef>
#include <string>

#include "core/conf/loader.h"
#include "core/conf/module.h"
#include "vigil/core/clock.h"

namespace vigil {

// The "events { }" block's context (core knows only the main context).
inline constexpr ConfContextMask kEventsConf = 1u << 1;

// After a successful load every field holds a final value (nginx's defaults
// where the block did not set one).
struct EventConf {
  std::size_t connections = 512;  // worker_connections
  std::string use;  // "epoll", "poll", "select", "io_uring", "kqueue"; "" = pick the best
  bool multi_accept = false;
  bool accept_mutex = false;
  Msec accept_mutex_delay = 500;
  std::size_t epoll_events = 512;  // epoll_wait() batch size
  std::size_t kqueue_changes = 512;  // changes batched into one kevent()
  std::size_t kqueue_events = 512;   // kevent() batch size
};

const Module& event_module();

// The events block's settings of a loaded configuration (loading fails
// without one when event_module() is among the modules).
const EventConf& event_conf(const Configuration& conf);

}  // namespace vigil
