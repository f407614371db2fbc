#include "server/worker_files.h"

#include <fcntl.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "core/core_module.h"
#include "core/syslog.h"
#include "http/core/conf.h"
#include "http/core/servers.h"
#include "server/cycle.h"
#include "vigil/core/log.h"

namespace vigil {

namespace {

std::vector<std::string> worker_files(const Cycle& cycle) {
  std::vector<std::string> files;
  const CoreConf& core = cycle.conf->core();
  auto is_file = [](const std::string& t) {
    return t != "stderr" && !t.starts_with(SyslogPeer::kPrefix);
  };
  if (is_file(core.error_log)) files.push_back(core.error_log);
  for (const auto& [path, level] : core.more_error_logs) {
    if (is_file(path)) files.push_back(path);
  }
  cycle.conf->error_logs().for_each_file([&](const std::string& path) { files.push_back(path); });
  if (const http::HttpServers* servers = http::http_servers(*cycle.conf); servers != nullptr) {
    for (const http::AccessLogConf* al : servers->access_logs) {
      if (is_file(al->path)) files.push_back(al->path);
    }
  }
  return files;
}

}  // namespace

void prepare_worker_files(const Cycle& cycle, Log& log) {
  const CoreConf& core = cycle.conf->core();
  if (::geteuid() != 0 || core.user_uid == CoreConf::kNoUid || core.user_uid == 0) return;
  const auto uid = static_cast<uid_t>(core.user_uid);
  for (const std::string& path : worker_files(cycle)) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd == -1) {
      VIGIL_LOG(log, kAlert, errno, "open() \"%s\" failed", path.c_str());
      continue;
    }
    if (::fchown(fd, uid, static_cast<gid_t>(-1)) == -1) {
      VIGIL_LOG(log, kAlert, errno, "fchown(\"%s\", %u) failed", path.c_str(), core.user_uid);
    }
    (void)::close(fd);  // opened only to create and chown it
  }
}

}  // namespace vigil
