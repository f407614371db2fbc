// examples/http_client: a GET on PeerConnection against a real vigil, and
// its errors: refused, a server that never answers (read timeout), a
// listener whose queue is full (connect timeout), a 404.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "integration/http_harness.h"
#include "test_util.h"

namespace vigil::test {
namespace {

const std::string kClient = std::string(VIGIL_EXAMPLES_DIR) + "/http_client";

std::string url(int port, const std::string& path) {
  return "http://127.0.0.1:" + std::to_string(port) + path;
}

class HttpClientExample : public ::testing::TestWithParam<std::string> {};

TEST_P(HttpClientExample, FetchesABodyAndReportsTheStatus) {
  VigilServer server;
  std::string big(300000, 'x');
  for (std::size_t i = 0; i < big.size(); i += 61) big[i] = '\n';
  server.write("html/hello.txt", "hello from vigil\n");
  server.write("html/big.txt", big);
  ASSERT_TRUE(server.start("server { listen 127.0.0.1:0; root html; }")) << server.output();
  const int port = server.port();

  auto [rc, out] = run({kClient, url(port, "/hello.txt"), "2000", "2000", GetParam()});
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out, "status 200\nhello from vigil\n");

  auto [rc2, out2] = run({kClient, url(port, "/big.txt"), "2000", "5000", GetParam()});
  EXPECT_EQ(rc2, 0) << out2.substr(0, 200);
  EXPECT_TRUE(out2 == "status 200\n" + big) << out2.size() << " bytes";

  auto [rc3, out3] = run({kClient, url(port, "/missing"), "2000", "2000", GetParam()});
  EXPECT_EQ(rc3, 1) << out3;
  EXPECT_EQ(out3.rfind("status 404\n", 0), 0u) << out3;
}

TEST_P(HttpClientExample, RefusedIsAnError) {
  ClosedPort closed;
  auto [rc, out] = run({kClient, url(closed.port(), "/"), "2000", "2000", GetParam()});
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("http_client: "), std::string::npos) << out;
  EXPECT_EQ(out.find("status"), std::string::npos) << out;
}

TEST_P(HttpClientExample, ReadTimeoutWhenTheServerNeverAnswers) {
  TakenPort silent;  // the kernel completes the handshake; nobody ever reads
  ASSERT_GT(silent.port(), 0);
  auto [rc, out] = run({kClient, url(silent.port(), "/"), "2000", "200", GetParam()});
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("read timed out"), std::string::npos) << out;
}

TEST_P(HttpClientExample, ConnectTimeoutWhenTheListenQueueIsFull) {
  // A listener with a backlog of 0 whose queue is filled by two connections
  // nobody accepts: the kernel drops further SYNs, so a connect hangs.
  int port = -1;
  const int lfd = bind_loopback(&port, 0);
  ASSERT_NE(lfd, -1);
  std::vector<int> fillers;
  for (int i = 0; i < 2; ++i) fillers.push_back(connect_loopback(port, /*nonblocking=*/true));
  // Until a probe connect no longer completes: the queue is full.
  bool full = wait_for([&] {
    int probe = connect_loopback(port, true);
    pollfd p{probe, POLLOUT, 0};
    bool hung = ::poll(&p, 1, 100) == 0;
    fillers.push_back(probe);
    return hung;
  });
  ASSERT_TRUE(full) << "Linux drops SYNs to a listener whose accept queue is full";
  auto [rc, out] = run({kClient, url(port, "/"), "200", "2000", GetParam()});
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("connect timed out"), std::string::npos) << out;
  for (int fd : fillers) ::close(fd);
  ::close(lfd);
}

TEST(HttpClientExampleUsage, BadUrlIsAUsageError) {
  auto [rc, out] = run({kClient, "ftp://127.0.0.1/"});
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out.find("usage: http_client"), std::string::npos) << out;
  auto [rc2, out2] = run({kClient, "http://example.org/"});
  EXPECT_EQ(rc2, 1) << "names are not resolved: " << out2;
}

INSTANTIATE_TEST_SUITE_P(Backends, HttpClientExample, ::testing::ValuesIn(backend_params()),
                         backend_param_name);

}  // namespace
}  // namespace vigil::test
