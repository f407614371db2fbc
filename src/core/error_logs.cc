#include "core/error_logs.h"

#include "core/syslog.h"

namespace vigil {

Log* ErrorLogs::make() {
  logs_.push_back(std::make_unique<Log>());
  return logs_.back().get();
}

Status ErrorLogs::reopen() {
  Status first;
  for (const auto& log : logs_) {
    if (Status s = log->reopen(); !s && first) first = std::move(s);
  }
  return first;
}

Status parse_error_log(const DirectiveCall& call, LogLevel* level) {
  const std::string& target = call.arg(0);
  if (target.empty()) return call.invalid_value(0);
  if (target.starts_with("memory:")) {
    return call.error("the \"memory:\" error log needs a debug build, which vigil has not");
  }
  if (target.starts_with(SyslogPeer::kPrefix)) {
    auto peer = SyslogPeer::parse(target);
    if (!peer) return call.error(peer.status().message());
  }
  *level = LogLevel::kError;
  if (call.arg_count() == 2 && !parse_log_level(call.arg(1), level)) {
    return call.invalid_value(
        1,
        ", it must be \"debug\", \"info\", \"notice\", \"warn\", \"error\", \"crit\", "
        "\"alert\" or \"emerg\"");
  }
  return Status::ok();
}

Status set_error_log(const DirectiveCall& call, Log*& slot) {
  LogLevel level;
  if (Status s = parse_error_log(call, &level); !s) return s;
  const std::string target =
      call.arg(0) == "stderr" || call.arg(0).starts_with(SyslogPeer::kPrefix)
          ? call.arg(0)
          : call.env().prefixed(call.arg(0));
  const bool first = slot == nullptr;
  if (first) slot = call.error_logs().make();
  Status s = first ? slot->open(target, level) : slot->add(target, level);
  if (!s) return call.error(s.to_string());  // errno text included: the load prints only the message
  return Status::ok();
}

}  // namespace vigil
