// The signal handlers (core/process/signals.cc): they set a flag, wake the
// loop through its eventfd, and leave errno as they found it, even when their
// own write(2) fails.
#include "core/process/signals.h"

#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include <gtest/gtest.h>

namespace vigil {
namespace {

TEST(Signals, HandlerSetsTheFlagAndWritesTheWakeFd) {
  ASSERT_TRUE(signals::install().is_ok());
  const int efd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  ASSERT_NE(efd, -1);
  signals::set_wake_fd(efd);
  signals::flags().reopen = 0;
  ASSERT_EQ(::raise(SIGUSR1), 0);
  EXPECT_EQ(signals::flags().reopen, 1);
  std::uint64_t count = 0;
  ASSERT_EQ(::read(efd, &count, sizeof count), static_cast<ssize_t>(sizeof count));
  EXPECT_EQ(count, 1u);
  signals::set_wake_fd(-1);
  ::close(efd);
}

TEST(Signals, HandlerKeepsErrnoWhenItsWriteFails) {
  ASSERT_TRUE(signals::install().is_ok());
  // A descriptor that is not open: the handler's write fails with EBADF.
  const int bad = ::dup(0);
  ASSERT_NE(bad, -1);
  ::close(bad);
  signals::set_wake_fd(bad);
  for (int signo : {SIGHUP, SIGUSR1, SIGCHLD, SIGQUIT}) {
    errno = EXDEV;
    ASSERT_EQ(::raise(signo), 0);
    EXPECT_EQ(errno, EXDEV) << "signal " << signo;
  }
  EXPECT_EQ(signals::flags().reconfigure, 1);
  EXPECT_EQ(signals::flags().quit, 1);
  signals::set_wake_fd(-1);
}

}  // namespace
}  // namespace vigil
