#pragma once
// Signals as nginx uses them. Handlers only set flags (and wake the event loop
// through an async-signal-safe hook); the process acts on the flags between
// loop passes.
//   TERM, INT  fast stop          QUIT  graceful stop
//   HUP        reload             USR1  reopen log files
//   CHLD       a child exited     ALRM  timer_resolution tick (clock.cc)

#include <csignal>

#include "vigil/core/result.h"

namespace vigil::signals {

struct Flags {
  volatile std::sig_atomic_t terminate = 0;
  volatile std::sig_atomic_t quit = 0;
  volatile std::sig_atomic_t reconfigure = 0;
  volatile std::sig_atomic_t reopen = 0;
  volatile std::sig_atomic_t child = 0;
};

Flags& flags();

// Installs the handlers (no SA_RESTART: a waiting epoll_wait returns EINTR)
// and ignores SIGPIPE, so a write to a closed socket is an EPIPE error.
Status install();
// Called from the handlers, with `arg`, after setting a flag; must be
// async-signal-safe (Backend::notify is). Null to clear. The worker passes
// its loop: the one pointer to a loop the process keeps, because a signal
// handler has no other way to find it.
void set_wake_hook(void (*hook)(void*), void* arg = nullptr);

// The signal number for `vigil -s NAME`, or 0 when NAME is unknown.
int from_command(const char* name);

}  // namespace vigil::signals
