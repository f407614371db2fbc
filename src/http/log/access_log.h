#pragma once
// The access log in nginx's "combined" format:
//
//   $remote_addr - $remote_user [$time_local] "$request" $status
//   $body_bytes_sent "$http_referer" "$http_user_agent"
//
// Lines gather in a buffer that is written when full, when the worker's
// flush timer fires (1 s by default) and at exit; USR1 reopens the file.

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "vigil/core/clock.h"
#include "vigil/core/result.h"

namespace vigil {
class Log;
}

namespace vigil::http {

struct AccessLogLine {
  std::string_view remote_addr;
  std::string_view remote_user;  // "" written as "-"
  std::string_view request;  // the request line ("" when none was read)
  int status = 0;
  std::int64_t body_bytes = 0;
  std::string_view referer;
  std::string_view user_agent;
};

class AccessLog {
 public:
  AccessLog(std::string path, std::size_t buffer, Msec flush);
  ~AccessLog();
  AccessLog(const AccessLog&) = delete;
  AccessLog& operator=(const AccessLog&) = delete;

  Status open();
  // Opens the path again and puts the new file in place of the old one
  // (after logrotate moved it away).
  Status reopen(Log& log);
  // Appends one line; returns true when the buffer went from empty to not
  // empty (the caller arms the flush timer).
  bool write(const AccessLogLine& line, Log& log);
  // A line of a log_format: `need` is an upper bound of its length; fill
  // the memory begin() gives, then end() with its real end. Returns as write().
  char* begin(std::size_t need, Log& log);
  bool end(char* line_end, Log& log);
  void flush(Log& log);

  bool empty() const { return used_ == 0; }
  Msec flush_after() const { return flush_; }
  const std::string& path() const { return path_; }

 private:
  void write_out(const char* p, std::size_t n, Log& log);

  std::string path_;
  int fd_ = -1;
  std::unique_ptr<char[]> buf_;
  std::size_t size_;
  std::size_t used_ = 0;
  Msec flush_;
  std::time_t last_error_ = 0;
  std::unique_ptr<char[]> big_;  // begin(): a line larger than the buffer
  char* line_ = nullptr;
  bool direct_ = false;
};

// Appends `s` escaped as nginx escapes variables in a log line ('"', '\\' and
// bytes outside 0x20..0x7e as \xHH) to `out`; returns the end. `out` must hold
// 4 * s.size() bytes.
char* escape_log_value(std::string_view s, char* out);

}  // namespace vigil::http
