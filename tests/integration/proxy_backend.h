#pragma once
// A small HTTP/1.1 backend for the proxy tests, run on threads inside the
// test process: it accepts on 127.0.0.1, reads requests (Content-Length or
// chunked bodies) on keep-alive connections, and answers through a handler
// the test gives. It counts connections and requests, and keeps every
// request it saw, so a test can check what the proxy forwarded.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace vigil::test {

struct BackendRequest {
  std::string method;
  std::string target;
  std::string version;
  std::string head;  // the raw head, with its final CRLF CRLF
  std::vector<std::pair<std::string, std::string>> fields;  // names in lower case
  std::string body;
  bool chunked = false;
  int connection = 0;  // which accepted connection (1, 2, ...)
  int index = 0;       // requests before it on that connection

  std::string header(const std::string& name) const {
    for (const auto& f : fields) {
      if (f.first == name) return f.second;
    }
    return {};
  }
  bool has(const std::string& name) const {
    for (const auto& f : fields) {
      if (f.first == name) return true;
    }
    return false;
  }
};

// What the handler does with a connection: write the response (raw bytes)
// through `send`, return false to close the connection afterwards.
class BackendConn {
 public:
  explicit BackendConn(int fd) : fd_(fd) {}
  bool send(std::string_view s) {
    while (!s.empty()) {
      ssize_t n = ::send(fd_, s.data(), s.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      s.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
  }
  int fd() const { return fd_; }

 private:
  int fd_;
};

using BackendHandler = std::function<bool(BackendConn&, const BackendRequest&)>;

// "HTTP/1.1 200 OK" with a body and Content-Length.
inline std::string backend_response(int status, const std::string& body,
                                    const std::string& extra = "") {
  return "HTTP/1.1 " + std::to_string(status) +
         " X\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" + extra + "\r\n" + body;
}

// Answers an Upgrade request with 101, then sends every byte back until the
// peer's EOF; false (close the connection) at the end.
inline bool upgrade_and_echo(BackendConn& c) {
  if (!c.send("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
              "Sec-WebSocket-Accept: x\r\n\r\n")) {
    return false;
  }
  char buf[4096];
  for (;;) {
    ssize_t n = ::recv(c.fd(), buf, sizeof buf, 0);
    if (n <= 0) break;
    if (!c.send(std::string_view(buf, static_cast<std::size_t>(n)))) break;
  }
  return false;
}

class Backend {
 public:
  explicit Backend(BackendHandler handler = nullptr) : handler_(std::move(handler)) {
    if (!handler_) {
      handler_ = [](BackendConn& c, const BackendRequest& r) {
        return c.send(backend_response(200, "backend " + r.method + " " + r.target));
      };
    }
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof sa;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0 && ::listen(fd_, 128) == 0 &&
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&sa), &len) == 0) {
      port_ = ntohs(sa.sin_port);
    }
    accept_thread_ = std::thread([this] { accept_loop(); });
  }
  ~Backend() { stop(); }
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  int connections() const { return connections_.load(); }
  int requests() const { return requests_.load(); }
  std::vector<BackendRequest> seen() {
    std::lock_guard<std::mutex> g(mu_);
    return seen_;
  }
  BackendRequest last() {
    std::lock_guard<std::mutex> g(mu_);
    return seen_.empty() ? BackendRequest{} : seen_.back();
  }
  void set_handler(BackendHandler h) {
    std::lock_guard<std::mutex> g(mu_);
    handler_ = std::move(h);
  }

  void stop() {
    if (stopping_.exchange(true)) return;
    ::shutdown(fd_, SHUT_RDWR);
    if (accept_thread_.joinable()) accept_thread_.join();
    ::close(fd_);
    std::vector<std::thread> threads;
    {
      std::lock_guard<std::mutex> g(mu_);
      for (int c : open_) ::shutdown(c, SHUT_RDWR);
      threads.swap(threads_);
    }
    for (auto& t : threads) t.join();
    std::lock_guard<std::mutex> g(mu_);
    for (int c : open_) ::close(c);
    open_.clear();
  }

 private:
  void accept_loop() {
    for (;;) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 100) < 0 || stopping_) return;
      if (!(p.revents & POLLIN)) continue;
      int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c == -1) {
        if (stopping_) return;
        continue;
      }
      const int n = ++connections_;
      std::lock_guard<std::mutex> g(mu_);
      open_.push_back(c);
      threads_.emplace_back([this, c, n] { serve(c, n); });
    }
  }

  // Reads more into buf; false on EOF/error.
  static bool fill(int fd, std::string& buf) {
    char tmp[65536];
    ssize_t n = ::recv(fd, tmp, sizeof tmp, 0);
    if (n <= 0) return false;
    buf.append(tmp, static_cast<std::size_t>(n));
    return true;
  }

  static bool read_request(int fd, std::string& buf, BackendRequest& r) {
    std::size_t end;
    while ((end = buf.find("\r\n\r\n")) == std::string::npos) {
      if (!fill(fd, buf)) return false;
    }
    r.head = buf.substr(0, end + 4);
    buf.erase(0, end + 4);
    std::size_t line_end = r.head.find("\r\n");
    std::string line = r.head.substr(0, line_end);
    std::size_t s1 = line.find(' '), s2 = line.rfind(' ');
    r.method = line.substr(0, s1);
    r.target = line.substr(s1 + 1, s2 - s1 - 1);
    r.version = line.substr(s2 + 1);
    std::size_t pos = line_end + 2;
    while (pos < r.head.size() - 2) {
      std::size_t e = r.head.find("\r\n", pos);
      std::string f = r.head.substr(pos, e - pos);
      pos = e + 2;
      std::size_t colon = f.find(':');
      std::string name = f.substr(0, colon);
      for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      std::string value = f.substr(colon + 1);
      while (!value.empty() && value.front() == ' ') value.erase(0, 1);
      r.fields.emplace_back(name, value);
    }
    if (r.header("transfer-encoding") == "chunked") {
      r.chunked = true;
      for (;;) {
        while (buf.find("\r\n") == std::string::npos) {
          if (!fill(fd, buf)) return false;
        }
        std::size_t e = buf.find("\r\n");
        std::size_t size = std::stoul(buf.substr(0, e), nullptr, 16);
        buf.erase(0, e + 2);
        while (buf.size() < size + 2) {
          if (!fill(fd, buf)) return false;
        }
        r.body += buf.substr(0, size);
        buf.erase(0, size + 2);
        if (size == 0) break;  // no trailers in these tests
      }
    } else if (r.has("content-length")) {
      std::size_t len = std::stoul(r.header("content-length"));
      while (buf.size() < len) {
        if (!fill(fd, buf)) return false;
      }
      r.body = buf.substr(0, len);
      buf.erase(0, len);
    }
    return true;
  }

  void serve(int fd, int number) {
    std::string buf;
    for (int index = 0;; ++index) {
      BackendRequest r;
      if (!read_request(fd, buf, r)) break;
      r.connection = number;
      r.index = index;
      ++requests_;
      BackendHandler h;
      {
        std::lock_guard<std::mutex> g(mu_);
        seen_.push_back(r);
        h = handler_;
      }
      BackendConn conn(fd);
      if (!h(conn, r)) break;
      if (r.header("connection") == "close" || r.version == "HTTP/1.0") break;
    }
    // The descriptor is closed by stop(), so its number is not reused
    // while stop() may still shut it down.
    ::shutdown(fd, SHUT_RDWR);
  }

  BackendHandler handler_;
  int fd_ = -1;
  int port_ = -1;
  std::atomic<bool> stopping_{false};
  std::atomic<int> connections_{0};
  std::atomic<int> requests_{0};
  std::mutex mu_;
  std::vector<BackendRequest> seen_;
  std::vector<int> open_;
  std::vector<std::thread> threads_;
  std::thread accept_thread_;
};

}  // namespace vigil::test
