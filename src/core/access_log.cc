#include "core/access_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iterator>
#include <new>

#include <zlib.h>

#include "core/syslog.h"
#include "vigil/core/log.h"

namespace vigil {

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

std::size_t log_escape_bound(std::size_t n, LogEscape e) {
  return e == LogEscape::kDefault ? 4 * n : e == LogEscape::kJson ? 6 * n : n;
}

std::size_t escape_log_in_place(char* p, std::size_t n, LogEscape e) {
  static constexpr char kHex[] = "0123456789ABCDEF";  // nginx's, in both formats
  if (e == LogEscape::kNone) return n;
  const bool log = e == LogEscape::kDefault;
  std::size_t m = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const auto ch = static_cast<unsigned char>(p[i]);
    if (log) {
      m += (ch == '"' || ch == '\\' || ch < 0x20 || ch > 0x7e) ? 4 : 1;
    } else {
      m += (ch == '"' || ch == '\\') ? 2 : ch < 0x20 ? 6 : 1;
    }
  }
  if (m == n) return n;
  // From the end backwards: the escaped text never overtakes the raw text.
  char* w = p + m;
  for (std::size_t i = n; i-- > 0;) {
    const auto ch = static_cast<unsigned char>(p[i]);
    if (log) {
      if (ch == '"' || ch == '\\' || ch < 0x20 || ch > 0x7e) {
        *--w = kHex[ch & 0xf];
        *--w = kHex[ch >> 4];
        *--w = 'x';
        *--w = '\\';
        continue;
      }
    } else if (ch == '"' || ch == '\\') {
      *--w = static_cast<char>(ch);
      *--w = '\\';
      continue;
    } else if (ch < 0x20) {
      *--w = kHex[ch & 0xf];
      *--w = kHex[ch >> 4];
      *--w = '0';
      *--w = '0';
      *--w = 'u';
      *--w = '\\';
      continue;
    }
    *--w = static_cast<char>(ch);
  }
  return m;
}

AccessLog::AccessLog(std::string path, std::size_t buffer, Msec flush, int gzip)
    : path_(std::move(path)), size_(buffer), flush_(flush), gzip_(gzip) {
  if (size_ > 0) buf_ = std::make_unique<char[]>(size_);
}

AccessLog::~AccessLog() {
  if (fd_ != -1)
    (void)::close(fd_);  // at exit, after the last flush: nothing to do about a failure
}

int open_log_file(const char* path) {
  return ::open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
}

Status AccessLog::open() {
  if (path_.starts_with(SyslogPeer::kPrefix)) {
    auto peer = SyslogPeer::parse(path_);
    if (!peer) return peer.status();
    syslog_ = std::move(peer).value();
    return Status::ok();
  }
  int fd = open_log_file(path_.c_str());
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
  if (syslog_ != nullptr) return Status::ok();
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

// One gzip member of the `n` bytes (nginx's access_log gzip): deflated
// whole, with its own header and trailer.
void AccessLog::emit(const char* p, std::size_t n, Log& log) {
  if (syslog_ != nullptr) {
    if (n > 0 && p[n - 1] == '\n') --n;  // the datagram is the line
    syslog_->send(-1, std::string_view(p, n));
    return;
  }
  if (gzip_ == 0) {
    write_out(p, n, log);
    return;
  }
  z_stream zs{};
  if (deflateInit2(&zs, gzip_, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    VIGIL_LOG(log, kAlert, 0, "deflateInit2() failed for \"%s\": the lines are lost", path_.c_str());
    return;
  }
  const auto bound = static_cast<std::size_t>(deflateBound(&zs, static_cast<uLong>(n)));
  std::unique_ptr<char[]> out(new (std::nothrow) char[bound]);
  if (out == nullptr) {
    (void)deflateEnd(&zs);
    VIGIL_LOG(log, kAlert, 0, "out of memory compressing \"%s\": the lines are lost", path_.c_str());
    return;
  }
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(p));
  zs.avail_in = static_cast<uInt>(n);
  zs.next_out = reinterpret_cast<Bytef*>(out.get());
  zs.avail_out = static_cast<uInt>(bound);
  const int rc = deflate(&zs, Z_FINISH);
  const std::size_t produced = bound - zs.avail_out;
  (void)deflateEnd(&zs);
  if (rc != Z_STREAM_END) {
    VIGIL_LOG(log, kAlert, 0, "deflate() failed for \"%s\" (%d): the lines are lost", path_.c_str(), rc);
    return;
  }
  write_out(out.get(), produced, log);
}

void write_log_fd(int fd, const char* p, std::size_t n, const char* path, Log& log) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w > 0) {
      p += w;
      n -= static_cast<std::size_t>(w);
      continue;
    }
    if (w == -1 && errno == EINTR) continue;
    VIGIL_LOG(log, kAlert, errno, "write() to \"%s\" failed", path);
    return;
  }
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
    emit(line_, n, log);
    big_.reset();
    return false;
  }
  const bool was_empty = used_ == 0;
  used_ += n;
  return was_empty;
}

void AccessLog::flush(Log& log) {
  if (used_ == 0) return;
  emit(buf_.get(), used_, log);
  used_ = 0;
}

LogFileCache::~LogFileCache() {
  for (Entry& e : lru_) {
    if (e.fd != -1) (void)::close(e.fd);  // at exit: nothing to do about a failure
  }
}

void LogFileCache::drop(std::list<Entry>::iterator it) {
  if (it->fd != -1) (void)::close(it->fd);  // a log descriptor: written with O_APPEND, nothing pending
  index_.erase(it->path);
  lru_.erase(it);
}

int LogFileCache::open(const char* path, Msec now, bool& owned) {
  owned = true;
  while (!lru_.empty() && msec_diff(now, lru_.back().accessed) >= static_cast<MsecDiff>(inactive_)) {
    drop(std::prev(lru_.end()));
  }
  const std::string_view key(path);
  if (auto found = index_.find(key); found != index_.end()) {
    auto it = found->second;
    lru_.splice(lru_.begin(), lru_, it);
    it->accessed = now;
    ++it->uses;
    if (it->fd != -1 && msec_diff(now, it->opened) < static_cast<MsecDiff>(valid_)) {
      owned = false;
      return it->fd;
    }
    if (it->fd != -1) {
      (void)::close(it->fd);  // past `valid`: the name may lead elsewhere now
      it->fd = -1;
    }
    const int fd = open_log_file(path);
    if (fd == -1) return -1;
    if (it->uses >= min_uses_) {
      it->fd = fd;
      it->opened = now;
      owned = false;
    }
    return fd;
  }
  const int fd = open_log_file(path);
  if (fd == -1) return -1;
  if (lru_.size() >= max_) drop(std::prev(lru_.end()));
  std::list<Entry>::iterator it;
  try {
    lru_.push_front(Entry{std::string(key), -1, 1, now, now});
    it = lru_.begin();
    try {
      index_.emplace(std::string_view(it->path), it);
    } catch (const std::bad_alloc&) {
      lru_.pop_front();
      throw;
    }
  } catch (const std::bad_alloc&) {
    return fd;  // not cached: written once, closed by the caller
  }
  if (min_uses_ <= 1) {
    it->fd = fd;
    owned = false;
  }
  return fd;
}

}  // namespace vigil
