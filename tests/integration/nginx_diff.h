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
  // 127.0.0.1:PORT standing for the reserved port), starts nginx and polls until it
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
    const std::string placeholder = "127.0.0.1:PORT";
    for (std::size_t at; (at = body.find(placeholder)) != std::string::npos;) {
      body.replace(at, placeholder.size(), "127.0.0.1:" + std::to_string(port_.port()));
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
  ClosedPort port_{true};  // reserved for nginx (see ClosedPort)
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

// A client socket reading responses as they come, whatever they are.
class RawClient : public Client {
 public:
  using Client::Client;

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
      const std::string fields = buf_.substr(0, end + 4);
      buf_.erase(0, end + 4);
      r.status = fields.size() >= 12 ? fields.substr(9, 3) : "malformed";
      r.headers.clear();
      for_each_field(fields, [&](std::string name, std::string value) {
        r.headers.emplace(std::move(name), std::move(value));
      });
      if (r.status[0] != '1') break;
      if (r.status == "100") r.interim_continue = true;
      if (on_continue) on_continue();
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
};

}  // namespace vigil::test
