#pragma once
// Runs a real program for a test: argv in, stdout+stderr captured, killed (and
// reaped) when the Process object goes away, so a failing test leaves nothing.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

namespace vigil::test {

class Process {
 public:
  // Starts argv[0] with argv (searched in PATH when it has no slash).
  explicit Process(const std::vector<std::string>& argv, const std::string& cwd = "") {
    int out[2];
    if (::pipe2(out, O_CLOEXEC) == -1) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(out[1], 1);
      ::dup2(out[1], 2);
      if (!cwd.empty() && ::chdir(cwd.c_str()) == -1) ::_exit(126);
      std::vector<char*> args;
      for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      ::execvp(args[0], args.data());
      ::_exit(127);
    }
    ::close(out[1]);
    fd_ = out[0];
  }
  ~Process() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (fd_ != -1) ::close(fd_);
  }
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  pid_t pid() const { return pid_; }

  // Reads output until `needle` appears or the time is up; true if it appeared.
  bool wait_for_output(const std::string& needle, int timeout_ms = 10000) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (output_.find(needle) == std::string::npos) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                      deadline - std::chrono::steady_clock::now()).count();
      if (left <= 0 || !read_some(static_cast<int>(left))) return false;
    }
    return true;
  }

  // Waits for exit (reading all output); returns the exit code, 128+signal, or -1 on timeout.
  int wait(int timeout_ms = 20000) {
    if (reaped_) return code_;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      int status = 0;
      pid_t r = ::waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        reaped_ = true;
        while (read_some(50)) {
        }
        code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        return code_;
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                      deadline - std::chrono::steady_clock::now()).count();
      if (left <= 0) return -1;
      // Reading the output is the wait: it returns when there is some, or
      // after 10 ms (a child that exited closes the pipe, not always at once).
      if (!read_some(std::min<int>(10, static_cast<int>(left)))) ::usleep(1000);
    }
  }

  // Signals the process, unless it was already reaped (its pid may be reused).
  void signal(int sig) {
    if (pid_ > 0 && !reaped_) ::kill(pid_, sig);
  }
  bool reaped() const { return reaped_; }
  const std::string& output() const { return output_; }

 private:
  bool read_some(int timeout_ms) {
    if (fd_ == -1) return false;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) <= 0) return false;
    char buf[4096];
    ssize_t n = ::read(fd_, buf, sizeof buf);
    if (n <= 0) return false;
    output_.append(buf, static_cast<std::size_t>(n));
    return true;
  }

  pid_t pid_ = -1;
  int fd_ = -1;
  bool reaped_ = false;
  int code_ = -1;
  std::string output_;
};

// Runs argv to completion; returns {exit code, output}.
inline std::pair<int, std::string> run(const std::vector<std::string>& argv,
                                       const std::string& cwd = "") {
  Process p(argv, cwd);
  int rc = p.wait();
  return {rc, p.output()};
}

}  // namespace vigil::test
