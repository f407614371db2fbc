// Syslog datagrams (RFC 3164), as nginx sends them (ngx_syslog.c).
#include "core/syslog.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "vigil/core/clock.h"
#include "vigil/core/log.h"

namespace vigil {
namespace {

// RFC 5424 6.2.1's facility codes, by position (nginx's names).
constexpr std::string_view kFacilities[] = {
    "kern",
    "user",
    "mail",  // layer-names-ok: the facility, not the protocol layer
    "daemon", "auth",  "intern", "lpr",   "news",  "uucp", "clock", "authpriv", "ftp", "ntp",
    "audit", "alert", "cron",   "local0", "local1", "local2", "local3", "local4", "local5",
    "local6", "local7"};

// The severities are the error log's levels, in the same order (emerg = 0).
bool parse_severity(std::string_view name, int* out) {
  LogLevel level;
  if (!parse_log_level(name, &level)) return false;
  *out = static_cast<int>(level);
  return true;
}

// "host[:port]", "[v6]:port", "v6" : resolved once, at configuration time.
Status resolve(std::string_view server, sockaddr_storage* addr, socklen_t* len) {
  std::string host(server);
  std::string port = std::to_string(SyslogPeer::kDefaultPort);
  if (server.starts_with('[')) {
    const std::size_t close = server.find(']');
    if (close == std::string_view::npos) return Status::error("invalid syslog server \"" + host + "\"");
    host = std::string(server.substr(1, close - 1));
    std::string_view rest = server.substr(close + 1);
    if (!rest.empty()) {
      if (!rest.starts_with(':') || rest.size() == 1) {
        return Status::error("invalid syslog server \"" + std::string(server) + "\"");
      }
      port = std::string(rest.substr(1));
    }
  } else if (const std::size_t colon = server.rfind(':');
             colon != std::string_view::npos && server.find(':') == colon) {
    host = std::string(server.substr(0, colon));
    port = std::string(server.substr(colon + 1));
  }
  if (host.empty() || port.empty() || port.find_first_not_of("0123456789") != std::string::npos ||
      port.size() > 5 || std::stoi(port) == 0 || std::stoi(port) > 65535) {
    return Status::error("invalid syslog server \"" + std::string(server) + "\"");
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &res); rc != 0 || res == nullptr) {
    return Status::error("host not found in syslog server \"" + std::string(server) + "\"");
  }
  std::memcpy(addr, res->ai_addr, res->ai_addrlen);
  *len = res->ai_addrlen;
  ::freeaddrinfo(res);
  return Status::ok();
}

}  // namespace

std::string_view syslog_hostname() {
  static const std::string name = [] {
    char buf[256] = {};
    if (::gethostname(buf, sizeof buf - 1) == -1) return std::string("localhost");
    std::string s(buf);
    for (char& c : s) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    return s;
  }();
  return name;
}

Result<std::unique_ptr<SyslogPeer>> SyslogPeer::parse(std::string_view target) {
  auto peer = std::make_unique<SyslogPeer>();
  peer->target_ = std::string(target);
  std::string_view args = target.substr(kPrefix.size());
  bool have_server = false;
  while (!args.empty()) {
    const std::size_t comma = args.find(',');
    std::string_view arg = args.substr(0, comma);
    args = comma == std::string_view::npos ? std::string_view() : args.substr(comma + 1);
    if (arg.starts_with("server=")) {
      if (have_server) return Status::error("duplicate syslog \"server\"");
      have_server = true;
      if (Status s = resolve(arg.substr(7), &peer->addr_, &peer->addrlen_); !s) return s;
    } else if (arg.starts_with("facility=")) {
      std::string_view f = arg.substr(9);
      bool found = false;
      for (std::size_t i = 0; i < std::size(kFacilities); ++i) {
        if (kFacilities[i] == f) {
          peer->facility_ = static_cast<int>(i);
          found = true;
        }
      }
      if (!found) return Status::error("unknown syslog facility \"" + std::string(f) + "\"");
    } else if (arg.starts_with("severity=")) {
      if (!parse_severity(arg.substr(9), &peer->severity_)) {
        return Status::error("unknown syslog severity \"" + std::string(arg.substr(9)) + "\"");
      }
    } else if (arg.starts_with("tag=")) {
      std::string_view tag = arg.substr(4);
      if (tag.size() > kMaxTag) return Status::error("syslog tag length exceeds 32");
      for (char c : tag) {
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                        (c >= '0' && c <= '9') || c == '_';
        if (!ok) {
          return Status::error(
              "syslog \"tag\" only allows alphanumeric characters and underscore");
        }
      }
      peer->tag_ = std::string(tag);
    } else if (arg == "nohostname") {
      peer->nohostname_ = true;
    } else {
      return Status::error("unknown syslog parameter \"" + std::string(arg) + "\"");
    }
  }
  if (!have_server) return Status::error("no syslog server specified");
  return peer;
}

SyslogPeer::~SyslogPeer() {
  if (fd_ != -1) (void)::close(fd_);  // a datagram socket: nothing to flush
}

bool SyslogPeer::connect_socket() {
  if (fd_ != -1) return true;
  if (failed_) return false;
  int fd = ::socket(addr_.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd == -1) {
    failed_ = true;
    return false;
  }
  int rc;
  do {
    rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr_), addrlen_);
  } while (rc == -1 && errno == EINTR);
  if (rc == -1) {
    (void)::close(fd);
    failed_ = true;
    return false;
  }
  fd_ = fd;
  return true;
}

void SyslogPeer::send(int severity, std::string_view text) {
  const int saved_errno = errno;
  if (!connect_socket()) return;
  if (severity < 0) severity = severity_;
  char head[64 + 256 + kMaxTag];
  char* p = head;
  char* const end = head + sizeof head;
  const int pri = facility_ * 8 + severity;
  const int n = std::snprintf(p, static_cast<std::size_t>(end - p), "<%d>", pri);
  if (n > 0) p += n;
  auto put = [&](std::string_view s) {
    const std::size_t k = std::min(s.size(), static_cast<std::size_t>(end - p));
    std::memcpy(p, s.data(), k);
    p += k;
  };
  put(clock::syslog_time());
  put(" ");
  if (!nohostname_) {
    put(syslog_hostname());
    put(" ");
  }
  put(tag_);
  put(": ");
  iovec iov[2] = {{head, static_cast<std::size_t>(p - head)},
                  {const_cast<char*>(text.data()), text.size()}};
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = 2;
  ssize_t rc;
  do {
    rc = ::sendmsg(fd_, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
  } while (rc == -1 && errno == EINTR);
  // A lost datagram (no receiver, a full socket buffer) is what UDP syslog
  // accepts; reporting it through the log would only send more.
  errno = saved_errno;
}

}  // namespace vigil
