// The error log (nginx's ngx_log.c): one line, one write(2), no allocation.

#include "vigil/core/log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/syslog.h"
#include "vigil/core/clock.h"

namespace vigil {
namespace {

// nginx's NGX_MAX_ERROR_STR: a line longer than this is cut, never allocated.
constexpr std::size_t kMaxLine = 2048;
// Room kept at the end of the line for " (err: strerror)" and "\n", so a long
// message never pushes the errno out.
constexpr std::size_t kErrnoRoom = 128;
constexpr char kEllipsis[] = "...";

constexpr std::string_view kLevelNames[] = {"emerg", "alert",  "crit", "error",
                                            "warn",  "notice", "info", "debug"};

constexpr int kOpenFlags = O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC;
constexpr mode_t kOpenMode = 0644;

// strerror is not thread-safe; strerror_r comes in a GNU (returns char*) and
// an XSI (returns int) flavour depending on feature macros. Overloads pick the
// right reading of whichever one the headers declared.
[[maybe_unused]] const char* strerror_result(char* r, char*) {
  return r;
}
[[maybe_unused]] const char* strerror_result(int r, char* buf) {
  return r == 0 ? buf : "Unknown error";
}

const char* error_text(int err, char* buf, std::size_t size) {
  return strerror_result(strerror_r(err, buf, size), buf);
}

// Appends `s` to [p, end) as far as it fits.
char* append(char* p, char* end, std::string_view s) {
  std::size_t n = s.size();
  if (n > static_cast<std::size_t>(end - p)) n = static_cast<std::size_t>(end - p);
  std::memcpy(p, s.data(), n);
  return p + n;
}

char* append_int(char* p, char* end, long long v) {
  char tmp[24];
  int n = std::snprintf(tmp, sizeof(tmp), "%lld", v);
  if (n < 0) return p;
  return append(p, end, std::string_view(tmp, static_cast<std::size_t>(n)));
}

// write(2) the whole line; a partial write (a full pipe, a signal) continues
// with the rest. A failing log has nowhere to report to, so it gives up.
void write_all(int fd, const char* p, std::size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return;
    }
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

// nginx's "memory:" target is a debugging aid of its --with-debug builds.
Status check_target(std::string_view target) {
  if (target.empty()) return Status::error("empty log target");
  if (target.starts_with("memory:")) {
    return Status::error("the \"memory:\" error log needs a debug build, which vigil has not");
  }
  return Status::ok();
}

bool is_syslog(std::string_view target) { return target.starts_with(SyslogPeer::kPrefix); }

Status open_file(const std::string& path, int* fd) {
  int f;
  do {
    f = ::open(path.c_str(), kOpenFlags, kOpenMode);
  } while (f < 0 && errno == EINTR);
  if (f < 0) return Status::sys("open() \"" + path + "\"");
  *fd = f;
  return Status::ok();
}

}  // namespace

std::string_view log_level_name(LogLevel level) {
  const int i = static_cast<int>(level);
  if (i < 0 || i >= static_cast<int>(std::size(kLevelNames))) return "unknown";
  return kLevelNames[i];
}

bool parse_log_level(std::string_view name, LogLevel* out) {
  for (std::size_t i = 0; i < std::size(kLevelNames); ++i) {
    if (name == kLevelNames[i]) {
      *out = static_cast<LogLevel>(i);
      return true;
    }
  }
  return false;
}

Log::Log() = default;

Log::~Log() {
  if (owns_fd_) (void)::close(fd_);  // nothing to report a close error to
  close_extras();
}

void Log::close_extras() {
  for (int i = 0; i < nextra_; ++i) {
    if (extra_[i].owns) (void)::close(extra_[i].fd);
    extra_[i] = Extra{};
  }
  nextra_ = 0;
}

void Log::update_max_level() {
  max_level_ = level_;
  for (int i = 0; i < nextra_; ++i) {
    if (static_cast<int>(extra_[i].level) > static_cast<int>(max_level_)) {
      max_level_ = extra_[i].level;
    }
  }
}

Status Log::add(std::string_view target, LogLevel level) {
  if (Status s = check_target(target); !s) return s;
  if (nextra_ == kMaxExtraTargets) return Status::error("too many error logs");
  Extra e;
  e.level = level;
  e.target = std::string(target);
  if (is_syslog(target)) {
    auto peer = SyslogPeer::parse(target);
    if (!peer) return peer.status();
    e.syslog = std::move(peer.value());
  } else if (target == "stderr") {
    e.fd = STDERR_FILENO;
  } else {
    if (Status s = open_file(e.target, &e.fd); !s) return s;
    e.owns = true;
  }
  extra_[nextra_++] = std::move(e);
  update_max_level();
  return Status::ok();
}

Status Log::open(std::string_view target, LogLevel level) {
  if (Status s = check_target(target); !s) return s;
  close_extras();
  if (is_syslog(target)) {
    auto peer = SyslogPeer::parse(target);
    if (!peer) return peer.status();
    if (owns_fd_) (void)::close(fd_);
    fd_ = -1;
    owns_fd_ = false;
    syslog_ = std::move(peer.value());
    target_ = std::string(target);
    level_ = level;
    update_max_level();
    return Status::ok();
  }
  syslog_.reset();
  if (target == "stderr") {
    if (owns_fd_) (void)::close(fd_);
    fd_ = STDERR_FILENO;
    owns_fd_ = false;
    target_ = "stderr";
    level_ = level;
    update_max_level();
    return Status::ok();
  }
  std::string path(target);
  int f = -1;
  Status s = open_file(path, &f);
  if (!s) return s;
  if (owns_fd_ && fd_ != -1) {
    // Keep the descriptor number: another thread may be writing through it.
    if (::dup3(f, fd_, O_CLOEXEC) < 0) {
      Status e = Status::sys("dup3() for \"" + path + "\"");
      (void)::close(f);
      return e;
    }
    (void)::close(f);
  } else {
    fd_ = f;
    owns_fd_ = true;
  }
  target_ = std::move(path);
  level_ = level;
  update_max_level();
  return Status::ok();
}

Status Log::reopen() {
  for (int i = 0; i < nextra_; ++i) {
    Extra& e = extra_[i];
    if (!e.owns) continue;
    int f = -1;
    if (Status s = open_file(e.target, &f); !s) return s;
    if (::dup3(f, e.fd, O_CLOEXEC) < 0) {
      Status err = Status::sys("dup3() for \"" + e.target + "\"");
      (void)::close(f);
      return err;
    }
    (void)::close(f);
  }
  if (!owns_fd_) return Status::ok();  // stderr: nothing to reopen
  // Open the new file first and move it over the old descriptor number in
  // one step (dup3 is atomic): a concurrent writer sees the old file or the
  // new one, never a closed fd. dup3 rather than dup2 keeps close-on-exec.
  int f = -1;
  Status s = open_file(target_, &f);
  if (!s) return s;
  if (::dup3(f, fd_, O_CLOEXEC) < 0) {
    Status e = Status::sys("dup3() for \"" + target_ + "\"");
    (void)::close(f);
    return e;
  }
  // f is a duplicate now; Linux releases it even when close() reports an error.
  (void)::close(f);
  return Status::ok();
}

void Log::write(LogLevel level, int err, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vwrite(level, err, fmt, ap);
  va_end(ap);
}

void Log::vwrite(LogLevel level, int err, const char* fmt, va_list ap) {
  if (!enabled(level)) return;
  const int saved_errno = errno;  // logging must not disturb the caller's errno

  char line[kMaxLine];
  char* p = line;
  char* const end = line + sizeof(line);
  // The message may use everything but the errno room.
  char* const msg_end = end - kErrnoRoom;

  p = append(p, msg_end, clock::err_log_time());
  p = append(p, msg_end, " [");
  p = append(p, msg_end, log_level_name(level));
  p = append(p, msg_end, "] ");
  p = append_int(p, msg_end, static_cast<long long>(::getpid()));
  p = append(p, msg_end, "#0: ");

  const std::size_t room = static_cast<std::size_t>(msg_end - p);
  const int n = std::vsnprintf(p, room, fmt, ap);  // room > 0: the prefix is short
  if (n < 0) {
    p = append(p, msg_end, "(bad log format)");
  } else if (static_cast<std::size_t>(n) < room) {
    p += n;
  } else {
    // Truncated: vsnprintf wrote room-1 chars and a NUL; mark the cut.
    p = msg_end - (sizeof(kEllipsis) - 1);
    std::memcpy(p, kEllipsis, sizeof(kEllipsis) - 1);
    p += sizeof(kEllipsis) - 1;
  }

  char* const line_end = end - 1;  // keep one byte for '\n'
  if (err != 0) {
    char errbuf[96];
    p = append(p, line_end, " (");
    p = append_int(p, line_end, err);
    p = append(p, line_end, ": ");
    p = append(p, line_end, error_text(err, errbuf, sizeof(errbuf)));
    p = append(p, line_end, ")");
  }
  *p++ = '\n';

  const std::size_t line_len = static_cast<std::size_t>(p - line);
  // Syslog gets the line without its newline, with the message's own level
  // as the severity (nginx ignores "severity=" for error_log).
  const std::string_view datagram(line, line_len - 1);
  if (static_cast<int>(level) <= static_cast<int>(level_)) {
    if (syslog_ != nullptr) {
      syslog_->send(static_cast<int>(level), datagram);
    } else {
      write_all(fd_, line, line_len);
    }
  }
  for (int i = 0; i < nextra_; ++i) {
    if (static_cast<int>(level) <= static_cast<int>(extra_[i].level)) {
      if (extra_[i].syslog != nullptr) {
        extra_[i].syslog->send(static_cast<int>(level), datagram);
      } else {
        write_all(extra_[i].fd, line, line_len);
      }
    }
  }
  errno = saved_errno;
}

Log& Log::global() {
  // Never destroyed, so code running in static destructors can still log.
  static Log* const log = new Log();
  return *log;
}

}  // namespace vigil
