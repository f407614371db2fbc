// select(2)'s hard limit: FD_SETSIZE bits per fd_set (src/event/backends/select.cc).

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <string>

#include <gtest/gtest.h>

#include "unit/event/backend_fixture.h"

namespace vigil::test {
namespace {

TEST(Select, RefusesMoreConnectionsThanFdSetsize) {
  Log log;
  EventLoopConfig cfg;
  cfg.use = "select";
  cfg.connections = 2048;
  auto loop = EventLoop::create(cfg, log);
  ASSERT_FALSE(loop.is_ok());
  EXPECT_EQ(loop.status().message(), "the maximum number of files supported by select() is 1024");
}

TEST(Select, RefusesAnFdPastFdSetsize) {
  rlimit rl{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &rl), 0);
  if (rl.rlim_max < 1600) GTEST_SKIP() << "RLIMIT_NOFILE too low to open fd 1500";
  if (rl.rlim_cur < 1600) {
    rl.rlim_cur = 1600;
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &rl), 0);
  }
  Log log;
  log.set_level(LogLevel::kError);
  EventLoopConfig cfg;
  cfg.use = "select";
  cfg.connections = 16;
  auto loop = EventLoop::create(cfg, log);
  ASSERT_TRUE(loop.is_ok()) << loop.status().to_string();

  auto [fd, peer] = unix_pair();
  ASSERT_EQ(::dup3(fd, 1500, O_CLOEXEC), 1500);
  ::close(fd);
  Connection* c = loop.value()->pool().get(1500, log);
  ASSERT_NE(c, nullptr);
  Status st = loop.value()->backend().add(*c->read, kEvLevel);
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("FD_SETSIZE"), std::string::npos) << st.message();
  EXPECT_FALSE(c->read->active);
  loop.value()->pool().close_connection(*c);
}

}  // namespace
}  // namespace vigil::test
