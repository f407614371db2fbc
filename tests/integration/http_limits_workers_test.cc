// Request limits with two worker processes: the zones are shared memory, so
// the limits are global, not per worker, and a reload keeps their state.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>

#include <fstream>
#include <regex>
#include <set>
#include <string>

#include "harness.h"

namespace vigil {
namespace {

// The status of one request on a fresh connection (0 on failure).
int status_of(int port, const std::string& path) {
  int fd = test::send_request(port, "GET " + path + " HTTP/1.0\r\nHost: t\r\n\r\n");
  if (fd == -1) return 0;
  std::string all = test::read_n(fd, 1 << 20, 5000);
  ::close(fd);
  if (all.size() < 12 || all.rfind("HTTP/1.1 ", 0) != 0) return 0;
  return std::atoi(all.c_str() + 9);
}

// ---- two workers -------------------------------------------------------------

std::string workers_conf(int port, const std::string& http) {
  return "daemon off;\nerror_log stderr info;\nworker_processes 2;\nevents { }\nhttp {\n"
         "  access_log off;\n" +
         http + "\n  server {\n    listen 127.0.0.1:" + std::to_string(port) +
         " reuseport;\n    root html;\n"
         "    location /big { limit_conn c 1; limit_rate 8k; }\n"
         "    location /small { limit_conn c 1; }\n"
         "    location /once { limit_req zone=r nodelay; }\n  }\n}\n";
}

void start_workers(test::Harness& h, int port) {
  ::mkdir((h.dir() + "/html").c_str(), 0755);
  std::ofstream(h.dir() + "/html/big") << std::string(64 * 1024, 'b');
  std::ofstream(h.dir() + "/html/small") << "s\n";
  std::ofstream(h.dir() + "/html/once") << "o\n";
  h.set_binary(VIGIL_BINARY);
  h.write_raw_conf(workers_conf(port,
                                "limit_conn_zone $binary_remote_addr zone=c:1m;\n"
                                "limit_req_zone $binary_remote_addr zone=r:1m rate=1r/m;\n"));
  ASSERT_TRUE(h.start(2)) << h.log();
}

// The pids of the workers that logged `what`.
std::set<std::string> pids_logging(const std::string& log, const std::string& what) {
  std::set<std::string> pids;
  std::regex re("(\\d+)#\\d+: \\*\\d+ " + what);
  for (auto it = std::sregex_iterator(log.begin(), log.end(), re); it != std::sregex_iterator();
       ++it) {
    pids.insert((*it)[1]);
  }
  return pids;
}

TEST(HttpLimitsWorkers, LimitConnIsGlobalAcrossWorkers) {
  test::Harness h;
  const int port = test::free_port();
  start_workers(h, port);
  int slow = test::send_request(port, "GET /big HTTP/1.0\r\nHost: t\r\n\r\n");
  ASSERT_NE(slow, -1);
  // The throttled response is in progress once its first bytes arrive.
  pollfd p{slow, POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 5000), 1);
  // reuseport spreads the connections over both workers by their ports:
  // every one is refused, whichever worker took it.
  for (int i = 0; i < 24; ++i) EXPECT_EQ(status_of(port, "/small"), 503) << i;
  EXPECT_EQ(pids_logging(h.log(), "limiting connections by zone \"c\"").size(), 2u) << h.log();
  ::close(slow);
  // The worker notices at its next write that the client left.
  bool freed = false;
  for (int i = 0; i < 100 && !freed; ++i) {
    freed = status_of(port, "/small") == 200;
    if (!freed) ::usleep(50000);
  }
  EXPECT_TRUE(freed) << h.log();
}

TEST(HttpLimitsWorkers, LimitReqZoneIsSharedAndSurvivesReload) {
  test::Harness h;
  const int port = test::free_port();
  start_workers(h, port);
  // 1r/m, no burst: one request in the minute, whichever worker serves it.
  int ok = 0;
  int refused = 0;
  for (int i = 0; i < 16; ++i) {
    const int st = status_of(port, "/once");
    ok += st == 200;
    refused += st == 503;
  }
  EXPECT_EQ(ok, 1);
  EXPECT_EQ(refused, 15);
  EXPECT_EQ(pids_logging(h.log(), "limiting requests").size(), 2u) << h.log();

  // A reload keeps the zone (same name, size and use): still refused.
  h.proc().signal(SIGHUP);
  ASSERT_TRUE(h.wait_log("reconfigured:")) << h.log();
  for (int i = 0; i < 8; ++i) EXPECT_EQ(status_of(port, "/once"), 503) << i;
}

}  // namespace
}  // namespace vigil
