// A binary upgrade keeps a stream server's UDP socket: the new master takes
// it over (as a TCP one), and after the old master has gone the port still
// answers.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <regex>
#include <string>
#include <thread>

#include "harness.h"
#include "test_util.h"

namespace vigil {
namespace {

// One datagram to 127.0.0.1:port from a fresh socket, and the answer
// ("<none>" after 3 s).
std::string udp_io(int port, const std::string& d) {
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string out = "<none>";
  if (fd != -1 && ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::send(fd, d.data(), d.size(), 0) == static_cast<ssize_t>(d.size())) {
    pollfd p{fd, POLLIN, 0};
    char buf[512];
    ssize_t n = 0;
    if (::poll(&p, 1, 3000) > 0 && (n = ::recv(fd, buf, sizeof buf, 0)) >= 0) {
      out.assign(buf, static_cast<std::size_t>(n));
    }
  }
  if (fd != -1) ::close(fd);
  return out;
}

TEST(StreamUdpUpgrade, NewMasterTakesTheUdpSocket) {
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);  // the new master is reparented to us
  test::Harness h;
  ::chmod(h.dir().c_str(), 0755);
  const int port = test::free_port();
  h.set_binary(VIGIL_BINARY);
  h.write_raw_conf(
      "daemon off;\nerror_log stderr notice;\nworker_processes 1;\nevents { }\n"
      "stream {\n  server {\n    listen 127.0.0.1:" +
      std::to_string(port) + " udp;\n    return $pid;\n  }\n}\n");
  ASSERT_TRUE(h.start(1)) << h.log();
  const pid_t old_master = h.master();
  const std::string old_worker = udp_io(port, "?");
  ASSERT_NE(old_worker, "<none>") << h.log();

  ::kill(old_master, SIGUSR2);
  ASSERT_TRUE(h.wait_log("start new binary process")) << h.log();
  std::smatch m;
  const std::string log = h.log();
  ASSERT_TRUE(std::regex_search(log, m, std::regex("start new binary process (\\d+)")));
  const auto new_master = static_cast<pid_t>(std::stol(m[1]));
  ASSERT_TRUE(h.wait_log_count("running:", 2)) << h.log();
  EXPECT_NE(h.log().find("using inherited socket"), std::string::npos) << h.log();
  EXPECT_EQ(h.log().find("inherited descriptor"), std::string::npos) << h.log();

  // The old generation leaves; the new one answers on the same socket.
  ::kill(old_master, SIGQUIT);
  EXPECT_EQ(h.wait_exit(10000), 0) << h.log();
  std::string answer;
  EXPECT_TRUE(test::wait_for(
      [&] { return (answer = udp_io(port, "?")) != "<none>" && answer != old_worker; }, 10000))
      << answer << "\n"
      << h.log();

  ::kill(new_master, SIGTERM);
  for (int i = 0; i < 500 && ::waitpid(new_master, nullptr, WNOHANG) != new_master; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  h.stop();
}

}  // namespace
}  // namespace vigil
