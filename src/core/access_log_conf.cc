#include "core/access_log_conf.h"

#include "core/conf/values.h"
#include "core/syslog.h"

namespace vigil {

bool parse_log_buffer_param(const std::string& a, LogBufferParams& p, std::string& error) {
  if (a.starts_with("buffer=")) {
    auto v = parse_size(std::string_view(a).substr(7));
    if (!v || *v > (64u << 20)) {
      error = "invalid buffer size \"" + a.substr(7) + "\"";
    } else {
      p.buffer = static_cast<std::size_t>(*v);
      p.buffer_set = true;
    }
    return true;
  }
  if (a == "gzip" || a.starts_with("gzip=")) {
    p.gzip = 1;  // nginx's default level for logs
    if (a.size() > 4) {
      auto v = parse_number(std::string_view(a).substr(5));
      if (!v || *v < 1 || *v > 9) {
        error = "invalid compression level \"" + a.substr(5) + "\"";
      } else {
        p.gzip = static_cast<int>(*v);
      }
    }
    return true;
  }
  if (a.starts_with("flush=")) {
    auto v = parse_msec(std::string_view(a).substr(6));
    if (!v || *v == 0) {
      error = "invalid flush time \"" + a.substr(6) + "\"";
    } else {
      p.flush = *v;
    }
    return true;
  }
  return false;
}

Status finish_log_buffer_params(LogBufferParams& p, const std::string& path, bool path_has_vars) {
  if (path.starts_with(SyslogPeer::kPrefix)) {
    // Each line is a datagram of its own, sent at once.
    if (p.buffer_set || p.gzip != 0 || p.flush != 0) {
      return Status::error("logs to syslog cannot be buffered");
    }
    auto peer = SyslogPeer::parse(path);
    return peer ? Status::ok() : peer.status();
  }
  if (p.gzip != 0 && !p.buffer_set) {
    p.buffer = 64 * 1024;
    p.buffer_set = true;
  }
  if (p.flush != 0 && !p.buffer_set) {
    return Status::error("no buffer is defined for access_log \"" + path + "\"");
  }
  if (path_has_vars && p.buffer_set)
    return Status::error("buffered logs cannot have variables in name");
  return Status::ok();
}

}  // namespace vigil
