#pragma once
// Signals as nginx uses them. Handlers only set flags and wake the event loop
// with one write(2) to its eventfd, saving and restoring errno; they never
// allocate, lock or log. The process acts on the flags between loop passes.
//   TERM, INT  fast stop          QUIT  graceful stop
//   HUP        reload             USR1  reopen log files
//   CHLD       a child exited     ALRM  timer_resolution tick (clock.cc)
//   USR2       upgrade the binary WINCH stop the workers (during an upgrade)

#include <csignal>

#include "vigil/core/result.h"

namespace vigil::signals {

struct Flags {
  volatile std::sig_atomic_t terminate = 0;
  volatile std::sig_atomic_t quit = 0;
  volatile std::sig_atomic_t reconfigure = 0;
  volatile std::sig_atomic_t reopen = 0;
  volatile std::sig_atomic_t child = 0;
  volatile std::sig_atomic_t change_binary = 0;  // USR2
  volatile std::sig_atomic_t noaccept = 0;       // WINCH
};

Flags& flags();

// Installs the handlers (no SA_RESTART: a waiting epoll_wait returns EINTR)
// and ignores SIGPIPE, so a write to a closed socket is an EPIPE error.
Status install();
// Called from the handlers after setting a flag when no wake fd is set; must
// be async-signal-safe, allocation included (Backend::notify is not on its
// failure path: prefer set_wake_fd). Null to clear.
void set_wake_hook(void (*hook)());
// An eventfd the handlers write 1 to after setting a flag (the backend's
// notify fd, Backend::wake_fd()); -1 to clear. Takes precedence over the hook.
void set_wake_fd(int fd);

// The signal number for `vigil -s NAME`, or 0 when NAME is unknown.
int from_command(const char* name);

}  // namespace vigil::signals
