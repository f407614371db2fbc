#pragma once
// The stream access log (nginx's ngx_stream_log_module):
//
//   stream {
//       log_format name [escape=default|json|none] string ...;
//       access_log path format [buffer=size] [gzip[=level]] [flush=time] [if=condition];
//       access_log off;
//       server { access_log ...; }      # a server's replace the stream block's
//   }
//
// A line is written when the session ends (stream/proxy.cc), in the format
// named (there is no predefined one in stream). A path with variables is
// evaluated per line and opened for it (never buffered). The files are
// core/access_log.h's, one set per worker; USR1 reopens them.

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/access_log.h"
#include "core/conf/module.h"
#include "core/conf/loader.h"
#include "stream/variables.h"
#include "vigil/core/clock.h"
#include "vigil/event/loop.h"

namespace vigil::stream {

struct Session;

struct LogFormat {
  std::string name;
  LogEscape escape = LogEscape::kDefault;
  VarTemplate format;
};

struct AccessLogConf {
  std::string format_name;
  std::shared_ptr<const LogFormat> format;  // resolved when the stream block is read
  std::string where;                        // " in F:L" of the access_log directive
  std::string path;                         // resolved against the prefix
  std::size_t buffer = 0;                   // bytes gathered before a write(2); 0: every line at once
  Msec flush = 0;                           // longest a line waits in the buffer; 0: until it is full
  int gzip = 0;                             // gzip=level: each write a gzip member
  std::shared_ptr<const VarTemplate> path_var;  // a path with variables
  // if=condition: the line is written only when this is neither empty nor "0".
  std::optional<VarTemplate> condition;
  int index = -1;  // into StreamFinalConf::access_logs (the worker's open files)
};

// The access_log lines of a stream block or server.
struct AccessLogs {
  std::vector<std::shared_ptr<AccessLogConf>> logs;
  bool off = false;
};

Status set_log_format(const DirectiveCall& call, std::vector<std::shared_ptr<LogFormat>>& formats);
Status set_access_log(const DirectiveCall& call, AccessLogs& logs);
// Names each log's format and numbers the files a worker opens (appended to
// `files`, each once).
Status resolve_access_logs(AccessLogs& logs,
                           const std::vector<std::shared_ptr<LogFormat>>& formats,
                           std::vector<AccessLogConf*>& files);

// The session ended: its lines, to every access_log of its server.
void write_access_logs(const Session& s);

// The worker hooks (server/modules.cc): open the files of `conf`'s stream
// block, flush and close them at exit, reopen them on USR1.
Status init_worker(const Configuration& conf, EventLoop& loop, int worker_index);
void exit_worker(EventLoop& loop);
void reopen_logs(EventLoop& loop);

}  // namespace vigil::stream
