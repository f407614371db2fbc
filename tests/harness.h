#pragma once
// Running tests/support/worker_harness (the vigil runtime with a test-only
// protocol) as a real server, through the one server harness
// (server_harness.h), and HTTP/1.0 clients that talk to it.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "server_harness.h"
#include "test_process.h"
#include "test_util.h"

namespace vigil::test {

inline std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Sends `head` (a request head, complete or not) and returns the socket; -1 on failure.
inline int send_request(int port, const std::string& head) {
  int fd = connect_loopback(port);
  if (fd == -1) return -1;
  if (!head.empty() && ::write(fd, head.data(), head.size()) != static_cast<ssize_t>(head.size())) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Reads the whole response (until EOF) and returns its body; "" on failure
// or timeout.
inline std::string read_body(int fd, int timeout_ms = 5000) {
  std::string all = read_n(fd, 1 << 20, timeout_ms);
  std::size_t at = all.find("\r\n\r\n");
  if (all.rfind("HTTP/1.0 200 OK", 0) != 0 || at == std::string::npos) return "";
  return all.substr(at + 4);
}

// One request on a fresh connection; the body, or "" on failure.
inline std::string get(int port, const std::string& path = "/", int timeout_ms = 5000) {
  int fd = send_request(port, "GET " + path + " HTTP/1.0\r\n\r\n");
  if (fd == -1) return "";
  std::string body = read_body(fd, timeout_ms);
  ::close(fd);
  return body;
}

// Requests the harness's workers started (from its /metrics), this one
// included; -1 when it does not answer.
inline long requests_started(int port) {
  std::string body = get(port, "/metrics");
  std::size_t at = body.find("requests ");
  return at == std::string::npos ? -1 : std::atol(body.c_str() + at + 9);
}

// The pid a "/" body names ("<pid> <index>\n"); 0 when there is none.
inline pid_t body_pid(const std::string& body) {
  return body.empty() ? 0 : static_cast<pid_t>(std::atol(body.c_str()));
}

// ServerProcess running worker_harness (or, after set_binary, the real
// vigil) on conf/h.conf, with the entry points the worker tests use.
class Harness : public ServerProcess {
 public:
  Harness() : ServerProcess(kHarness, "h.conf") {}

  // Writes conf/h.conf: `main` directives, then the events block.
  void write_conf(const std::string& main, const std::string& events) {
    ServerProcess::write_conf("daemon off;\nerror_log stderr notice;\n" + main + "\nevents {\n" +
                              events + "\n}\n");
  }
  // Writes conf/h.conf as given.
  void write_raw_conf(const std::string& text) { ServerProcess::write_conf(text); }

  // A barrier with the master: SIGUSR1, then waits for the master to log
  // its "reopening logs". The master handles signals in order, so whatever
  // it was going to do about earlier events (a worker's exit, a reload) is
  // logged by then. For checking that something did NOT happen.
  bool master_barrier(int timeout_ms = 5000) {
    const std::string line = std::to_string(master()) + "#0: reopening logs";
    const std::size_t before = count(line);
    signal(SIGUSR1);
    return wait_log_count(line, before + 1, timeout_ms);
  }

  // Starts the server and waits until `workers` worker processes run.
  bool start(int workers, int timeout_ms = 10000) {
    return launch("running:", static_cast<std::size_t>(workers), timeout_ms);
  }
};

// Results of a client load: how many requests succeeded per worker pid, and
// how many failed.
struct LoadResult {
  std::map<pid_t, std::size_t> per_pid;
  std::size_t ok = 0;
  std::size_t failed = 0;
};

// `total` requests on fresh connections from `clients` threads (path `path`).
inline LoadResult run_load(int port, std::size_t total, int clients,
                           const std::string& path = "/") {
  std::atomic<std::size_t> next{0};
  std::vector<LoadResult> parts(static_cast<std::size_t>(clients));
  std::vector<std::thread> threads;
  for (int t = 0; t < clients; ++t) {
    threads.emplace_back([&, t] {
      LoadResult& r = parts[static_cast<std::size_t>(t)];
      while (next.fetch_add(1) < total) {
        pid_t pid = body_pid(get(port, path));
        if (pid > 0) {
          ++r.per_pid[pid];
          ++r.ok;
        } else {
          ++r.failed;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  LoadResult all;
  for (const LoadResult& r : parts) {
    for (auto [pid, n] : r.per_pid) all.per_pid[pid] += n;
    all.ok += r.ok;
    all.failed += r.failed;
  }
  return all;
}

}  // namespace vigil::test
