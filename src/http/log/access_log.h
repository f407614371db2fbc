#pragma once
// The access log in nginx's "combined" format:
//
//   $remote_addr - $remote_user [$time_local] "$request" $status
//   $body_bytes_sent "$http_referer" "$http_user_agent"
//
// Each line is written at once, or, with buffer=, gathered in a buffer that
// is written when full, when the worker's flush timer fires (flush=) and at
// exit; with gzip= each write is a gzip member of its own (a file of
// members is one gzip stream to zcat). USR1 reopens the file.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/access_log.h"

namespace vigil {
class Log;
}

namespace vigil::http {

// The log file machinery is shared with the stream module (core/access_log.h).
using ::vigil::AccessLog;
using ::vigil::escape_log_value;
using ::vigil::LogFileCache;
using ::vigil::open_log_file;
using ::vigil::write_log_fd;

struct AccessLogLine {
  std::string_view remote_addr;
  std::string_view remote_user;  // "" written as "-"
  std::string_view request;  // the request line ("" when none was read)
  int status = 0;
  std::int64_t body_bytes = 0;
  std::string_view referer;
  std::string_view user_agent;
};

// Appends the combined line of `l` to `log`; returns true when the buffer
// went from empty to not empty (the caller arms the flush timer).
bool write_combined(AccessLog& log, const AccessLogLine& l, Log& err);

// The combined format's line for `l` (with its "\n"), and an upper bound
// of its length.
std::size_t combined_line_size(const AccessLogLine& l);
char* write_combined_line(const AccessLogLine& l, char* out);

}  // namespace vigil::http
