#pragma once
// Running tests/support/worker_harness (the vigil runtime with a test-only
// protocol) as a real server: a scratch prefix, its configuration, the
// process, its log, and clients that talk to it. Everything it started is
// stopped when the object goes away, workers included.

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

#include "test_process.h"
#include "test_util.h"

namespace vigil::test {

inline const std::string kHarness = std::string(VIGIL_SUPPORT_DIR) + "/worker_harness";

// A port nothing listens on now (bound to port 0, then released).
inline int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof sa;
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) == 0) {
    port = ntohs(sa.sin_port);
  }
  ::close(fd);
  return port;
}

inline bool alive(pid_t pid) {
  return pid > 0 && ::kill(pid, 0) == 0;
}

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

// The pid a "/" body names ("<pid> <index>\n"); 0 when there is none.
inline pid_t body_pid(const std::string& body) {
  return body.empty() ? 0 : static_cast<pid_t>(std::atol(body.c_str()));
}

class Harness {
 public:
  Harness() {
    char tmpl[] = "/tmp/vigil_workers_XXXXXX";
    if (::mkdtemp(tmpl) != nullptr) dir_ = tmpl;
    // mkdtemp makes it 0700; workers started as root run as "nobody".
    ::chmod(dir_.c_str(), 0755);
    ::mkdir((dir_ + "/conf").c_str(), 0755);
    ::mkdir((dir_ + "/logs").c_str(), 0755);
  }
  ~Harness() {
    stop();
    run({"rm", "-rf", dir_});
  }
  Harness(const Harness&) = delete;
  Harness& operator=(const Harness&) = delete;

  const std::string& dir() const { return dir_; }
  std::string conf_path() const { return dir_ + "/conf/h.conf"; }
  std::string pid_path() const { return dir_ + "/logs/vigil.pid"; }

  // Writes conf/h.conf: `main` directives, then the events block.
  void write_conf(const std::string& main, const std::string& events) {
    std::ofstream(conf_path()) << "daemon off;\nerror_log stderr notice;\n"
                               << main << "\nevents {\n"
                               << events << "\n}\n";
  }

  // Writes conf/h.conf as given.
  void write_raw_conf(const std::string& text) { std::ofstream(conf_path()) << text; }
  // Runs `binary` (the real vigil, say) instead of worker_harness.
  void set_binary(const std::string& binary) { binary_ = binary; }
  const std::string& binary() const { return binary_; }

  // Starts the server and waits until `workers` worker processes run.
  bool start(int workers, int timeout_ms = 10000) {
    proc_ =
        std::make_unique<Process>(std::vector<std::string>{binary_, "-p", dir_, "-c", conf_path()});
    return wait_log_count("running:", workers, timeout_ms);
  }
  Process& proc() { return *proc_; }
  pid_t master() const { return proc_ ? proc_->pid() : -1; }

  // Reads what the server logged so far (without blocking long).
  const std::string& log() {
    if (proc_) proc_->wait_for_output("\x01\x02", 20);
    return proc_ ? proc_->output() : empty_;
  }
  std::size_t count(const std::string& needle) {
    const std::string& out = log();
    std::size_t n = 0;
    for (std::size_t at = out.find(needle); at != std::string::npos; at = out.find(needle, at + 1))
      ++n;
    return n;
  }
  bool wait_log(const std::string& needle, int timeout_ms = 5000) {
    return wait_log_count(needle, 1, timeout_ms);
  }
  bool wait_log_count(const std::string& needle, std::size_t n, int timeout_ms = 5000) {
    auto deadline = now_ms() + timeout_ms;
    while (count(needle) < n) {
      if (now_ms() > deadline) return false;
      if (proc_ && !alive(proc_->pid())) return count(needle) >= n;
    }
    return true;
  }

  // Pids of worker processes the master logged starting.
  std::vector<pid_t> started_workers() {
    std::vector<pid_t> pids;
    const std::string out = log();
    std::regex re("start worker process (\\d+)");
    for (auto it = std::sregex_iterator(out.begin(), out.end(), re); it != std::sregex_iterator();
         ++it) {
      pids.push_back(static_cast<pid_t>(std::stol((*it)[1])));
    }
    return pids;
  }

  // Waits for the master to exit (reaping it): its exit code, or -1 on timeout.
  int wait_exit(int timeout_ms = 10000) {
    if (!proc_) return -1;
    if (!exited_) {
      exit_code_ = proc_->wait(timeout_ms);
      exited_ = exit_code_ != -1;
    }
    return exit_code_;
  }

  // Stops the master (TERM) and makes sure no worker outlives the test.
  void stop() {
    if (!proc_) return;
    if (!exited_) {
      proc_->signal(SIGTERM);
      wait_exit(10000);
    }
    for (pid_t pid : started_workers()) {
      if (alive(pid)) ::kill(pid, SIGKILL);
    }
    proc_.reset();
  }

 private:
  std::string dir_;
  std::string binary_ = kHarness;
  std::unique_ptr<Process> proc_;
  bool exited_ = false;
  int exit_code_ = -1;
  std::string empty_;
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
