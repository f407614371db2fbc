#include "server/upgrade.h"

#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "server/inherit.h"
#include "server/listeners.h"
#include "vigil/core/log.h"

extern char** environ;

namespace vigil {

namespace {

std::vector<std::string>& command_line() {
  static std::vector<std::string> argv;  // set once at start, read on USR2
  return argv;
}

}  // namespace

void set_command_line(int argc, char** argv) {
  command_line().assign(argv, argv + argc);
}

pid_t exec_new_binary(const ListenerSet& listeners, Log& log) {
  const std::vector<std::string>& cmd = command_line();
  if (cmd.empty()) {
    VIGIL_LOG(log, kAlert, 0, "cannot execute a new binary: the command line is unknown");
    return -1;
  }
  // The environment without an older VIGIL= (the master has no threads, so
  // the child could allocate too; this is only done once).
  std::vector<std::string> env_strings;
  const std::string inherit_prefix = std::string(kInheritEnv) + "=";
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    if (std::strncmp(*e, inherit_prefix.c_str(), inherit_prefix.size()) != 0) {
      env_strings.emplace_back(*e);
    }
  }
  std::vector<char*> argv;
  for (const std::string& a : cmd) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  const pid_t pid = ::fork();
  if (pid == -1) {
    VIGIL_LOG(log, kAlert, errno, "fork() failed while executing new binary process \"%s\"",
              cmd[0].c_str());
    return -1;
  }
  if (pid > 0) {
    VIGIL_LOG(log, kNotice, 0, "start new binary process %d", static_cast<int>(pid));
    return pid;
  }
  // The child. The master blocks its signals outside sigsuspend(); the new
  // master must start with none blocked.
  sigset_t none;
  sigemptyset(&none);
  (void)::sigprocmask(SIG_SETMASK, &none, nullptr);
  env_strings.push_back(listeners_env(listeners));
  std::vector<char*> envp;
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  // As the shell ran it: a name without '/' is looked up in PATH.
  ::execvpe(argv[0], argv.data(), envp.data());
  // The old master sees this child exit and takes its pid file back.
  VIGIL_LOG(log, kAlert, errno, "execvpe() failed while executing new binary process \"%s\"",
            argv[0]);
  ::_exit(1);
}

}  // namespace vigil
