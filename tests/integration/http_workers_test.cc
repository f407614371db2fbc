// The process model through the real vigil binary and its HTTP server:
// per-worker /metrics, reload under load with `vigil -s reload`, and a
// graceful stop that finishes a request in flight and closes an idle
// keep-alive connection.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdlib>
#include <fstream>
#include <mutex>
#include <string>

#include "harness.h"

namespace vigil {
namespace {

using test::Harness;

// The backend: VIGIL_TEST_USE when set (CTest runs this suite on io_uring too).
std::string events_block() {
  const char* use = std::getenv("VIGIL_TEST_USE");
  if (use == nullptr || *use == '\0') return "events { }\n";
  return std::string("events { use ") + use + "; }\n";
}

std::string http_conf(int port, int workers, const std::string& extra = "",
                      const std::string& listen_options = "") {
  return "daemon off;\nerror_log stderr notice;\nworker_processes " + std::to_string(workers) +
         ";\n" + extra + events_block() +
         "http {\n  access_log off;\n  server {\n    listen 127.0.0.1:" + std::to_string(port) +
         listen_options + ";\n    root html;\n    location = /metrics { metrics; }\n  }\n}\n";
}

// Starts vigil with `workers` workers on a port the kernel picks, then
// writes that port into the configuration (a reload then keeps the socket);
// the port, or -1.
int start_http(Harness& h, int workers) {
  h.write("html/index.html", "hello\n");
  h.set_binary(VIGIL_BINARY);
  h.write_raw_conf(http_conf(0, workers));
  if (!h.start(workers)) return -1;
  const int port = h.port();
  h.write_raw_conf(http_conf(port, workers));
  return port;
}

// What /metrics says worker `pid` accepted, or -1.
long accepted_by(const std::string& metrics, pid_t pid) {
  std::smatch m;
  std::regex re("vigil_worker_accepted_total\\{worker=\"\\d+\",pid=\"" + std::to_string(pid) +
                "\"\\} (\\d+)");
  if (!std::regex_search(metrics, m, re)) return -1;
  return std::stol(m[1]);
}

// A total of /metrics (one sample, no labels), or -1.
long total_of(const std::string& metrics, const std::string& name) {
  std::smatch m;
  if (!std::regex_search(metrics, m, std::regex("\n" + name + " (\\d+)\n"))) return -1;
  return std::stol(m[1]);
}

// One HTTP/1.0 request on a fresh connection: the whole response, "" on failure.
std::string http_get(int port, const std::string& path) {
  int fd = test::send_request(port, "GET " + path + " HTTP/1.0\r\nHost: t\r\n\r\n");
  if (fd == -1) return "";
  std::string all = test::read_n(fd, 1 << 20, 5000);
  ::close(fd);
  return all;
}

bool ok_hello(const std::string& response) {
  return response.rfind("HTTP/1.1 200", 0) == 0 && response.size() >= 6 &&
         response.compare(response.size() - 6, 6, "hello\n") == 0;
}

TEST(WorkersHttp, MetricsShowEveryWorkerAndWhatItAccepted) {
  Harness h;
  const int port = start_http(h, 2);
  ASSERT_GT(port, 0) << h.log();
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(ok_hello(http_get(port, "/"))) << i;
  std::string metrics = http_get(port, "/metrics");
  std::vector<pid_t> workers = h.started_workers();
  ASSERT_EQ(workers.size(), 2u);
  std::uint64_t accepted = 0;
  for (pid_t pid : workers) {
    std::smatch m;
    std::regex re("vigil_worker_accepted_total\\{worker=\"\\d+\",pid=\"" + std::to_string(pid) +
                  "\"\\} (\\d+)");
    ASSERT_TRUE(std::regex_search(metrics, m, re)) << metrics;
    accepted += std::stoull(m[1]);
    std::regex max("vigil_worker_connections_max\\{worker=\"\\d+\",pid=\"" + std::to_string(pid) +
                   "\"\\} 512");
    EXPECT_TRUE(std::regex_search(metrics, max)) << metrics;
  }
  EXPECT_EQ(accepted, 101u) << metrics;

  // The ring's own figures: requests and completions where the worker runs
  // io_uring (the 101 responses were sends through the ring), 0 elsewhere.
  const char* use = std::getenv("VIGIL_TEST_USE");
  const bool uring = use != nullptr && std::string(use) == "io_uring";
  std::uint64_t sqes = 0, cqes = 0;
  for (pid_t pid : workers) {
    const std::string label = "\\{worker=\"\\d+\",pid=\"" + std::to_string(pid) + "\"\\} (\\d+)";
    std::smatch m;
    ASSERT_TRUE(std::regex_search(metrics, m,
                                  std::regex("vigil_worker_uring_sqes_submitted_total" + label)))
        << metrics;
    sqes += std::stoull(m[1]);
    ASSERT_TRUE(
        std::regex_search(metrics, m, std::regex("vigil_worker_uring_cqes_reaped_total" + label)))
        << metrics;
    cqes += std::stoull(m[1]);
    EXPECT_TRUE(std::regex_search(
        metrics, std::regex("vigil_worker_uring_enters_per_pass\\{worker=\"\\d+\",pid=\"" +
                            std::to_string(pid) + "\"\\} [0-9.]+")))
        << metrics;
    EXPECT_TRUE(std::regex_search(
        metrics, std::regex("vigil_worker_uring_buffer_ring_misses_total" + label)))
        << metrics;
  }
  if (uring) {
    EXPECT_GE(sqes, 100u) << metrics;
    EXPECT_GE(cqes, 100u) << metrics;
  } else {
    EXPECT_EQ(sqes, 0u) << metrics;
    EXPECT_EQ(cqes, 0u) << metrics;
  }
}

TEST(WorkersHttp, ReloadUnderLoadLosesNoRequest) {
  Harness h;
  const int port = start_http(h, 2);
  ASSERT_GT(port, 0) << h.log();
  std::atomic<bool> done{false};
  std::atomic<std::size_t> ok{0}, failed{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&] {
      while (!done) (ok_hello(http_get(port, "/")) ? ok : failed)++;
    });
  }
  const int kReloads = 4;
  // Load runs between reloads: at least 50 answers each time.
  auto some_load = [&] {
    const std::size_t from = ok.load();
    return test::wait_for([&] { return ok.load() >= from + 50; }, 10000);
  };
  for (int i = 0; i < kReloads; ++i) {
    ASSERT_TRUE(some_load());
    // Every other reload through the command line, as an operator does it.
    if (i % 2 == 0) {
      auto [rc, out] =
          test::run({VIGIL_BINARY, "-p", h.dir(), "-c", "conf/h.conf", "-s", "reload"});
      EXPECT_EQ(rc, 0) << out;
    } else {
      h.proc().signal(SIGHUP);
    }
    ASSERT_TRUE(h.wait_log_count("reconfigured:", static_cast<std::size_t>(i + 1))) << h.log();
  }
  EXPECT_TRUE(some_load());  // the last generation answers too
  done = true;
  for (auto& t : clients) t.join();
  EXPECT_EQ(failed.load(), 0u) << h.log();
  EXPECT_GT(ok.load(), 100u);
  EXPECT_TRUE(h.wait_log_count("exited with code 0", kReloads * 2u)) << h.log();
  EXPECT_EQ(h.count("exited on signal"), 0u) << h.log();
  EXPECT_NE(h.log().find("(kept across reload)"), std::string::npos) << h.log();
}

// Two workers on one shared socket (io_uring: each has a multishot accept on
// it, and the kernel wakes only the first; the backend moves a busy one to
// the back every 16 connections) and on reuseport sockets: both take a fair
// part of one client's connections, and none is lost or left waiting. The
// totals are every worker's: each layer's block is in the shared zone.
TEST(WorkersHttp, TwoWorkersShareTheConnections) {
  for (const std::string options : {"", " reuseport"}) {
    Harness h;
    h.write("html/index.html", "hello\n");
    h.set_binary(VIGIL_BINARY);
    h.write_raw_conf(http_conf(0, 2, "", options));
    ASSERT_TRUE(h.start(2)) << h.log();
    const int port = h.port();
    const int kConnections = 200;
    for (int i = 0; i < kConnections; ++i) {
      ASSERT_TRUE(ok_hello(http_get(port, "/"))) << "listen" << options << ": " << i;
    }
    const std::string metrics = http_get(port, "/metrics");
    std::vector<pid_t> workers = h.started_workers();
    ASSERT_EQ(workers.size(), 2u);
    long total = 0;
    std::string shares;
    for (pid_t pid : workers) {
      const long n = accepted_by(metrics, pid);
      ASSERT_GE(n, 0) << metrics;
      total += n;
      shares += " " + std::to_string(n);
    }
    EXPECT_EQ(total, kConnections + 1) << metrics;
    EXPECT_EQ(total_of(metrics, "vigil_connections_accepted_total"), kConnections + 1) << metrics;
    EXPECT_EQ(total_of(metrics, "vigil_http_requests_total"), kConnections + 1) << metrics;
    for (pid_t pid : workers) {
      EXPECT_GE(accepted_by(metrics, pid), kConnections / 10)
          << "listen" << options << ", per worker:" << shares;
    }
    EXPECT_EQ(h.stop(true), 0);
  }
}

TEST(WorkersHttp, GracefulQuitFinishesARequestInFlightAndClosesIdleKeepAlive) {
  Harness h;
  const int port = start_http(h, 1);
  ASSERT_GT(port, 0) << h.log();
  pid_t worker = h.started_workers().at(0);

  // An idle keep-alive connection: one request answered, then nothing.
  int idle = test::send_request(port, "GET / HTTP/1.1\r\nHost: t\r\n\r\n");
  ASSERT_GE(idle, 0);
  std::string first = test::read_n(idle, 1 << 16, 300);
  ASSERT_TRUE(ok_hello(first)) << first;
  // A request whose head is half sent.
  int half = test::send_request(port, "GET / HTTP/1.0\r\nHost: t\r\n");
  ASSERT_GE(half, 0);
  // The worker has read it: one connection reading a request header.
  ASSERT_TRUE(test::wait_for([&] {
    return http_get(port, "/metrics").find("\nvigil_connections_reading 1\n") != std::string::npos;
  })) << http_get(port, "/metrics");

  h.proc().signal(SIGQUIT);
  auto t0 = test::now_ms();
  EXPECT_EQ(test::read_n(idle, 1, 3000), "") << "the idle keep-alive connection is closed";
  EXPECT_LT(test::now_ms() - t0, 1000);
  EXPECT_TRUE(test::holds_for([&] { return test::alive(worker); }, 700))
      << "the request in flight keeps its worker";
  ASSERT_EQ(::write(half, "\r\n", 2), 2);
  EXPECT_TRUE(ok_hello(test::read_n(half, 1 << 16, 3000)));
  EXPECT_EQ(h.wait_exit(5000), 0) << h.log();
  EXPECT_FALSE(test::alive(worker));
  ::close(idle);
  ::close(half);
}

}  // namespace
}  // namespace vigil
