// The library example works as a real server: a real process, real sockets.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "test_process.h"
#include "test_util.h"
#include "vigil/event/backend.h"

namespace vigil {
namespace {

class EchoServer : public ::testing::TestWithParam<std::string> {};

TEST_P(EchoServer, EchoesWhatEachClientSends) {
  test::Process server({std::string(VIGIL_EXAMPLES_DIR) + "/echo_server", "127.0.0.1:0", GetParam()});
  ASSERT_TRUE(server.wait_for_output("\n")) << server.output();
  std::smatch m;
  std::string out = server.output();
  ASSERT_TRUE(std::regex_search(out, m, std::regex("listening on 127\\.0\\.0\\.1:(\\d+) \\((\\w+)\\)")))
      << out;
  int port = std::stoi(m[1]);
  EXPECT_EQ(m[2], GetParam());

  // Several clients at once, each getting back exactly its own bytes.
  std::vector<int> fds;
  for (int i = 0; i < 20; ++i) {
    int fd = test::connect_loopback(port);
    ASSERT_GE(fd, 0);
    fds.push_back(fd);
  }
  for (std::size_t i = 0; i < fds.size(); ++i) {
    std::string msg = "client " + std::to_string(i) + " says hi\n";
    ASSERT_EQ(::write(fds[i], msg.data(), msg.size()), static_cast<ssize_t>(msg.size()));
  }
  for (std::size_t i = 0; i < fds.size(); ++i) {
    std::string msg = "client " + std::to_string(i) + " says hi\n";
    EXPECT_EQ(test::read_n(fds[i], msg.size()), msg);
  }
  // A larger message than one read buffer comes back whole.
  std::string big(200000, 'v');
  for (std::size_t i = 0; i < big.size(); i += 7) big[i] = static_cast<char>('a' + i % 26);
  std::size_t off = 0;
  std::string back;
  while (off < big.size()) {
    ssize_t n = ::write(fds[0], big.data() + off, std::min<std::size_t>(16384, big.size() - off));
    ASSERT_GT(n, 0);
    off += static_cast<std::size_t>(n);
    back += test::read_n(fds[0], static_cast<std::size_t>(n));
  }
  EXPECT_EQ(back, big);
  for (int fd : fds) ::close(fd);
}

INSTANTIATE_TEST_SUITE_P(Backends, EchoServer, ::testing::ValuesIn(test::backend_params()),
                         test::backend_param_name);

}  // namespace
}  // namespace vigil
