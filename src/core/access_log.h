#pragma once
// An access log file (or syslog: target) of one worker (nginx's ngx_http_log_module and
// ngx_stream_log_module share this): each line is written at once, or, with
// buffer=, gathered in a buffer that is written when full, when the owner's
// flush timer fires (flush=) and at exit; with gzip= each write is a gzip
// member of its own (a file of members is one gzip stream to zcat). USR1
// reopens the file. A path "syslog:server=..." sends each line as a syslog
// datagram instead (never buffered). The line formats are the protocols'
// (http/log, stream/log.h).

#include <cstddef>
#include <cstdint>
#include <ctime>
#include <list>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "vigil/core/clock.h"
#include "vigil/core/result.h"

namespace vigil {

class Log;
class SyslogPeer;

class AccessLog {
 public:
  AccessLog(std::string path, std::size_t buffer, Msec flush, int gzip = 0);
  ~AccessLog();
  AccessLog(const AccessLog&) = delete;
  AccessLog& operator=(const AccessLog&) = delete;

  Status open();
  // Opens the path again and puts the new file in place of the old one
  // (after logrotate moved it away).
  Status reopen(Log& log);
  // A line of a log_format: `need` is an upper bound of its length; fill
  // the memory begin() gives, then end() with its real end, which returns
  // true when the buffer went from empty to not empty (the owner arms its
  // flush timer).
  char* begin(std::size_t need, Log& log);
  bool end(char* line_end, Log& log);
  void flush(Log& log);

  bool empty() const { return used_ == 0; }
  Msec flush_after() const { return flush_; }
  const std::string& path() const { return path_; }

 private:
  void write_out(const char* p, std::size_t n, Log& log);
  // write_out, compressed first when gzip is on.
  void emit(const char* p, std::size_t n, Log& log);

  std::string path_;
  int fd_ = -1;
  std::unique_ptr<SyslogPeer> syslog_;  // a syslog: target (no file)
  std::unique_ptr<char[]> buf_;
  std::size_t size_;
  std::size_t used_ = 0;
  Msec flush_;
  int gzip_;
  std::time_t last_error_ = 0;
  std::unique_ptr<char[]> big_;  // begin(): a line larger than the buffer
  char* line_ = nullptr;
  bool direct_ = false;
};

// Appends `s` escaped as nginx escapes variables in a log line ('"', '\\' and
// bytes outside 0x20..0x7e as \xHH) to `out`; returns the end. `out` must hold
// 4 * s.size() bytes.
char* escape_log_value(std::string_view s, char* out);

// How a log_format writes variable values (escape=).
enum class LogEscape : std::uint8_t {
  kNone,     // as they are
  kDefault,  // '"', '\\', bytes < 0x20 and > 0x7e as \xHH (nginx's access log)
  kJson,     // '"' and '\\' escaped, control characters as \uXXXX
};
// The most bytes `n` raw bytes take once escaped with `e`.
std::size_t log_escape_bound(std::size_t n, LogEscape e);
// Escapes the `n` raw bytes at `p` in place (the memory has room for
// log_escape_bound(n, e) bytes); returns the escaped length.
std::size_t escape_log_in_place(char* p, std::size_t n, LogEscape e);

// Writes all `n` bytes to `fd` (a log file named `path`); a failure is an
// [alert].
void write_log_fd(int fd, const char* p, std::size_t n, const char* path, Log& log);

// open_log_file_cache's table of one worker: descriptors of the files that
// access_log paths with variables name, kept by use (nginx's
// ngx_open_cached_file for logs). A path is cached once used min_uses
// times within `inactive`; its descriptor is reopened after `valid`; the
// least recently used entry leaves when there are `max`.
class LogFileCache {
 public:
  LogFileCache(std::uint32_t max, Msec inactive, std::uint32_t min_uses, Msec valid)
      : max_(max), inactive_(inactive), min_uses_(min_uses), valid_(valid) {}
  ~LogFileCache();
  LogFileCache(const LogFileCache&) = delete;
  LogFileCache& operator=(const LogFileCache&) = delete;

  // A descriptor open for appending to `path` (NUL-terminated), or -1 with
  // errno set. `owned`: the caller closes it after the write.
  int open(const char* path, Msec now, bool& owned);

 private:
  struct Entry {
    std::string path;
    int fd = -1;
    std::uint32_t uses = 0;
    Msec accessed = 0;
    Msec opened = 0;
  };
  void drop(std::list<Entry>::iterator it);

  std::uint32_t max_;
  Msec inactive_;
  std::uint32_t min_uses_;
  Msec valid_;
  std::list<Entry> lru_;  // most recently used first
  std::unordered_map<std::string_view, std::list<Entry>::iterator> index_;
};

// Opens `path` for appending a log line (created 0644).
int open_log_file(const char* path);

}  // namespace vigil
