#include "stream/log.h"

#include <unistd.h>

#include <cerrno>
#include <new>

#include "core/access_log_conf.h"
#include "core/syslog.h"
#include "core/conf/values.h"
#include "stream/session.h"
#include "stream/stream_conf.h"
#include "vigil/core/log.h"
#include "vigil/event/event.h"

namespace vigil::stream {
namespace {

// The open files of one worker's stream block, and the timer that flushes
// their buffers (flush=).
class LogWorker {
 public:
  explicit LogWorker(EventLoop& loop) : loop_(loop) {
    flush_event_.data = this;
    flush_event_.handler = flush_timer_handler;
    flush_event_.log = &loop.log();
    flush_event_.cancelable = 1;  // buffered lines never hold up a graceful exit
  }
  ~LogWorker() { loop_.del_timer(flush_event_); }
  LogWorker(const LogWorker&) = delete;
  LogWorker& operator=(const LogWorker&) = delete;

  Status open(const std::vector<AccessLogConf*>& confs) {
    for (const AccessLogConf* conf : confs) {
      std::unique_ptr<AccessLog> log(
          new (std::nothrow) AccessLog(conf->path, conf->buffer, conf->flush, conf->gzip));
      if (log == nullptr) return Status::error("out of memory for the stream access logs");
      if (Status s = log->open(); !s) return s;
      logs_.push_back(std::move(log));
    }
    return Status::ok();
  }
  AccessLog* file(int index) {
    return index >= 0 && static_cast<std::size_t>(index) < logs_.size() ? logs_[index].get()
                                                                        : nullptr;
  }
  void arm_flush(Msec after) {
    if (!flush_event_.timer_set) loop_.add_timer(flush_event_, after);
  }
  void flush() {
    for (auto& log : logs_) log->flush(loop_.log());
  }
  void reopen() {
    for (auto& log : logs_) {
      if (Status s = log->reopen(loop_.log()); !s) {
        VIGIL_LOG(loop_.log(), kAlert, s.err(), "%s", s.message().c_str());
      }
    }
  }

 private:
  static void flush_timer_handler(Event& ev) {
    ev.timedout = 0;
    ev.owner<LogWorker>()->flush();
  }

  EventLoop& loop_;
  std::vector<std::unique_ptr<AccessLog>> logs_;
  Event flush_event_;
};

const char kContextKey = 0;

LogWorker* worker_of(const EventLoop& loop) {
  return static_cast<LogWorker*>(loop.context(&kContextKey));
}

// if=: neither empty nor "0".
bool condition_holds(const Session& s, const VarTemplate& t) {
  std::string_view v;
  if (!t.evaluate(s, v)) return false;
  return !v.empty() && v != "0";
}

// access_log with variables in its path: the file of this line, opened for it.
void write_variable_log(const Session& s, const AccessLogConf& conf) {
  Connection& c = *s.client;
  std::string_view path;
  const LogFormat& f = *conf.format;
  const bool dash = f.escape == LogEscape::kDefault;
  const std::size_t need = f.format.length(s, f.escape, dash) + 1;
  char* line = static_cast<char*>(c.arena->alloc(need, 1));
  if (!conf.path_var->evaluate(s, path) || line == nullptr) {
    VIGIL_LOG(*c.log, kAlert, 0, "*%llu out of memory for an access log line",
              static_cast<unsigned long long>(c.number));
    return;
  }
  // The path NUL-terminated, in the arena too.
  char* name = c.arena->dup(path.data(), path.size() + 1);
  if (name == nullptr) return;
  name[path.size()] = '\0';
  const int fd = open_log_file(name);
  if (fd == -1) {
    VIGIL_LOG(*c.log, kCrit, errno, "*%llu open() \"%s\" failed",
              static_cast<unsigned long long>(c.number), name);
    return;
  }
  char* end = f.format.write(s, line, f.escape, dash);
  *end++ = '\n';
  write_log_fd(fd, line, static_cast<std::size_t>(end - line), name, *c.log);
  (void)::close(fd);  // written with O_APPEND: nothing pending
}

}  // namespace

Status set_log_format(const DirectiveCall& call, std::vector<std::shared_ptr<LogFormat>>& formats) {
  auto f = std::make_shared<LogFormat>();
  f->name = call.arg(0);
  for (const auto& other : formats) {
    if (other->name == f->name) return call.error("duplicate log_format name \"" + f->name + "\"");
  }
  std::size_t i = 1;
  if (call.arg(i).starts_with("escape=")) {
    const std::string_view e = std::string_view(call.arg(i)).substr(7);
    if (e == "default") {
      f->escape = LogEscape::kDefault;
    } else if (e == "json") {
      f->escape = LogEscape::kJson;
    } else if (e == "none") {
      f->escape = LogEscape::kNone;
    } else {
      return call.error("unknown log format escaping \"" + std::string(e) + "\"");
    }
    ++i;
    if (i >= call.arg_count()) {
      return call.error("invalid number of arguments in \"log_format\" directive");
    }
  }
  std::string text;
  for (; i < call.arg_count(); ++i) text += call.arg(i);
  auto t = VarTemplate::compile(text);
  if (!t) return call.error(t.status().message());
  f->format = std::move(t.value());
  formats.push_back(std::move(f));
  return Status::ok();
}

Status set_access_log(const DirectiveCall& call, AccessLogs& logs) {
  if (call.arg(0) == "off") {
    if (call.arg_count() != 1) return call.error("invalid parameter \"" + call.arg(1) + "\"");
    logs.off = true;
    logs.logs.clear();
    return Status::ok();
  }
  if (call.arg_count() < 2) return call.error("log format is not specified");
  auto log = std::make_shared<AccessLogConf>();
  const bool syslog = call.arg(0).starts_with(SyslogPeer::kPrefix);
  log->path = syslog ? call.arg(0) : call.env().prefixed(call.arg(0));
  log->where = call.where();
  log->format_name = call.arg(1);
  if (!syslog && call.arg(0).find('$') != std::string::npos) {
    auto t = VarTemplate::compile(log->path);
    if (!t) return call.error(t.status().message());
    if (!t.value().is_literal()) {
      log->path_var = std::make_shared<const VarTemplate>(std::move(t.value()));
    }
  }
  LogBufferParams params;
  for (std::size_t i = 2; i < call.arg_count(); ++i) {
    const std::string& a = call.arg(i);
    std::string error;
    if (parse_log_buffer_param(a, params, error)) {
      if (!error.empty()) return call.error(error);
    } else if (a.starts_with("if=") && a.size() > 3) {
      auto t = VarTemplate::compile(std::string_view(a).substr(3));
      if (!t) return call.error(t.status().message());
      log->condition = std::move(t.value());
    } else {
      return call.error("invalid parameter \"" + a + "\"");
    }
  }
  if (Status s = finish_log_buffer_params(params, call.arg(0), log->path_var != nullptr); !s) {
    return call.error(s.message());
  }
  log->buffer = params.buffer;
  log->flush = params.flush;
  log->gzip = params.gzip;
  logs.off = false;
  logs.logs.push_back(std::move(log));
  return Status::ok();
}

Status resolve_access_logs(AccessLogs& logs, const std::vector<std::shared_ptr<LogFormat>>& formats,
                           std::vector<AccessLogConf*>& files) {
  for (const auto& log : logs.logs) {
    if (log->format == nullptr) {
      for (const auto& f : formats) {
        if (f->name == log->format_name) log->format = f;
      }
      if (log->format == nullptr) {
        return Status::error("unknown log format \"" + log->format_name + "\"" + log->where);
      }
    }
    if (log->path_var == nullptr && log->index < 0) {
      log->index = static_cast<int>(files.size());
      files.push_back(log.get());
    }
  }
  return Status::ok();
}

void write_access_logs(const Session& s) {
  const StreamSrvConf& conf = *s.conf;
  if (conf.access_logs.logs.empty()) return;
  Connection& c = *s.client;
  LogWorker* w = worker_of(*c.loop);
  for (const auto& log : conf.access_logs.logs) {
    if (log->condition && !condition_holds(s, *log->condition)) continue;
    if (log->path_var != nullptr) {
      write_variable_log(s, *log);
      continue;
    }
    AccessLog* file = w != nullptr ? w->file(log->index) : nullptr;
    if (file == nullptr) continue;
    const LogFormat& f = *log->format;
    const bool dash = f.escape == LogEscape::kDefault;  // nginx: "-" only there
    const std::size_t need = f.format.length(s, f.escape, dash) + 1;
    char* line = file->begin(need, c.loop->log());
    char* end = f.format.write(s, line, f.escape, dash);
    *end++ = '\n';
    if (file->end(end, c.loop->log()) && file->flush_after() > 0) w->arm_flush(file->flush_after());
  }
}

Status init_worker(const Configuration& conf, EventLoop& loop, int) {
  const StreamFinalConf* fin = stream_final(conf);
  if (fin == nullptr || fin->access_logs.empty()) return Status::ok();
  std::unique_ptr<LogWorker> w(new (std::nothrow) LogWorker(loop));
  if (w == nullptr) return Status::error("out of memory for the stream access logs");
  if (Status s = w->open(fin->access_logs); !s) return s;
  if (!loop.set_context(&kContextKey, w.get())) {
    return Status::error("no free context slot in the event loop for the stream logs");
  }
  w.release();  // the loop's until exit_worker
  return Status::ok();
}

void exit_worker(EventLoop& loop) {
  LogWorker* w = worker_of(loop);
  if (w == nullptr) return;
  w->flush();
  loop.set_context(&kContextKey, nullptr);
  delete w;
}

void reopen_logs(EventLoop& loop) {
  if (LogWorker* w = worker_of(loop)) w->reopen();
}

}  // namespace vigil::stream
