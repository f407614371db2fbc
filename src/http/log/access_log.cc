#include "http/log/access_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "codec/head_writer.h"
#include "vigil/core/log.h"

namespace vigil::http {
namespace {

char* put(char* p, std::string_view s) {
  std::memcpy(p, s.data(), s.size());
  return p + s.size();
}

char* put_uint(char* p, std::uint64_t v) {
  char tmp[20];
  return put(p, decimal(v, tmp));
}

// A value that is empty is logged as "-", as nginx does for unset variables.
char* put_value(char* p, std::string_view s) {
  if (s.empty()) return put(p, "-");
  return escape_log_value(s, p);
}

}  // namespace

char* escape_log_value(std::string_view s, char* out) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (unsigned char ch : s) {
    if (ch == '"' || ch == '\\' || ch < 0x20 || ch > 0x7e) {
      *out++ = '\\';
      *out++ = 'x';
      *out++ = kHex[ch >> 4];
      *out++ = kHex[ch & 0xf];
    } else {
      *out++ = static_cast<char>(ch);
    }
  }
  return out;
}

AccessLog::AccessLog(std::string path, std::size_t buffer, Msec flush)
    : path_(std::move(path)), size_(buffer), flush_(flush) {
  if (size_ > 0) buf_ = std::make_unique<char[]>(size_);
}

AccessLog::~AccessLog() {
  if (fd_ != -1)
    (void)::close(fd_);  // at exit, after the last flush: nothing to do about a failure
}

Status AccessLog::open() {
  int fd = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd == -1) return Status::sys("open() \"" + path_ + "\"");
  if (fd_ != -1 && ::close(fd_) == -1) {
    Status s = Status::sys("close() \"" + path_ + "\"");
    (void)::close(fd);
    return s;
  }
  fd_ = fd;
  return Status::ok();
}

Status AccessLog::reopen(Log& log) {
  flush(log);
  int fd = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd == -1) return Status::sys("open() \"" + path_ + "\"");
  // dup2 swaps the file under the same descriptor, so a line written at any
  // moment lands in one file or the other, never nowhere.
  if (fd_ != -1) {
    if (::dup2(fd, fd_) == -1) {
      Status s = Status::sys("dup2()");
      (void)::close(fd);
      return s;
    }
    if (::close(fd) == -1) return Status::sys("close() \"" + path_ + "\"");
  } else {
    fd_ = fd;
  }
  return Status::ok();
}

void AccessLog::write_out(const char* p, std::size_t n, Log& log) {
  while (n > 0) {
    ssize_t w = ::write(fd_, p, n);
    if (w > 0) {
      p += w;
      n -= static_cast<std::size_t>(w);
      continue;
    }
    if (w == -1 && errno == EINTR) continue;
    const int err = errno;
    // A full disk must not flood the error log: once a second is enough.
    std::time_t now = clock::now_sec();
    if (now != last_error_) {
      last_error_ = now;
      VIGIL_LOG(log, kAlert, err, "write() to \"%s\" failed", path_.c_str());
    }
    return;
  }
}

bool AccessLog::write(const AccessLogLine& l, Log& log) {
  // Worst case: every value byte escaped to 4, plus the fixed parts.
  const std::size_t need =
      4 * (l.request.size() + l.referer.size() + l.user_agent.size() + l.remote_user.size()) +
      l.remote_addr.size() + 128;
  char stack[4096];
  char* line = stack;
  std::unique_ptr<char[]> heap;
  const bool direct = size_ == 0 || need > size_;
  if (!direct) {
    if (size_ - used_ < need) flush(log);
    line = buf_.get() + used_;
  } else if (need > sizeof stack) {
    heap = std::make_unique<char[]>(need);  // a huge line, rare: no need to be clever
    line = heap.get();
  }

  char* p = line;
  p = put(p, l.remote_addr.empty() ? std::string_view("-") : l.remote_addr);
  p = put(p, " - ");
  p = put_value(p, l.remote_user);
  p = put(p, " [");
  p = put(p, clock::common_log_time());
  p = put(p, "] \"");
  p = escape_log_value(l.request, p);
  p = put(p, "\" ");
  p = put_uint(p, static_cast<std::uint64_t>(l.status));
  *p++ = ' ';
  p = put_uint(p, static_cast<std::uint64_t>(l.body_bytes > 0 ? l.body_bytes : 0));
  p = put(p, " \"");
  p = put_value(p, l.referer);
  p = put(p, "\" \"");
  p = put_value(p, l.user_agent);
  p = put(p, "\"\n");

  if (direct) {
    write_out(line, static_cast<std::size_t>(p - line), log);
    return false;
  }
  const bool was_empty = used_ == 0;
  used_ += static_cast<std::size_t>(p - line);
  return was_empty;
}

char* AccessLog::begin(std::size_t need, Log& log) {
  direct_ = size_ == 0 || need > size_;
  if (!direct_) {
    if (size_ - used_ < need) flush(log);
    line_ = buf_.get() + used_;
    return line_;
  }
  big_ = std::make_unique<char[]>(need > 0 ? need : 1);  // rare: a huge line or no buffer
  line_ = big_.get();
  return line_;
}

bool AccessLog::end(char* line_end, Log& log) {
  const auto n = static_cast<std::size_t>(line_end - line_);
  if (direct_) {
    write_out(line_, n, log);
    big_.reset();
    return false;
  }
  const bool was_empty = used_ == 0;
  used_ += n;
  return was_empty;
}

void AccessLog::flush(Log& log) {
  if (used_ == 0) return;
  write_out(buf_.get(), used_, log);
  used_ = 0;
}

}  // namespace vigil::http
