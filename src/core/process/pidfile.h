#pragma once
// The pid file: written by the master at start, removed at exit, read by
// `vigil -s` to find whom to signal.

#include <sys/types.h>

#include <string>

#include "vigil/core/result.h"

namespace vigil {

// Writes "<pid>\n" (truncating); the directory must exist.
Status write_pid_file(const std::string& path, pid_t pid);
// Reads and validates the pid: errors name the file, as nginx does.
Result<pid_t> read_pid_file(const std::string& path);
// Removes it if it still holds `pid` (a newer master may have rewritten it).
void remove_pid_file(const std::string& path, pid_t pid);

}  // namespace vigil
