// systemd integration without systemd: the test plays its side. The readiness
// protocol is datagrams on the unix socket named by $NOTIFY_SOCKET; socket
// activation passes listening sockets as fds 3.. with LISTEN_FDS/LISTEN_PID.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "harness.h"

namespace vigil {
namespace {

using test::Harness;

std::string conf_text(int port, int workers) {
  return "daemon off;\nerror_log stderr notice;\nworker_processes " + std::to_string(workers) +
         ";\nevents { }\nhttp {\n  access_log off;\n  server {\n    listen 127.0.0.1:" +
         std::to_string(port) + ";\n    root html;\n  }\n}\n";
}

void make_docroot(Harness& h) {
  ::chmod(h.dir().c_str(), 0755);
  ::mkdir((h.dir() + "/html").c_str(), 0755);
  std::ofstream(h.dir() + "/html/index.html") << "hello\n";
}

// The next datagram on `fd` within the time, "" when none came.
std::string next_datagram(int fd, int timeout_ms = 5000) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, timeout_ms) != 1) return "";
  char buf[4096];
  const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : "";
}

std::string http_get(int port) {
  int fd = test::send_request(port, "GET / HTTP/1.0\r\nHost: t\r\n\r\n");
  if (fd == -1) return "";
  std::string all = test::read_n(fd, 1 << 16, 5000);
  ::close(fd);
  return all;
}

TEST(Systemd, NotifiesReadyReloadingAndStopping) {
  Harness h;
  make_docroot(h);
  const std::string sock_path = h.dir() + "/notify.sock";
  const int sock = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ASSERT_NE(sock, -1);
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::strncpy(sa.sun_path, sock_path.c_str(), sizeof sa.sun_path - 1);
  ASSERT_EQ(::bind(sock, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0) << std::strerror(errno);
  ::setenv("NOTIFY_SOCKET", sock_path.c_str(), 1);  // inherited by the server we start
  const int port = test::free_port();
  h.set_binary(VIGIL_BINARY);
  h.write_raw_conf(conf_text(port, 2));
  ASSERT_TRUE(h.start(2)) << h.log();
  ::unsetenv("NOTIFY_SOCKET");

  EXPECT_EQ(next_datagram(sock), "READY=1\nMAINPID=" + std::to_string(h.master()));
  ::kill(h.master(), SIGHUP);
  const std::string reloading = next_datagram(sock);
  EXPECT_EQ(reloading.rfind("RELOADING=1\nMONOTONIC_USEC=", 0), 0u) << reloading;
  EXPECT_GT(std::atoll(reloading.c_str() + std::strlen("RELOADING=1\nMONOTONIC_USEC=")), 0);
  EXPECT_EQ(next_datagram(sock), "READY=1");
  ASSERT_TRUE(h.wait_log("reconfigured")) << h.log();
  EXPECT_NE(http_get(port).find("hello"), std::string::npos);
  ::kill(h.master(), SIGQUIT);
  EXPECT_EQ(next_datagram(sock), "STOPPING=1");
  EXPECT_EQ(h.wait_exit(), 0) << h.log();
  // Workers never speak for the service.
  EXPECT_EQ(next_datagram(sock, 200), "");
  ::close(sock);
}

TEST(Systemd, SocketActivationUsesTheListeningSocketItIsGiven) {
  Harness h;
  make_docroot(h);
  // systemd's side: the socket is bound and listening before vigil starts;
  // vigil binding the address itself would fail with EADDRINUSE.
  sockaddr_in a{};
  const int ls = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_NE(ls, -1);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ASSERT_EQ(::bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << std::strerror(errno);
  ASSERT_EQ(::listen(ls, 64), 0);
  ASSERT_EQ(::getsockname(ls, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const int port = ntohs(a.sin_port);
  h.write_raw_conf(conf_text(port, 1));
  int out[2];
  ASSERT_EQ(::pipe2(out, O_CLOEXEC), 0);
  const pid_t pid = ::fork();
  ASSERT_NE(pid, -1);
  if (pid == 0) {
    ::dup2(out[1], 1);
    ::dup2(out[1], 2);
    ::dup2(ls, 3);  // SD_LISTEN_FDS_START; dup2 clears close-on-exec
    ::setenv("LISTEN_FDS", "1", 1);
    ::setenv("LISTEN_PID", std::to_string(::getpid()).c_str(), 1);
    ::execl(VIGIL_BINARY, VIGIL_BINARY, "-p", h.dir().c_str(), "-c", h.conf_path().c_str(),
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(out[1]);
  std::string log;
  const auto deadline = test::now_ms() + 10000;
  while (log.find("running:") == std::string::npos && test::now_ms() < deadline) {
    pollfd p{out[0], POLLIN, 0};
    if (::poll(&p, 1, 100) != 1) continue;
    char buf[4096];
    const ssize_t n = ::read(out[0], buf, sizeof buf);
    if (n <= 0) break;
    log.append(buf, static_cast<std::size_t>(n));
  }
  EXPECT_NE(log.find("using inherited socket #3 for 127.0.0.1:" + std::to_string(port) +
                     " (from systemd socket activation)"),
            std::string::npos)
      << log;
  EXPECT_NE(http_get(port).find("hello"), std::string::npos) << log;
  ::kill(pid, SIGTERM);
  int status = 0;
  EXPECT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << log;
  ::close(out[0]);
  ::close(ls);
}

}  // namespace
}  // namespace vigil
