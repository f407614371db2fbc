#pragma once
// The one harness for tests that run a server program (the real vigil, or
// tests/support/worker_harness): a scratch prefix (conf/, logs/, html/), the
// configuration the test writes, the process and its log, and the ports it
// listens on. Everything it started is stopped when the object goes away,
// worker processes included.
//
// Ports: configure `listen 127.0.0.1:0` and ask port() after start(). The
// server binds a port the kernel chooses and logs "listening on
// 127.0.0.1:41235"; nothing is found by binding and releasing a port, so two
// tests running at once never race for one. A reload that names the port the
// server got keeps its socket (see Listening::open).
//
// tests/harness.h (Harness) and tests/integration/http_harness.h
// (VigilServer) are thin wrappers over this class, kept for the tests written
// against them.

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "test_process.h"
#include "test_util.h"

namespace vigil::test {

inline const std::string kVigil = VIGIL_BINARY;
inline const std::string kHarness = std::string(VIGIL_SUPPORT_DIR) + "/worker_harness";

inline bool alive(pid_t pid) {
  return pid > 0 && ::kill(pid, 0) == 0;
}

class ServerProcess {
 public:
  explicit ServerProcess(std::string binary = kVigil, std::string conf_name = "vigil.conf")
      : binary_(std::move(binary)), conf_name_(std::move(conf_name)) {
    char tmpl[] = "/tmp/vigil_test_XXXXXX";
    if (::mkdtemp(tmpl) != nullptr) dir_ = tmpl;
    // Searchable by everyone: run as root, workers serve as "nobody", and
    // the prefix holds their docroot (mkdtemp makes it 0700).
    if (!dir_.empty()) ::chmod(dir_.c_str(), 0755);
    for (const char* d : {"/conf", "/logs", "/html"}) ::mkdir((dir_ + d).c_str(), 0755);
  }
  virtual ~ServerProcess() {
    stop_quietly();
    if (!dir_.empty()) run({"rm", "-rf", dir_});
  }
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  // ---- the prefix ----
  const std::string& dir() const { return dir_; }
  std::string path(const std::string& rel) const { return dir_ + "/" + rel; }
  std::string conf_path() const { return path("conf/" + conf_name_); }
  std::string pid_path() const { return path("logs/vigil.pid"); }
  // Writes a file under the prefix, creating its directories.
  void write(const std::string& rel, const std::string& content) {
    std::string full = path(rel);
    for (std::size_t i = dir_.size() + 1; i < full.size(); ++i) {
      if (full[i] == '/') ::mkdir(full.substr(0, i).c_str(), 0755);
    }
    std::ofstream(full, std::ios::binary) << content;
  }
  std::string read(const std::string& rel) const {
    std::ifstream f(path(rel), std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  void write_conf(const std::string& text) { write("conf/" + conf_name_, text); }
  void set_binary(const std::string& binary) { binary_ = binary; }
  const std::string& binary() const { return binary_; }

  // ---- the process ----
  // Runs `binary -p DIR -c CONF` and waits until its log shows `ready`
  // `count` times (e.g. "running:" once per worker); false if it did not.
  bool launch(const std::string& ready, std::size_t count = 1, int timeout_ms = 10000) {
    proc_ = std::make_unique<Process>(
        std::vector<std::string>{binary_, "-p", dir_, "-c", conf_path()});
    exited_ = false;
    exit_code_ = -1;
    return count == 0 || wait_log_count(ready, count, timeout_ms);
  }
  bool running() const { return proc_ != nullptr; }
  Process& proc() { return *proc_; }
  pid_t master() const { return proc_ ? proc_->pid() : -1; }
  void signal(int sig) {
    if (proc_) proc_->signal(sig);
  }

  // What the server logged so far (its stderr), reading what is pending.
  const std::string& log() {
    if (!proc_) return last_output_;
    proc_->wait_for_output("\x01\x02", 5);
    return proc_->output();
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
  // Waits until `needle` appears `n` times; gives up early when the server
  // exits without logging it.
  bool wait_log_count(const std::string& needle, std::size_t n, int timeout_ms = 5000) {
    bool gone = false;
    wait_for(
        [&] {
          if (count(needle) >= n) return true;
          // Reaped here when it has exited (a zombie still answers kill(0)).
          gone = proc_ == nullptr || !alive(proc_->pid()) || wait_exit(0) != -1;
          return gone;
        },
        timeout_ms, 0);
    return count(needle) >= n;
  }

  // Every "listening on HOST:PORT" the server logged, in order (a reload
  // logs its set again).
  std::vector<int> listen_ports() {
    std::vector<int> ports;
    const std::string out = log();
    static const std::regex re("listening on [^ \\n]*:(\\d+)");
    for (auto it = std::sregex_iterator(out.begin(), out.end(), re); it != std::sregex_iterator();
         ++it) {
      ports.push_back(std::stoi((*it)[1]));
    }
    return ports;
  }
  // The port of the i-th listener the server reported at its start, waiting
  // for it to be logged; -1 when it never is.
  int port(std::size_t i = 0, int timeout_ms = 5000) {
    std::vector<int> ports;
    wait_for([&] { return (ports = listen_ports()).size() > i; }, timeout_ms);
    return ports.size() > i ? ports[i] : -1;
  }

  // The port of the first listener logged on `host` ("127.0.0.1",
  // "0.0.0.0", "[::1]"), waiting for it; -1 when it never is.
  int port_of(const std::string& host, int timeout_ms = 5000) {
    const std::string prefix = "listening on " + host + ":";
    int port = -1;
    wait_for(
        [&] {
          const std::string& out = log();
          std::size_t at = out.find(prefix);
          if (at != std::string::npos) port = std::atoi(out.c_str() + at + prefix.size());
          return port > 0;
        },
        timeout_ms);
    return port;
  }

  // Pids of the worker processes the master logged starting.
  std::vector<pid_t> started_workers() {
    std::vector<pid_t> pids;
    const std::string out = log();
    static const std::regex re("start worker process (\\d+)");
    for (auto it = std::sregex_iterator(out.begin(), out.end(), re); it != std::sregex_iterator();
         ++it) {
      pids.push_back(static_cast<pid_t>(std::stol((*it)[1])));
    }
    return pids;
  }

  // Waits for the server to exit (reaping it): its exit code, -1 on timeout.
  int wait_exit(int timeout_ms = 10000) {
    if (!proc_) return exit_code_;
    if (!exited_) {
      int rc = proc_->wait(timeout_ms);  // the exit code again if it was reaped already
      if (rc != -1) {
        exited_ = true;
        exit_code_ = rc;
      }
      return rc;
    }
    return exit_code_;
  }

  // SIGTERM, wait, and make sure no worker outlives the test. With
  // `check`, an exit code other than 0 or anything a sanitizer reported
  // fails the test. Returns the exit code.
  int stop(bool check = false) {
    if (!proc_) return 0;
    if (!exited_) {
      proc_->signal(SIGTERM);
      wait_exit(10000);
    }
    for (pid_t pid : started_workers()) {
      if (alive(pid)) ::kill(pid, SIGKILL);
    }
    last_output_ = proc_->output();
    proc_.reset();
    int rc = exit_code_;
    if (check) {
      // Under the asan preset the server is instrumented too.
      if (last_output_.find("Sanitizer") != std::string::npos ||
          last_output_.find("runtime error:") != std::string::npos) {
        ADD_FAILURE() << "the server reported:\n" << last_output_;
      }
      if (rc != 0) ADD_FAILURE() << "the server exited with " << rc << ":\n" << last_output_;
    }
    return rc;
  }

 protected:
  void stop_quietly() { stop(false); }

 private:
  std::string binary_;
  std::string conf_name_;
  std::string dir_;
  std::unique_ptr<Process> proc_;
  bool exited_ = false;
  int exit_code_ = -1;
  std::string last_output_;
};

}  // namespace vigil::test
