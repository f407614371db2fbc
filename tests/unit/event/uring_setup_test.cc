// io_uring's ring setup choices (uring.cc): SINGLE_ISSUER | DEFER_TASKRUN
// first, started disabled and enabled by the thread that first runs the
// loop; COOP_TASKRUN and plain rings as fallbacks (VIGIL_URING_SETUP picks
// them here). Each choice must serve connections end to end, with the loop
// created on one thread and run on another, as a library user may do.
#include <gtest/gtest.h>

#if VIGIL_HAVE_URING
#include <liburing.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "event/backends/uring.h"
#include "test_util.h"
#include "vigil/core/log.h"
#include "vigil/event/connection.h"
#include "vigil/event/listening.h"
#include "vigil/event/loop.h"

namespace vigil {
namespace {

void echo_read(Event& rev) {
  auto& c = *rev.owner<Connection>();
  char buf[4096];
  for (;;) {
    const long n = c.recv(c, buf, sizeof buf);
    if (n == kIoAgain) break;
    if (n <= 0 || c.send(c, buf, static_cast<std::size_t>(n)) != n) {
      c.loop->pool().close_connection(c);
      return;
    }
  }
  if (!c.loop->handle_read_event(rev)) c.loop->pool().close_connection(c);
}

void echo_accept(Connection& c) {
  c.read->handler = echo_read;
  if (!c.loop->handle_read_event(*c.read)) c.loop->pool().close_connection(c);
}

class UringSetup : public ::testing::TestWithParam<std::string> {};

TEST_P(UringSetup, EchoesWithTheLoopRunOnAnotherThread) {
  const std::string flags = GetParam();
  if (!flags.empty()) ::setenv("VIGIL_URING_SETUP", flags.c_str(), 1);
  EventLoopConfig cfg;
  cfg.use = "io_uring";
  cfg.connections = 64;
  auto r = EventLoop::create(cfg, Log::global());
  ::unsetenv("VIGIL_URING_SETUP");
  ASSERT_TRUE(r) << "io_uring refused: " << r.status().to_string();
  EventLoop& loop = *r.value();
  const unsigned setup = static_cast<backends::UringBackend&>(loop.backend()).setup_flags();
  if (flags.empty()) {
    // Where the kernel offers it (6.1), the deferred mode is chosen, and
    // only with SINGLE_ISSUER and R_DISABLED.
    if (setup & IORING_SETUP_DEFER_TASKRUN) {
      EXPECT_TRUE(setup & IORING_SETUP_SINGLE_ISSUER);
      EXPECT_TRUE(setup & IORING_SETUP_R_DISABLED);
    }
  } else {
    EXPECT_FALSE(setup & IORING_SETUP_DEFER_TASKRUN);
    EXPECT_EQ((setup & IORING_SETUP_COOP_TASKRUN) != 0, flags == "0x100");
  }

  Listening ls;
  ls.handler = echo_accept;
  ASSERT_TRUE(ls.set_address("127.0.0.1:0"));
  ASSERT_TRUE(ls.open());
  ASSERT_TRUE(loop.add_listening(ls));  // queued on this thread, not submitted
  loop.notify_event().handler = [](Event& ev) { static_cast<EventLoop*>(ev.data)->stop(); };

  std::thread runner([&] { loop.run(); });
  std::vector<int> clients;
  bool all_echoed = true;
  for (int i = 0; i < 20; ++i) {
    int fd = test::connect_loopback(ls.port());
    ASSERT_GE(fd, 0);
    clients.push_back(fd);
    const std::string msg = "ping " + std::to_string(i);
    ASSERT_EQ(::write(fd, msg.data(), msg.size()), static_cast<ssize_t>(msg.size()));
    if (test::read_n(fd, msg.size(), 3000) != msg) all_echoed = false;
  }
  EXPECT_TRUE(all_echoed);
  ASSERT_TRUE(loop.backend().notify());
  runner.join();
  for (int fd : clients) ::close(fd);
  for (std::size_t i = 0; i < loop.pool().size(); ++i) {
    Connection& c = loop.pool().connections()[i];
    if (c.fd != -1 && &c != ls.connection) loop.pool().close_connection(c);
  }
}

INSTANTIATE_TEST_SUITE_P(Flags, UringSetup, ::testing::Values("", "0x100", "0x0"),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           return p.param.empty()      ? std::string("Default")
                                  : p.param == "0x100" ? std::string("Coop")
                                                       : std::string("Plain");
                         });

}  // namespace
}  // namespace vigil

#endif  // VIGIL_HAVE_URING
