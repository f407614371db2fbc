#pragma once
// Listening sockets a master receives instead of opening them: from the
// master it replaces in a binary upgrade (nginx's NGINX="fd;fd;" environment
// variable, here VIGIL="fd;fd;"), or from systemd's socket activation
// (LISTEN_FDS, LISTEN_PID: fds 3, 4, ... ; sd_listen_fds(3)). make_cycle takes
// them over like a reload takes over the previous cycle's sockets: by address
// (and reuseport, ipv6only, and the order of a reuseport listener's clones);
// those the configuration no longer wants are closed.

#include <string>

#include "server/listeners.h"

namespace vigil {

class Log;

// The environment variable a master hands its listening sockets over in.
inline constexpr const char* kInheritEnv = "VIGIL";

// Reads VIGIL (else LISTEN_FDS when LISTEN_PID is this process) and removes
// it from the environment, so workers and a later upgrade do not see it. The
// descriptors become close-on-exec; one that is not a listening stream socket
// is logged and closed. `from` says where they came from ("" when none).
ListenerSet inherited_listeners(Log& log, std::string* from);

// "VIGIL=fd;fd;...;" for every socket of `set`; clears their close-on-exec
// flag in the calling process (the child about to exec).
std::string listeners_env(const ListenerSet& set);

}  // namespace vigil
