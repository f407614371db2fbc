#include "server/conf_check.h"

#include <grp.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <set>
#include <string>

#include "core/conf/loader.h"
#include "core/core_module.h"
#include "event/event_conf.h"
#include "http/core/conf.h"
#include "http/core/servers.h"
#include "vigil/core/log.h"
#include "vigil/event/loop.h"

namespace vigil {

namespace {

// The loop a worker would create, created and thrown away: the backend's own
// checks (an unavailable method, FD_SETSIZE) run exactly as in the worker.
void check_event_loop(const Configuration& conf, ConfCheck& out) {
  const EventConf& ev = event_conf(conf);
  EventLoopConfig cfg;
  cfg.use = ev.use;
  cfg.connections = ev.connections;
  cfg.events = ev.epoll_events;
  cfg.kqueue_changes = ev.kqueue_changes;
  cfg.kqueue_events = ev.kqueue_events;
  Log quiet;
  (void)quiet.open("stderr", LogLevel::kEmerg);
  auto loop = EventLoop::create(cfg, quiet);
  if (!loop) {
    out.errors.push_back("a worker could not start its event loop" +
                         std::string(ev.use.empty() ? "" : " (use " + ev.use + ")") + ": " +
                         loop.status().to_string());
  }
}

void check_open_files(const Configuration& conf, ConfCheck& out) {
  const CoreConf& core = conf.core();
  const std::size_t connections = event_conf(conf).connections;
  rlim_t limit = RLIM_INFINITY;
  if (core.worker_rlimit_nofile > 0) {
    limit = static_cast<rlim_t>(core.worker_rlimit_nofile);
  } else {
    rlimit rl{};
    if (::getrlimit(RLIMIT_NOFILE, &rl) == 0) limit = rl.rlim_cur;
  }
  if (limit != RLIM_INFINITY && connections > limit) {
    out.warnings.push_back(std::to_string(connections) +
                           " worker_connections exceed open file resource limit: " +
                           std::to_string(static_cast<unsigned long long>(limit)));
  }
}

// Each root, opened as the worker user in a child process that drops
// privileges exactly as a worker does: ACLs and supplementary groups count.
void check_roots(const Configuration& conf, ConfCheck& out) {
  const http::HttpServers* servers = http::http_servers(conf);
  if (servers == nullptr) return;
  std::set<std::string> roots;
  for (const http::HttpLocConf* loc : servers->locations) roots.insert(loc->root_path);
  if (roots.empty()) return;
  const CoreConf& core = conf.core();
  const bool switch_user = ::geteuid() == 0 && core.user_uid != CoreConf::kNoUid;
  const std::string who = switch_user ? "user \"" + core.user + "\"" : "the current user";

  int fds[2];
  if (::pipe(fds) == -1) return;
  const pid_t pid = ::fork();
  if (pid == -1) {
    ::close(fds[0]);
    ::close(fds[1]);
    return;
  }
  if (pid == 0) {
    ::close(fds[0]);
    if (switch_user) {
      if (::setgid(static_cast<gid_t>(core.user_gid)) == -1 ||
          ::initgroups(core.user.c_str(), static_cast<gid_t>(core.user_gid)) == -1 ||
          ::setuid(static_cast<uid_t>(core.user_uid)) == -1) {
        ::_exit(2);
      }
    }
    // One byte per root: 0 readable, else the errno (capped).
    for (const std::string& root : roots) {
      int err = ::access(root.c_str(), R_OK | X_OK) == 0 ? 0 : errno;
      const unsigned char b = static_cast<unsigned char>(err > 255 ? 255 : err);
      if (::write(fds[1], &b, 1) != 1) ::_exit(3);
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  for (const std::string& root : roots) {
    unsigned char b = 0;
    if (::read(fds[0], &b, 1) != 1) break;
    if (b != 0) {
      out.warnings.push_back("root \"" + root + "\" cannot be read by " + who + " (" +
                             std::strerror(b) + "): requests for it will fail");
    }
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) == -1 && errno == EINTR) {
  }
}

}  // namespace

ConfCheck check_configuration(const Configuration& conf) {
  ConfCheck out;
  out.warnings = conf.warnings();
  const CoreConf& core = conf.core();
  if (core.user_set && ::geteuid() != 0) {
    out.warnings.push_back(
        "the \"user\" directive makes sense only if the master process runs with super-user "
        "privileges, ignored");
  }
  check_event_loop(conf, out);
  check_open_files(conf, out);
  check_roots(conf, out);
  return out;
}

}  // namespace vigil
