#pragma once
// The buffering parameters every `access_log` directive takes (http and
// stream): buffer=size, gzip[=level], flush=time, and nginx's rules between
// them. The path, the format and if= are the layer's.

#include <cstddef>
#include <string>
#include <string_view>

#include "vigil/core/clock.h"
#include "vigil/core/result.h"

namespace vigil {

struct LogBufferParams {
  std::size_t buffer = 0;  // bytes gathered before a write(2); 0: every line at once
  Msec flush = 0;          // longest a line waits in the buffer; 0: until it is full
  int gzip = 0;            // gzip=level: each write a gzip member
  bool buffer_set = false;
};

// One argument: true when it is one of these parameters (`error` is set
// when its value is wrong), false when it is not.
bool parse_log_buffer_param(const std::string& arg, LogBufferParams& p, std::string& error);

// After the last argument: gzip alone buffers 64k; flush needs a buffer; a
// buffered log has no variables in its name; a syslog: target is valid and
// not buffered. `path` is the directive's first
// argument, for the message.
Status finish_log_buffer_params(LogBufferParams& p, const std::string& path, bool path_has_vars);

}  // namespace vigil
