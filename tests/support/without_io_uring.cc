// Runs a program on a "kernel without io_uring": a seccomp filter makes
// io_uring_setup(2) fail with ENOSYS, as on Linux before 5.1, then execs
// argv[1..]. Used by the command-line tests of `use io_uring`.
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: without_io_uring program [args...]\n");
    return 2;
  }
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog prog{};
  prog.len = static_cast<unsigned short>(sizeof filter / sizeof filter[0]);
  prog.filter = filter;
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1 ||
      ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == -1) {
    std::fprintf(stderr, "without_io_uring: seccomp: %s\n", std::strerror(errno));
    return 2;
  }
  ::execv(argv[1], argv + 1);
  std::fprintf(stderr, "without_io_uring: exec %s: %s\n", argv[1], std::strerror(errno));
  return 2;
}
