#pragma once
// Binary upgrade on the fly, as nginx's ngx_exec_new_binary: the master forks
// and execs its binary again (the file at argv[0], which may have been
// replaced) with the same command line and the listening sockets passed in
// VIGIL="fd;fd;" (server/inherit.h). The signal sequence is in
// docs/processes.md.

#include <sys/types.h>

#include <string>

namespace vigil {

class Log;
class ListenerSet;

// Remembers the command line to exec again (main calls it first thing).
void set_command_line(int argc, char** argv);

// Forks; the child clears the signal mask, marks the sockets of `listeners`
// inheritable and execs the binary with them in its environment. Returns the
// child's pid, or -1 (logged) when the fork failed or no command line is known.
pid_t exec_new_binary(const ListenerSet& listeners, Log& log);

// The pid file's name while an old master runs beside a new one (nginx's
// NGX_OLDPID_EXT).
inline std::string old_pid_path(const std::string& pid_path) {
  return pid_path + ".oldbin";
}

}  // namespace vigil
