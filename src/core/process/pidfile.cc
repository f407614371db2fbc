#include "core/process/pidfile.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>

namespace vigil {

Status write_pid_file(const std::string& path, pid_t pid) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd == -1) return Status::sys("open() \"" + path + "\"");
  std::string text = std::to_string(pid) + "\n";
  ssize_t n = ::write(fd, text.data(), text.size());
  int err = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(text.size())) {
    return Status::error("write() to \"" + path + "\" failed", n == -1 ? err : EIO);
  }
  return Status::ok();
}

Result<pid_t> read_pid_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd == -1) return Status::sys("open() \"" + path + "\"");
  char buf[32];
  ssize_t n = ::read(fd, buf, sizeof buf - 1);
  int err = errno;
  ::close(fd);
  if (n == -1) return Status::error("read() \"" + path + "\" failed", err);
  std::string text(buf, static_cast<std::size_t>(n));
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  char* end = nullptr;
  errno = 0;
  long pid = text.empty() ? 0 : std::strtol(text.c_str(), &end, 10);
  if (text.empty() || errno != 0 || *end != '\0' || pid <= 0 || pid > 4194304) {
    return Status::error("invalid PID number \"" + text + "\" in \"" + path + "\"");
  }
  return static_cast<pid_t>(pid);
}

void remove_pid_file(const std::string& path, pid_t pid) {
  auto current = read_pid_file(path);
  if (current && current.value() == pid) ::unlink(path.c_str());
}

}  // namespace vigil
