#pragma once
// A worker's credentials and process settings (nginx's ngx_worker_process_init):
// RLIMIT_CORE, the switch to the unprivileged user, and working_directory.
// The master keeps root to open sockets and files on reload; each worker
// gives it up once it has opened what needs it.

#include "vigil/core/result.h"

namespace vigil {

struct CoreConf;

// Sets RLIMIT_CORE from worker_rlimit_core (if set). Call before dropping
// privileges: raising the hard limit needs root.
Status apply_rlimit_core(const CoreConf& core);

// When the process runs as root and a worker user is resolved: setgid,
// initgroups (the user's supplementary groups, as nginx), setuid; then checks
// that root cannot be regained. Refuses to go on as root unless the
// configuration says `user root`. Also keeps the process dumpable (core
// files), and changes to working_directory. Not root: only the chdir.
Status drop_privileges(const CoreConf& core);

}  // namespace vigil
