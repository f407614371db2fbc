// Signals in a tight loop while the workers serve: the handlers only set
// flags and write to the loop's eventfd, so a storm of them costs passes of
// the loop, never a request, a crash or a stuck worker.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <atomic>
#include <fstream>
#include <string>
#include <thread>

#include "harness.h"

namespace vigil {
namespace {

using test::Harness;

TEST(SignalStorm, WorkersServeEveryRequestWhileSignalled) {
  Harness h;
  ::chmod(h.dir().c_str(), 0755);
  ::mkdir((h.dir() + "/html").c_str(), 0755);
  std::ofstream(h.dir() + "/html/index.html") << "hello\n";
  const int port = test::free_port();
  h.set_binary(VIGIL_BINARY);
  h.write_raw_conf(
      "daemon off;\nerror_log stderr notice;\nworker_processes 2;\nevents { }\n"
      "http {\n  access_log logs/access.log buffer=4k;\n  server {\n    listen "
      "127.0.0.1:" +
      std::to_string(port) + ";\n    root html;\n  }\n}\n");
  ASSERT_TRUE(h.start(2)) << h.log();
  const auto workers = h.started_workers();
  ASSERT_EQ(workers.size(), 2u);

  std::atomic<bool> done{false};
  std::atomic<long> sent{0};
  std::thread storm([&] {
    // USR1 makes each worker reopen its logs; CHLD only sets a flag and wakes
    // the loop. The master gets CHLD with no child to reap.
    while (!done.load()) {
      for (pid_t w : workers) {
        ::kill(w, SIGCHLD);
        ::kill(w, (sent.load() % 16 == 0) ? SIGUSR1 : SIGCHLD);
      }
      ::kill(h.master(), SIGCHLD);
      sent.fetch_add(1);
    }
  });
  std::size_t ok = 0, failed = 0;
  for (int i = 0; i < 1500; ++i) {
    if (i % 50 == 0) (void)h.log();  // drain the pipe the workers log into
    int fd = test::send_request(port, "GET / HTTP/1.0\r\nHost: t\r\n\r\n");
    const std::string all = fd == -1 ? "" : test::read_n(fd, 1 << 16, 5000);
    if (fd != -1) ::close(fd);
    const bool good = all.rfind("HTTP/1.1 200", 0) == 0 && all.size() >= 6 &&
                      all.compare(all.size() - 6, 6, "hello\n") == 0;
    (good ? ok : failed)++;
  }
  done = true;
  storm.join();
  EXPECT_EQ(failed, 0u) << h.log();
  EXPECT_EQ(ok, 1500u);
  EXPECT_GT(sent.load(), 100) << "the storm did not run";
  for (pid_t w : workers) EXPECT_TRUE(test::alive(w)) << "worker " << w << " died";
  EXPECT_EQ(h.started_workers().size(), 2u) << "a worker was respawned:\n" << h.log();
  EXPECT_EQ(h.count("[alert]"), 0u) << h.log();
  EXPECT_EQ(h.count("[emerg]"), 0u) << h.log();
}

}  // namespace
}  // namespace vigil
