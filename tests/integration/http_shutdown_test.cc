// HTTP under the master/worker model: several workers serve, a graceful
// stop (QUIT) lets a response in flight finish while idle keep-alive
// connections are closed at once, a response whose header is written after
// the stop began says Connection: close, and worker_shutdown_timeout ends
// what is left.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "http_harness.h"
#include "proxy_backend.h"

namespace vigil {
namespace {

using test::Client;
using test::Response;
using test::VigilServer;
using Clock = std::chrono::steady_clock;

class HttpWorkers : public ::testing::Test {
 protected:
  void SetUp() override {
    server_.write("html/index.html", "index\n");
    big_ = std::string(24 << 20, 'z');
    server_.write("html/big.bin", big_);
  }
  bool start(const std::string& main_extra) {
    // VigilServer::start writes "master_process off"; this one needs a master.
    server_.write_conf(
        "daemon off;\nmaster_process on;\nworker_processes 2;\nerror_log stderr info;\n"
        "pid logs/vigil.pid;\n" +
        main_extra +
        "\nevents { worker_connections 256; }\nhttp {\n sendfile on;\n server {\n"
        "  listen 127.0.0.1:0;\n  root html;\n  location = /status { stub_status; }\n"
        "  location = /metrics { metrics; }\n }\n}\n");
    // Both workers announce themselves.
    if (!server_.launch("running:", 2)) return false;
    port_ = server_.port();
    return port_ > 0 && wait_workers(2);
  }
  // Until /metrics shows `n` workers' figures.
  bool wait_workers(int n) {
    return test::wait_for(
        [&] {
          Response r = test::get(port_, test::simple_get("/metrics"));
          std::size_t count = 0, pos = 0;
          while ((pos = r.body.find("vigil_worker_connections_max{", pos)) != std::string::npos) {
            ++count;
            ++pos;
          }
          return static_cast<int>(count) >= n;
        },
        5000, 20);
  }

  VigilServer server_;
  int port_ = 0;
  std::string big_;
};

TEST_F(HttpWorkers, TwoWorkersServeAndPublishTheirFigures) {
  ASSERT_TRUE(start("")) << server_.output();
  for (int i = 0; i < 50; ++i) {
    ASSERT_EQ(test::get(port_, test::simple_get("/index.html")).body, "index\n");
  }
  Response m = test::get(port_, test::simple_get("/metrics"));
  std::set<std::string> pids;
  std::size_t pos = 0;
  while ((pos = m.body.find("vigil_worker_loop_iterations_total{worker=\"", pos)) !=
         std::string::npos) {
    const std::size_t p = m.body.find("pid=\"", pos) + 5;
    pids.insert(m.body.substr(p, m.body.find('"', p) - p));
    ++pos;
  }
  EXPECT_EQ(pids.size(), 2u) << m.body;
  // stub_status sums over the workers. The clients above closed their
  // connections; the workers notice at their own pace, so wait for it.
  Response s;
  test::wait_for(
      [&] {
        s = test::get(port_, test::simple_get("/status"));
        return s.body.find("Active connections: 1 ") != std::string::npos;
      },
      2000, 20);
  EXPECT_NE(s.body.find("Active connections: 1 "), std::string::npos) << s.body;
  server_.proc().signal(SIGTERM);
  EXPECT_EQ(server_.wait_exit(), 0) << server_.output();
}

TEST_F(HttpWorkers, GracefulStopFinishesResponsesAndClosesIdleConnections) {
  ASSERT_TRUE(start("")) << server_.output();
  Client idle(port_);
  ASSERT_TRUE(idle.send(test::simple_get("/index.html")));
  ASSERT_EQ(idle.read_response().status, 200);

  Client slow(port_);
  ASSERT_TRUE(slow.send(test::simple_get("/big.bin")));
  // The response is under way (its first bytes arrived), stalled on this reader.
  ASSERT_TRUE(test::readable(slow.fd(), 5000));

  server_.proc().signal(SIGQUIT);
  // The idle connection is closed promptly...
  EXPECT_TRUE(idle.closed_within(3000));
  // ...the download completes...
  Response r = slow.read_response(false, 30000);
  ASSERT_TRUE(r.complete);
  EXPECT_TRUE(r.body == big_);
  EXPECT_EQ(r.header("connection"), "keep-alive");  // promised before the stop began
  // ...and then the connection is closed and the server exits.
  EXPECT_TRUE(slow.closed_within(5000));
  EXPECT_EQ(server_.wait_exit(10000), 0) << server_.output();
}

TEST_F(HttpWorkers, ShutdownTimeoutEndsAStalledResponse) {
  ASSERT_TRUE(start("worker_shutdown_timeout 1s;")) << server_.output();
  Client slow(port_);
  int small = 4096;
  ::setsockopt(slow.fd(), SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  ASSERT_TRUE(slow.send(test::simple_get("/big.bin")));
  ASSERT_TRUE(test::readable(slow.fd(), 5000));  // the response is under way
  auto t0 = Clock::now();
  server_.proc().signal(SIGQUIT);
  EXPECT_EQ(server_.wait_exit(10000), 0) << server_.output();
  EXPECT_LT(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count(), 5000);
  EXPECT_EQ(server_.output().find("Sanitizer"), std::string::npos) << server_.output();
}

// nginx's header filter drops keep-alive once the worker is exiting: a
// response finished during a graceful stop closes its connection instead of
// promising one that close_idle would cut.
TEST(HttpGracefulStop, AResponseWrittenDuringTheStopSaysConnectionClose) {
  std::atomic<bool> release{false};
  test::Backend backend([&release](test::BackendConn& c, const test::BackendRequest& r) {
    // Held until the test has begun the stop (bounded).
    test::wait_for([&release] { return release.load(); }, 10000);
    return c.send(test::backend_response(200, "backend " + r.target));
  });
  VigilServer server;
  const int port = test::free_port();
  ASSERT_TRUE(server.start("server { listen 127.0.0.1:" + std::to_string(port) +
                           "; location / { proxy_pass http://" + backend.address() + "; } }"))
      << server.output();

  Client c(port);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c.send(test::simple_get("/slow")));
  ASSERT_TRUE(test::wait_for([&backend] { return backend.requests() == 1; }, 5000));

  server.process().signal(SIGQUIT);
  ASSERT_TRUE(server.wait_output("gracefully shutting down")) << server.output();
  release = true;

  Response r = c.read_response();
  ASSERT_TRUE(r.complete) << server.output();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "backend /slow");
  EXPECT_EQ(r.header("connection"), "close") << r.head;
  EXPECT_TRUE(c.closed_within(5000));
  EXPECT_EQ(server.wait_exit(10000), 0) << server.output();
}

}  // namespace
}  // namespace vigil
