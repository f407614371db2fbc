#pragma once
// The differential test's machinery (nginx_diff_test.cc): real nginx and
// Vigil started on one document root with equivalent configurations, a raw
// exchange over a TCP socket (the request's bytes as given, malformed or
// not), and a digest of what each server answered, restricted to what must
// agree (no Server, no Date, no error page wording).

#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "http_harness.h"
#include "test_process.h"
#include "test_util.h"

namespace vigil::test {

inline constexpr char kNginx[] = "/usr/sbin/nginx";

// A port on 127.0.0.1 reserved for a program that cannot listen on port 0
// and tell which port it got (nginx): a socket bound with SO_REUSEADDR but
// never listening holds the port against every other bind, while a program
// binding it with SO_REUSEADDR too (nginx always does) can still bind and
// listen on it.
class ReservedPort {
 public:
  ReservedPort() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof sa;
    if (fd_ != -1 && ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0 &&
        ::bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0 &&
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&sa), &len) == 0) {
      port_ = ntohs(sa.sin_port);
    }
  }
  ~ReservedPort() {
    if (fd_ != -1) ::close(fd_);
  }
  ReservedPort(const ReservedPort&) = delete;
  ReservedPort& operator=(const ReservedPort&) = delete;
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = -1;
};

// Real nginx in one process (master_process off, daemon off) in a scratch
// prefix of its own, serving `root`.
class NginxServer {
 public:
  NginxServer() {
    char tmpl[] = "/tmp/vigil_nginx_XXXXXX";
    if (::mkdtemp(tmpl) != nullptr) dir_ = tmpl;
    for (const char* d : {"/conf", "/logs", "/tmp"}) ::mkdir((dir_ + d).c_str(), 0755);
  }
  ~NginxServer() {
    stop();
    if (!dir_.empty()) run({"rm", "-rf", dir_});
  }
  NginxServer(const NginxServer&) = delete;
  NginxServer& operator=(const NginxServer&) = delete;

  // Writes the configuration (`http` is the body of the http block, with
  // PORT standing for the reserved port), starts nginx and polls until it
  // accepts connections. On failure, error() says why.
  bool start(const std::string& http) {
    if (::access(kNginx, X_OK) != 0) {
      error_ = std::string(kNginx) +
               " is missing: this test compares Vigil with real nginx (CI installs it with the "
               "nginx-light package, see .ci/run; locally: apt-get install nginx-light)";
      return false;
    }
    if (dir_.empty() || port_.port() <= 0) {
      error_ = "no scratch directory or no port";
      return false;
    }
    std::string body = http;
    for (std::size_t at; (at = body.find("PORT")) != std::string::npos;) {
      body.replace(at, 4, std::to_string(port_.port()));
    }
    const std::string tmp = dir_ + "/tmp/";
    std::ofstream(dir_ + "/conf/nginx.conf")
        << "daemon off;\nmaster_process off;\nworker_processes 1;\n"
        << "error_log " << dir_ << "/logs/error.log info;\npid " << dir_ << "/logs/nginx.pid;\n"
        << "events { worker_connections 256; }\nhttp {\n"
        << "client_body_temp_path " << tmp << "body;\nproxy_temp_path " << tmp << "proxy;\n"
        << "fastcgi_temp_path " << tmp << "fastcgi;\nuwsgi_temp_path " << tmp << "uwsgi;\n"
        << "scgi_temp_path " << tmp << "scgi;\n"
        << body << "\n}\n";
    proc_ = std::make_unique<Process>(std::vector<std::string>{
        kNginx, "-p", dir_ + "/", "-c", dir_ + "/conf/nginx.conf", "-e", dir_ + "/logs/error.log"});
    bool exited = false;
    const bool up = wait_for(
        [&] {
          siginfo_t info{};
          if (::waitid(P_PID, static_cast<id_t>(proc_->pid()), &info,
                       WEXITED | WNOHANG | WNOWAIT) == 0 &&
              info.si_pid != 0) {
            exited = true;  // reaped later by Process
            return true;
          }
          int fd = connect_loopback(port_.port());
          if (fd == -1) return false;
          ::close(fd);
          return true;
        },
        10000, 5);
    if (!up || exited) {
      error_ = std::string("nginx did not start") + (exited ? " (it exited)" : "") + ":\n" +
               proc_->output() + log();
      return false;
    }
    return true;
  }

  void stop() {
    if (!proc_) return;
    proc_->signal(SIGTERM);
    proc_->wait(5000);
    proc_.reset();
  }

  int port() const { return port_.port(); }
  const std::string& error() const { return error_; }
  std::string log() const {
    std::ifstream f(dir_ + "/logs/error.log");
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  // "nginx version: nginx/1.22.1", for the failure messages.
  static std::string version() {
    auto [rc, out] = run({kNginx, "-v"});
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
    return rc == 0 ? out : "nginx -v failed";
  }

 private:
  std::string dir_;
  ReservedPort port_;
  std::unique_ptr<Process> proc_;
  std::string error_;
};

// ---- the raw exchange -----------------------------------------------------

// One response as read off the wire.
struct RawReply {
  std::string status;  // "200", "raw" (no status line: HTTP/0.9), "none" (closed), "timeout"
  std::multimap<std::string, std::string> headers;  // lower-case names
  std::string body;
  bool interim_continue = false;  // a "100 Continue" came before it
  std::string header(const std::string& name) const {
    std::string v;
    for (auto [it, end] = headers.equal_range(name); it != end; ++it) {
      if (!v.empty()) v += " | ";
      v += it->second;
    }
    return v;
  }
};

// A client socket reading responses with a deadline per response.
class RawClient {
 public:
  explicit RawClient(int port) : fd_(connect_loopback(port)) {}
  ~RawClient() {
    if (fd_ != -1) ::close(fd_);
  }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;
  bool ok() const { return fd_ != -1; }
  // Sending into a connection the server closed may fail: that is an answer
  // too (the next read sees it), not a test error.
  void send(std::string_view s) { send_all(fd_, s); }

  // Reads one response. 1xx responses are skipped (a 100 is recorded; when
  // `on_continue` is set it is called then, to send what the 100 asked for).
  RawReply read(bool head, int timeout_ms, const std::function<void()>& on_continue = {}) {
    RawReply r;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      // Status line and fields.
      std::size_t end;
      for (;;) {
        if (buf_.size() >= 5 && buf_.compare(0, 5, "HTTP/") != 0) {
          // No status line: an HTTP/0.9 answer, the body until the close.
          while (fill(deadline)) {
          }
          r.status = eof_ ? "raw" : "timeout";
          r.body = std::move(buf_);
          buf_.clear();
          return r;
        }
        if ((end = buf_.find("\r\n\r\n")) != std::string::npos) break;
        if (!fill(deadline)) {
          r.status = eof_ && buf_.empty() ? "none" : eof_ ? "truncated" : "timeout";
          return r;
        }
      }
      const std::string fields = buf_.substr(0, end + 2);
      buf_.erase(0, end + 4);
      r.status = fields.size() >= 12 ? fields.substr(9, 3) : "malformed";
      r.headers.clear();
      for (std::size_t at = fields.find("\r\n") + 2; at < fields.size();) {
        std::size_t eol = fields.find("\r\n", at);
        std::string line = fields.substr(at, eol - at);
        at = eol + 2;
        auto colon = line.find(':');
        if (colon == std::string::npos) continue;
        std::string name = line.substr(0, colon);
        for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        std::string value = line.substr(colon + 1);
        while (!value.empty() && value.front() == ' ') value.erase(0, 1);
        while (!value.empty() && value.back() == ' ') value.pop_back();
        r.headers.emplace(name, value);
      }
      if (r.status[0] == '1') {
        if (r.status == "100") r.interim_continue = true;
        if (on_continue) on_continue();
        continue;
      }
      break;
    }
    // The body.
    if (head || r.status == "204" || r.status == "304") return r;
    if (r.header("transfer-encoding") == "chunked") {
      if (!read_chunked(r.body, deadline)) r.status += " (truncated chunked body)";
      return r;
    }
    if (r.headers.count("content-length") != 0) {
      const std::size_t len = std::strtoull(r.header("content-length").c_str(), nullptr, 10);
      while (buf_.size() < len) {
        if (!fill(deadline)) {
          r.status += " (truncated body)";
          break;
        }
      }
      r.body = buf_.substr(0, len);
      buf_.erase(0, std::min(len, buf_.size()));
      return r;
    }
    while (fill(deadline)) {
    }
    r.body = std::move(buf_);
    buf_.clear();
    return r;
  }

  // After the last response: "closed" when the server closes (EOF or reset)
  // without a word, else what it answers to one more request ("open" when it
  // serves it as it should).
  std::string probe(int timeout_ms) {
    if (eof_) return buf_.empty() ? "closed" : "closed after extra bytes";
    if (!buf_.empty()) return "extra bytes: " + buf_.substr(0, 60);
    send("GET /probe.txt HTTP/1.1\r\nHost: localhost\r\n\r\n");
    RawReply p = read(false, timeout_ms);
    if (p.status == "none") return "closed";
    if (p.status == "200" && p.body == "probe\n") return "open";
    return "probe answered " + p.status;
  }

 private:
  bool fill(std::chrono::steady_clock::time_point deadline) {
    if (eof_) return false;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) return false;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) return false;
    char tmp[65536];
    ssize_t n = ::recv(fd_, tmp, sizeof tmp, 0);
    if (n <= 0) {
      eof_ = true;  // EOF or reset: the server closed
      return false;
    }
    buf_.append(tmp, static_cast<std::size_t>(n));
    return true;
  }

  bool read_chunked(std::string& out, std::chrono::steady_clock::time_point deadline) {
    for (;;) {
      std::size_t eol;
      while ((eol = buf_.find("\r\n")) == std::string::npos) {
        if (!fill(deadline)) return false;
      }
      const std::size_t size = std::strtoull(buf_.c_str(), nullptr, 16);
      buf_.erase(0, eol + 2);
      while (buf_.size() < size + 2) {
        if (!fill(deadline)) return false;
      }
      out += buf_.substr(0, size);
      buf_.erase(0, size + 2);
      if (size == 0) return true;  // no trailers from a static server
    }
  }

  int fd_;
  std::string buf_;
  bool eof_ = false;
};

}  // namespace vigil::test
