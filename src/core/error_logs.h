#pragma once
// The error logs of the levels below main (nginx's error_log in http,
// server, location, stream, mail...): each level that names error_log gets
// its own Log, owned by the configuration's ErrorLogs. The files are opened
// while the configuration loads (so -t checks them, and the master opens them
// before it forks the workers, which inherit the descriptors); a worker and
// the master reopen them all on USR1. A level without error_log keeps its
// parent's Log, and the main level's is the loop's own (null here).
//
//   Log* log = nullptr;                        // in the level's conf
//   set_error_log(call, log);                  // the directive's handler
//   c.log = log != nullptr ? log : &loop.log();  // when a connection enters the level

#include <memory>
#include <string>
#include <vector>

#include "core/conf/module.h"
#include "vigil/core/log.h"
#include "vigil/core/result.h"

namespace vigil {

class ErrorLogs {
 public:
  ErrorLogs() = default;
  ErrorLogs(const ErrorLogs&) = delete;
  ErrorLogs& operator=(const ErrorLogs&) = delete;

  // A new log, empty (stderr at notice) until its first target is opened.
  Log* make();
  // Reopens every file (after logrotate moved them); the first failure is
  // returned, the others are still tried.
  Status reopen();
  template <class F>
  void for_each_file(F&& f) const {
    for (const auto& log : logs_) log->for_each_file(f);
  }
  bool empty() const { return logs_.empty(); }

 private:
  std::vector<std::unique_ptr<Log>> logs_;
};

// error_log file|stderr|syslog:...|memory:... [level]: the target and level
// of one directive, checked ("memory:" and bad syslog parameters are errors
// naming the directive's file:line).
Status parse_error_log(const DirectiveCall& call, LogLevel* level);

// The handler of error_log below main: the level's first error_log makes
// `slot` a new Log of the configuration, later ones at the same level add
// targets to it.
Status set_error_log(const DirectiveCall& call, Log*& slot);

}  // namespace vigil
