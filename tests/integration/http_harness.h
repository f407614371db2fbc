#pragma once
// Runs the real vigil binary for the HTTP integration tests: a temporary
// prefix (conf/, logs/, html/), a configuration written by the test, free
// ports found by binding port 0, and small socket clients that speak just
// enough HTTP/1.1 to check what the server sends.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "test_process.h"
#include "test_util.h"

namespace vigil::test {

inline const std::string kVigil = VIGIL_BINARY;

// A port nothing listens on right now (the kernel's choice for port 0).
inline int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0) {
    socklen_t len = sizeof sa;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) == 0) port = ntohs(sa.sin_port);
  }
  ::close(fd);
  return port;
}

// "use <VIGIL_TEST_USE>;" unless the events block names a backend itself.
inline std::string with_test_backend(const std::string& events) {
  const char* use = std::getenv("VIGIL_TEST_USE");
  if (use == nullptr || *use == '\0' || events.find("use ") != std::string::npos) return "";
  return std::string("\nuse ") + use + ";";
}

inline bool send_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

struct Response {
  int status = 0;
  std::string status_line;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string head;                            // the raw header block
  std::string body;
  bool complete = false;
  std::string header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? std::string() : it->second;
  }
  bool has(const std::string& name) const { return headers.count(name) != 0; }
};

// An owned client socket with a read buffer, reading responses one by one.
class Client {
 public:
  explicit Client(int port) : fd_(connect_loopback(port)) {}
  ~Client() { close(); }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  bool ok() const { return fd_ != -1; }
  int fd() const { return fd_; }
  void close() {
    if (fd_ != -1) ::close(fd_);
    fd_ = -1;
  }
  bool send(std::string_view s) { return send_all(fd_, s); }

  // Reads one response; `head_only` for HEAD (and 304) where a
  // Content-Length announces no body.
  Response read_response(bool head_only = false, int timeout_ms = 5000) {
    Response r;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    std::size_t end;
    while ((end = buf_.find("\r\n\r\n")) == std::string::npos) {
      if (!fill(deadline)) return r;
    }
    r.head = buf_.substr(0, end + 4);
    buf_.erase(0, end + 4);
    std::istringstream in(r.head);
    std::string line;
    std::getline(in, line);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    r.status_line = line;
    if (line.size() >= 12) r.status = std::atoi(line.c_str() + 9);
    while (std::getline(in, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      auto colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string name = line.substr(0, colon);
      for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      std::string value = line.substr(colon + 1);
      while (!value.empty() && value.front() == ' ') value.erase(0, 1);
      r.headers[name] = value;
    }
    std::size_t len = 0;
    if (!head_only && r.status != 304 && r.has("content-length")) {
      len = std::stoull(r.header("content-length"));
    }
    while (buf_.size() < len) {
      if (!fill(deadline)) return r;
    }
    r.body = buf_.substr(0, len);
    buf_.erase(0, len);
    r.complete = true;
    return r;
  }

  // True when the server closes the connection (EOF or reset) within the
  // time, with nothing more sent (anything sent is kept in extra()).
  bool closed_within(int timeout_ms) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                      deadline - std::chrono::steady_clock::now())
                      .count();
      if (left <= 0) return false;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left)) <= 0) return false;
      char tmp[4096];
      ssize_t n = ::recv(fd_, tmp, sizeof tmp, 0);
      if (n == 0) return true;
      if (n < 0) return errno == ECONNRESET;
      buf_.append(tmp, static_cast<std::size_t>(n));
    }
  }
  const std::string& extra() const { return buf_; }

 private:
  bool fill(std::chrono::steady_clock::time_point deadline) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) return false;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) return false;
    char tmp[65536];
    ssize_t n = ::recv(fd_, tmp, sizeof tmp, 0);
    if (n <= 0) return false;
    buf_.append(tmp, static_cast<std::size_t>(n));
    return true;
  }

  int fd_;
  std::string buf_;
};

// A temporary prefix with a running vigil.
class VigilServer {
 public:
  VigilServer() {
    char tmpl[] = "/tmp/vigil_http_XXXXXX";
    if (::mkdtemp(tmpl) != nullptr) dir_ = tmpl;
    // mkdtemp makes it 0700: run as root with a master, the workers serve as
    // "nobody" (the default user) and must be able to reach html/.
    ::chmod(dir_.c_str(), 0755);
    for (const char* d : {"/conf", "/logs", "/html"}) ::mkdir((dir_ + d).c_str(), 0755);
  }
  ~VigilServer() {
    stop();
    if (!dir_.empty()) run({"rm", "-rf", dir_});
  }
  VigilServer(const VigilServer&) = delete;
  VigilServer& operator=(const VigilServer&) = delete;

  const std::string& dir() const { return dir_; }
  std::string path(const std::string& rel) const { return dir_ + "/" + rel; }
  void write(const std::string& rel, const std::string& content) {
    std::string full = path(rel);
    // Create parent directories.
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

  // Writes conf/vigil.conf: `main` directives, an events block, and `http`
  // as the body of the http block; starts the server and waits for it.
  // The backend is the events block's `use`, or VIGIL_TEST_USE (CTest runs
  // the HTTP suites once more with VIGIL_TEST_USE=io_uring).
  bool start(const std::string& http, const std::string& main = "",
             const std::string& events = "worker_connections 1024;") {
    std::string conf =
        "daemon off;\nmaster_process off;\nerror_log stderr info;\n"
        "pid logs/vigil.pid;\n" +
        main + "\nevents {\n" + events + with_test_backend(events) + "\n}\nhttp {\n" + http +
        "\n}\n";
    write("conf/vigil.conf", conf);
    proc_ = std::make_unique<Process>(
        std::vector<std::string>{kVigil, "-p", dir_, "-c", "conf/vigil.conf"});
    return proc_->wait_for_output("started");
  }
  // SIGTERM and wait; returns the exit code.
  int stop() {
    if (!proc_) return 0;
    proc_->signal(SIGTERM);
    int rc = proc_->wait();
    last_output_ = proc_->output();
    proc_.reset();
    // Under the asan preset the server is instrumented too: anything it
    // reported fails the test that ran it.
    if (last_output_.find("Sanitizer") != std::string::npos ||
        last_output_.find("runtime error:") != std::string::npos) {
      ADD_FAILURE() << "the server reported:\n" << last_output_;
    }
    if (rc != 0) ADD_FAILURE() << "the server exited with " << rc << ":\n" << last_output_;
    return rc;
  }
  Process& process() { return *proc_; }
  // Waits until the server's output (error log on stderr) contains `needle`.
  bool wait_output(const std::string& needle, int timeout_ms = 3000) {
    return proc_ && proc_->wait_for_output(needle, timeout_ms);
  }
  std::string output() const { return proc_ ? proc_->output() : last_output_; }

 private:
  std::string dir_;
  std::unique_ptr<Process> proc_;
  std::string last_output_;
};

// One request on a fresh connection.
inline Response get(int port, const std::string& request, bool head_only = false) {
  Client c(port);
  if (!c.ok() || !c.send(request)) return {};
  return c.read_response(head_only);
}

inline std::string simple_get(const std::string& target, const std::string& host = "localhost",
                              const std::string& extra = "") {
  return "GET " + target + " HTTP/1.1\r\nHost: " + host + "\r\n" + extra + "\r\n";
}

}  // namespace vigil::test
