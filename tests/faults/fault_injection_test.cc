// HTTP traffic against a vigil built with VIGIL_FAULT_INJECTION while accept,
// recv, send, sendfile, epoll_ctl, open and the connection pool fail now and
// then (VIGIL_FAULTS, src/core/fault.h). Requests may fail; the workers may
// not: they must stay up, give every connection slot back (Active
// connections back to the status request alone) and leak no descriptor.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "harness.h"

namespace vigil {
namespace {

using test::Harness;

std::size_t open_fds(pid_t pid) {
  std::size_t n = 0;
  DIR* d = ::opendir(("/proc/" + std::to_string(pid) + "/fd").c_str());
  if (d == nullptr) return 0;
  while (const dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  ::closedir(d);
  return n;
}

// Sends `request` on a fresh connection and reads until the server closes
// (or 3 s pass): everything received.
std::string talk(int port, const std::string& request) {
  int fd = test::send_request(port, request);
  if (fd == -1) return "";
  std::string all = test::read_n(fd, 4 << 20, 3000);
  ::close(fd);
  return all;
}

// "Active connections: N" of /status, or -1 when the request failed.
long active_connections(int port) {
  const std::string r = talk(port, "GET /status HTTP/1.0\r\nHost: t\r\n\r\n");
  std::smatch m;
  if (!std::regex_search(r, m, std::regex("Active connections: (\\d+)"))) return -1;
  return std::stol(m[1]);
}

TEST(FaultInjection, WorkersSurviveAndGiveEverythingBack) {
  Harness h;
  ::chmod(h.dir().c_str(), 0755);
  ::mkdir((h.dir() + "/html").c_str(), 0755);
  std::ofstream(h.dir() + "/html/index.html") << "hello\n";
  std::ofstream(h.dir() + "/html/big.bin") << std::string(256 * 1024, 'b');
  const int port = test::free_port();
  h.set_binary(VIGIL_BINARY);
  h.write_raw_conf(
      "daemon off;\nerror_log stderr notice;\nworker_processes 2;\nevents { }\n"
      "http {\n  access_log off;\n  sendfile on;\n  server {\n    listen 127.0.0.1:" +
      std::to_string(port) +
      ";\n    root html;\n    location = /status { stub_status; }\n  }\n}\n");
  ::setenv("VIGIL_FAULTS", "accept=7,recv=13,send=11,sendfile=5,epoll_ctl=17,open=6,pool=9,seed=7",
           1);
  ASSERT_TRUE(h.start(2)) << h.log();
  ::unsetenv("VIGIL_FAULTS");
  ASSERT_EQ(h.count("fault injection active"), 2u) << "not a fault-injection build?\n" << h.log();
  const auto workers = h.started_workers();
  ASSERT_EQ(workers.size(), 2u);
  std::vector<std::size_t> fds_before;
  for (pid_t w : workers) fds_before.push_back(open_fds(w));

  std::atomic<std::size_t> ok{0}, failed{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&, t] {
      for (int i = 0; i < 150; ++i) {
        std::string req, want;
        switch ((i + t) % 3) {
          case 0:
            req = "GET / HTTP/1.0\r\nHost: t\r\n\r\n";
            want = "hello\n";
            break;
          case 1:  // keep-alive and pipelined, the file sent with sendfile
            req =
                "GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\nGET /big.bin HTTP/1.1\r\nHost: "
                "t\r\n\r\nGET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
            want = "hello\n";
            break;
          default:
            req = "GET /missing HTTP/1.0\r\nHost: t\r\n\r\n";
            want = "404";
            break;
        }
        const std::string r = talk(port, req);
        const bool good = r.size() >= want.size() && r.find(want) != std::string::npos;
        (good ? ok : failed).fetch_add(1);
      }
    });
  }
  for (auto& c : clients) c.join();
  EXPECT_GT(ok.load(), 0u);
  EXPECT_GT(failed.load(), 0u) << "no fault was felt: the injection did not run";

  // Every slot comes back: only the status request itself is active.
  long active = -1;
  for (int i = 0; i < 300 && active != 1; ++i) {
    active = active_connections(port);
    if (active != 1) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(active, 1) << h.log();
  for (std::size_t i = 0; i < workers.size(); ++i) {
    EXPECT_TRUE(test::alive(workers[i])) << "worker " << workers[i] << " died:\n" << h.log();
    // The status requests' own connections close right after the answer.
    std::size_t now = 0;
    for (int k = 0; k < 100 && (now = open_fds(workers[i])) != fds_before[i]; ++k) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_EQ(now, fds_before[i]) << "worker " << workers[i] << " leaks descriptors";
  }
  EXPECT_EQ(h.started_workers().size(), 2u) << "a worker was respawned:\n" << h.log();
  EXPECT_EQ(h.count("exited on signal"), 0u) << h.log();
}

}  // namespace
}  // namespace vigil
