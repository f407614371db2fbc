#include "core/process/privileges.h"

#include <grp.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "core/core_module.h"

namespace vigil {

Status apply_rlimit_core(const CoreConf& core) {
  if (core.worker_rlimit_core < 0) return Status::ok();
  const auto size = static_cast<rlim_t>(core.worker_rlimit_core);
  rlimit rl{size, size};
  if (::setrlimit(RLIMIT_CORE, &rl) == -1) {
    return Status::sys("setrlimit(RLIMIT_CORE, " + std::to_string(core.worker_rlimit_core) + ")");
  }
  return Status::ok();
}

Status drop_privileges(const CoreConf& core) {
  if (::geteuid() == 0) {
    if (core.user_uid == CoreConf::kNoUid) {
      return Status::error("refusing to run a worker process as root: no worker user resolved");
    }
    const auto uid = static_cast<uid_t>(core.user_uid);
    const auto gid = static_cast<gid_t>(core.user_gid);
    if (uid == 0 && !core.user_set) {
      return Status::error(
          "refusing to run a worker process as root: write \"user root;\" to allow it");
    }
    // Group first: once the uid is gone, the groups can no longer be changed.
    if (::setgid(gid) == -1) return Status::sys("setgid(" + std::to_string(gid) + ")");
    if (::initgroups(core.user.c_str(), gid) == -1) {
      return Status::sys("initgroups(" + core.user + ", " + std::to_string(gid) + ")");
    }
    if (::setuid(uid) == -1) return Status::sys("setuid(" + std::to_string(uid) + ")");
    if (uid != 0) {
      // setuid() as root sets all three uids; make sure none came back.
      uid_t r = 0, e = 0, s = 0;
      if (::getresuid(&r, &e, &s) == -1) return Status::sys("getresuid()");
      if (r == 0 || e == 0 || s == 0 || ::setuid(0) == 0) {
        return Status::error("root privileges were not dropped: refusing to go on");
      }
    }
    // A set-uid change clears the dumpable flag: core files (worker_rlimit_core)
    // would never be written.
    if (::prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) == -1) return Status::sys("prctl(PR_SET_DUMPABLE)");
  }
  if (!core.working_directory.empty() && ::chdir(core.working_directory.c_str()) == -1) {
    return Status::sys("chdir(\"" + core.working_directory + "\")");
  }
  return Status::ok();
}

}  // namespace vigil
