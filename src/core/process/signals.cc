#include "core/process/signals.h"

#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

namespace vigil::signals {

namespace {

Flags g_flags;
void (*volatile g_wake)() = nullptr;
volatile std::sig_atomic_t g_wake_fd = -1;

// Async-signal-safe (signal-safety(7)): it sets a flag and makes one write(2)
// to the loop's eventfd, and keeps errno, which the interrupted code may be
// about to read. No allocation, no lock, no log: a failed write is not
// reported (a full eventfd counter already means "wake up"; anything else
// leaves the flag for the next pass).
void on_signal(int signo) {
  const int saved_errno = errno;
  switch (signo) {
    case SIGTERM:
    case SIGINT:
      g_flags.terminate = 1;
      break;
    case SIGQUIT:
      g_flags.quit = 1;
      break;
    case SIGHUP:
      g_flags.reconfigure = 1;
      break;
    case SIGUSR1:
      g_flags.reopen = 1;
      break;
    case SIGCHLD:
      g_flags.child = 1;
      break;
    case SIGUSR2:
      g_flags.change_binary = 1;
      break;
    case SIGWINCH:
      g_flags.noaccept = 1;
      break;
    default:
      errno = saved_errno;
      return;
  }
  if (const int fd = g_wake_fd; fd != -1) {
    const std::uint64_t one = 1;
    ssize_t n;
    do {
      n = ::write(fd, &one, sizeof one);
    } while (n == -1 && errno == EINTR);
  } else if (auto hook = g_wake) {
    hook();
  }
  errno = saved_errno;
}

}  // namespace

Flags& flags() {
  return g_flags;
}

Status install() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  for (int signo : {SIGTERM, SIGINT, SIGQUIT, SIGHUP, SIGUSR1, SIGCHLD, SIGUSR2, SIGWINCH}) {
    if (::sigaction(signo, &sa, nullptr) == -1) {
      return Status::sys("sigaction(" + std::string(strsignal(signo)) + ")");
    }
  }
  sa.sa_handler = SIG_IGN;
  if (::sigaction(SIGPIPE, &sa, nullptr) == -1) return Status::sys("sigaction(SIGPIPE)");
  return Status::ok();
}

void set_wake_hook(void (*hook)()) {
  g_wake = hook;
}

void set_wake_fd(int fd) {
  g_wake_fd = fd;
}

int from_command(const char* name) {
  if (std::strcmp(name, "stop") == 0) return SIGTERM;
  if (std::strcmp(name, "quit") == 0) return SIGQUIT;
  if (std::strcmp(name, "reopen") == 0) return SIGUSR1;
  if (std::strcmp(name, "reload") == 0) return SIGHUP;
  if (std::strcmp(name, "upgrade") == 0) return SIGUSR2;
  return 0;
}

}  // namespace vigil::signals
