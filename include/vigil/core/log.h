#pragma once
// The error log, in nginx's format:
//   2026/11/21 19:03:32 [notice] 4018#0: message (13: Permission denied)
// Written with one write(2) per line; a file log can be reopened (USR1).

#include <cstdarg>
#include <memory>
#include <string>
#include <string_view>

#include "vigil/core/result.h"

namespace vigil {

class SyslogPeer;  // src/core/syslog.h

enum class LogLevel : int { kEmerg = 0, kAlert, kCrit, kError, kWarn, kNotice, kInfo, kDebug };

std::string_view log_level_name(LogLevel level);
// Parses "debug".."emerg" (nginx spells error as "error"); false when unknown.
bool parse_log_level(std::string_view name, LogLevel* out);

// Lifetime: everything that keeps a Log* (EventLoop, Listening, Connection,
// Event, PeerConnection) keeps it unowned; the Log must outlive them all. A
// Log owns its file descriptor (closed by the destructor, or by reopen()).
// Log::global() lives for the whole process.
class Log {
 public:
  Log();  // stderr, level notice
  ~Log();
  Log(const Log&) = delete;
  Log& operator=(const Log&) = delete;

  // "stderr", "syslog:server=..." (src/core/syslog.h) or a file path
  // (opened for append, created 0644). Drops the targets add() gave.
  Status open(std::string_view target, LogLevel level);
  // One more target, with its own level (nginx's several error_log lines at
  // one level): a line goes to every target whose level admits it.
  static constexpr int kMaxExtraTargets = 7;
  Status add(std::string_view target, LogLevel level);
  Status reopen();  // reopen the same paths (after logrotate)
  // Every file this log writes to (not stderr, not syslog).
  template <class F>
  void for_each_file(F&& f) const {
    if (owns_fd_) f(target_);
    for (int i = 0; i < nextra_; ++i) {
      if (extra_[i].owns) f(extra_[i].target);
    }
  }
  void set_level(LogLevel level) {
    level_ = level;
    update_max_level();
  }
  LogLevel level() const { return level_; }
  bool enabled(LogLevel level) const {
    return static_cast<int>(level) <= static_cast<int>(max_level_);
  }
  const std::string& target() const { return target_; }
  int fd() const { return fd_; }

  // Writes one line if `level` is enabled. `err` is an errno value or 0.
  void write(LogLevel level, int err, const char* fmt, ...) __attribute__((format(printf, 4, 5)));
  void vwrite(LogLevel level, int err, const char* fmt, va_list ap);

  // The process-wide default log (stderr until configured).
  static Log& global();

 private:
  struct Extra {
    int fd = -1;
    bool owns = false;
    LogLevel level = LogLevel::kError;
    std::string target;
    std::unique_ptr<SyslogPeer> syslog;  // set: fd is unused
  };
  void close_extras();
  void update_max_level();

  int fd_ = 2;
  bool owns_fd_ = false;
  LogLevel level_ = LogLevel::kNotice;
  LogLevel max_level_ = LogLevel::kNotice;  // the most verbose of all targets
  std::string target_ = "stderr";
  std::unique_ptr<SyslogPeer> syslog_;  // set: the first target is syslog, fd_ unused
  Extra extra_[kMaxExtraTargets];
  int nextra_ = 0;
};

}  // namespace vigil

// Formats nothing unless the level is enabled.
#define VIGIL_LOG(log, lvl, err, ...)                                   \
  do {                                                                  \
    if ((log).enabled(::vigil::LogLevel::lvl))                          \
      (log).write(::vigil::LogLevel::lvl, (err), __VA_ARGS__);          \
  } while (0)
