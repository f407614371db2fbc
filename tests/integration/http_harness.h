#pragma once
// The real vigil binary for the HTTP integration tests, through the one
// server harness (server_harness.h), and small socket clients that speak
// just enough HTTP/1.1 to check what the server sends. With VIGIL_TEST_H2=1
// the servers have `http2 on` and a Client on a TCP port sends what the test
// writes as HTTP/2 streams (h2_test_client.h).

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
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "server_harness.h"
#include "test_process.h"
#include "test_util.h"

namespace vigil::test {

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

// Calls `field(name, value)` for each field line of a response head (the
// lines after the status line): the name lower-cased, the value without the
// spaces before it.
inline void for_each_field(const std::string& head,
                           const std::function<void(std::string, std::string)>& field) {
  std::size_t at = head.find("\r\n");
  while (at != std::string::npos && at + 2 < head.size()) {
    at += 2;
    const std::size_t eol = head.find("\r\n", at);
    const std::string line = head.substr(at, eol - at);
    at = eol;
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    const auto value = line.find_first_not_of(' ', colon + 1);
    field(std::move(name), value == std::string::npos ? "" : line.substr(value));
  }
}

// Fills r's status line, status and headers (names lower-cased, the value's
// leading spaces dropped) from r.head, the raw header block.
inline void parse_response_head(Response& r) {
  r.status_line = r.head.substr(0, r.head.find("\r\n"));
  if (r.status_line.size() >= 12) r.status = std::atoi(r.status_line.c_str() + 9);
  for_each_field(r.head, [&](std::string name, std::string value) {
    r.headers[std::move(name)] = std::move(value);
  });
}

}  // namespace vigil::test

#include "h2_test_client.h"

namespace vigil::test {

// An owned client socket with a read buffer, reading responses one by one.
class Client {
 public:
  explicit Client(int port) : fd_(connect_loopback(port)), h2_mode_(h2_test_mode()) {}
  // A client of the unix-domain socket at `unix_path`.
  explicit Client(const std::string& unix_path) : fd_(connect_unix(unix_path)) {}
  ~Client() { close(); }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  bool ok() const { return fd_ != -1; }
  int fd() const { return fd_; }
  void close() {
    h2_.reset();
    if (fd_ != -1) ::close(fd_);
    fd_ = -1;
  }
  bool send(std::string_view s) {
    if (h2_mode_ && fd_ != -1) {
      if (!h2_) h2_ = std::make_unique<H2TestClient>(fd_);
      return h2_->send(s);
    }
    return send_all(fd_, s);
  }

  // Reads one response; `head_only` for HEAD (and 304) where a
  // Content-Length announces no body.
  Response read_response(bool head_only = false, int timeout_ms = 5000) {
    if (h2_) return h2_->read_response(timeout_ms);
    Response r;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    std::size_t end;
    while ((end = buf_.find("\r\n\r\n")) == std::string::npos) {
      if (!fill(deadline)) return r;
    }
    r.head = buf_.substr(0, end + 4);
    buf_.erase(0, end + 4);
    parse_response_head(r);
    std::size_t len = 0;
    if (!head_only && r.status != 304 && r.header("transfer-encoding") == "chunked") {
      r.complete = read_chunked(r.body, deadline);
      return r;
    }
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
      auto left = ms_left(deadline);
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

 protected:
  // A chunked body (RFC 9112 §7.1) into `body`, decoded; false when it is
  // malformed or does not end in time.
  bool read_chunked(std::string& body, std::chrono::steady_clock::time_point deadline) {
    for (;;) {
      std::size_t eol;
      while ((eol = buf_.find("\r\n")) == std::string::npos) {
        if (!fill(deadline)) return false;
      }
      const std::string line = buf_.substr(0, eol);
      buf_.erase(0, eol + 2);
      std::size_t size = 0, digits = 0;
      for (char ch : line) {
        const int v = std::isdigit(static_cast<unsigned char>(ch)) ? ch - '0'
                      : (ch >= 'a' && ch <= 'f')                   ? ch - 'a' + 10
                      : (ch >= 'A' && ch <= 'F')                   ? ch - 'A' + 10
                                                                   : -1;
        if (v < 0) break;
        size = size * 16 + static_cast<std::size_t>(v);
        if (++digits > 12) return false;
      }
      if (digits == 0) return false;
      if (size == 0) {
        // Trailer fields, up to the empty line.
        for (;;) {
          while ((eol = buf_.find("\r\n")) == std::string::npos) {
            if (!fill(deadline)) return false;
          }
          buf_.erase(0, eol + 2);
          if (eol == 0) return true;
        }
      }
      while (buf_.size() < size + 2) {
        if (!fill(deadline)) return false;
      }
      if (buf_.compare(size, 2, "\r\n") != 0) return false;
      body.append(buf_, 0, size);
      buf_.erase(0, size + 2);
    }
  }

  // Reads what comes before `deadline`; false on timeout or EOF (eof_).
  bool fill(std::chrono::steady_clock::time_point deadline) {
    if (eof_) return false;
    auto left = ms_left(deadline);
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

  int fd_;
  std::string buf_;
  bool eof_ = false;
  bool h2_mode_ = false;
  std::unique_ptr<H2TestClient> h2_;  // the HTTP/2 mode's session, from the first send
};

// "use <VIGIL_TEST_USE>;" unless the events block names a backend itself.
inline std::string with_test_backend(const std::string& events) {
  const char* use = std::getenv("VIGIL_TEST_USE");
  if (use == nullptr || *use == '\0' || events.find("use ") != std::string::npos) return "";
  return std::string("\nuse ") + use + ";";
}

// "http2 on;" in the HTTP/2 mode, unless the http block says http2 itself.
inline std::string with_test_http2(const std::string& http) {
  if (!h2_test_mode() || http.find("http2") != std::string::npos) return "";
  return "http2 on;\n";
}

// Polls `done` every few milliseconds until it holds or `timeout_ms` passed
// (test_util.h's wait_for, under the name some tests use).
inline bool wait_until(const std::function<bool()>& done, int timeout_ms = 3000) {
  return wait_for(done, timeout_ms, 5);
}

// ServerProcess running the real vigil on conf/vigil.conf (in one process
// unless `main` says master_process), with the entry points the HTTP tests
// use.
class VigilServer : public ServerProcess {
 public:
  // Writes conf/vigil.conf: `main` directives, an events block, and `http`
  // as the body of the http block; starts the server and waits for it.
  // Listen on port 0 and ask port() for the port the server got. The
  // backend is the events block's `use`, or VIGIL_TEST_USE.
  bool start(const std::string& http, const std::string& main = "",
             const std::string& events = "worker_connections 1024;") {
    write_conf(std::string("daemon off;\n") +
               (main.find("master_process") == std::string::npos ? "master_process off;\n" : "") +
               "error_log stderr info;\npid logs/vigil.pid;\n" + main + "\nevents {\n" + events +
               with_test_backend(events) + "\n}\nhttp {\n" + with_test_http2(http) + http +
               "\n}\n");
    return launch("started");
  }
  // Writes conf/vigil.conf as given and starts the server; waits until its
  // output shows `ready` `count` times (a master's workers log "running:").
  bool start_raw(const std::string& conf, const std::string& ready = "started", int count = 1) {
    const std::size_t http = conf.find("http {\n");
    const std::string on = http == std::string::npos ? "" : with_test_http2(conf);
    write_conf(on.empty() ? conf : conf.substr(0, http + 7) + on + conf.substr(http + 7));
    return launch(ready, static_cast<std::size_t>(count));
  }
  // Waits until `needle` appears `n` times in the output.
  bool wait_output_count(const std::string& needle, std::size_t n, int timeout_ms = 10000) {
    return running() && wait_log_count(needle, n, timeout_ms);
  }
  // SIGTERM and wait; an exit code other than 0, or anything a sanitizer
  // reported, fails the test. Returns the exit code.
  int stop() { return ServerProcess::stop(true); }
  Process& process() { return proc(); }
  // Waits until the server's output (error log on stderr) contains `needle`.
  bool wait_output(const std::string& needle, int timeout_ms = 3000) {
    return running() && wait_log(needle, timeout_ms);
  }
  std::string output() { return log(); }
};

// `vigil -t` on a configuration whose http block is `http` and one server
// on a free port, written into s's prefix: the exit code and the output.
inline std::pair<int, std::string> check_http_conf(VigilServer& s, const std::string& http) {
  s.write("conf/t.conf", "events {}\nhttp {\n" + http + "\nserver { listen 127.0.0.1:" +
                             std::to_string(free_port()) + "; }\n}\n");
  return run({kVigil, "-p", s.dir(), "-c", "conf/t.conf", "-t"});
}

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

// Through a tunnel that echoes (after a 101 from the backend): three masked
// WebSocket frames ("hello", RFC 6455 §5.7) and then 200,000 bytes, each
// expected back byte for byte. Callers check HasFatalFailure() after it.
inline void expect_echo_tunnel(Client& c) {
  const std::string frame("\x81\x85\x37\xfa\x21\x3d\x7f\x9f\x4d\x51\x58", 11);
  std::string got = c.extra();
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(c.send(frame));
    got += read_n(c.fd(), frame.size() - got.size(), 3000);
    ASSERT_EQ(got, frame) << i;
    got.clear();
  }
  std::string big(200000, 'w');
  ASSERT_TRUE(c.send(big));
  EXPECT_EQ(read_n(c.fd(), big.size(), 5000), big);
}

}  // namespace vigil::test
