// HTTP/2 connections when a worker stops gracefully (reload, quit, binary
// upgrade), through the real vigil binary with a master and a raw-frame
// client (h2_frames_peer.py): the old worker says GOAWAY with the last
// stream it took, the stream in flight on a slow backend still sends its
// whole (large) body, a stream opened after the GOAWAY is not started, an
// idle HTTP/2 connection is closed at once, a new connection reaches the new
// workers, and worker_shutdown_timeout bounds the wait (the request it
// ends is logged as 499).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include <atomic>
#include <regex>
#include <string>
#include <thread>

#include "harness.h"
#include "proxy_backend.h"
#include "test_process.h"
#include "test_util.h"

namespace vigil {
namespace {

using test::Harness;

constexpr std::size_t kSlowBody = 1 << 20;

std::string events_block() {
  const char* use = std::getenv("VIGIL_TEST_USE");
  if (use == nullptr || *use == '\0') return "events { }\n";
  return std::string("events { use ") + use + "; }\n";
}

std::string slow_body() {
  std::string body(kSlowBody, 'x');
  for (std::size_t i = 0; i < body.size(); ++i) body[i] = static_cast<char>('a' + i % 26);
  return body;
}

std::string md5_of(const std::string& text, const std::string& dir) {
  const std::string file = dir + "/md5.tmp";
  FILE* f = std::fopen(file.c_str(), "wb");
  if (f == nullptr) return "";
  std::fwrite(text.data(), 1, text.size(), f);
  std::fclose(f);
  auto [rc, out] = test::run({"md5sum", file});
  return rc == 0 ? out.substr(0, 32) : "";
}

std::unique_ptr<test::Process> peer(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {
      "/usr/bin/python3", std::string(VIGIL_SOURCE_DIR) + "/tests/integration/h2_frames_peer.py"};
  argv.insert(argv.end(), args.begin(), args.end());
  return std::make_unique<test::Process>(argv);
}

// The pid a line "pid N" of the peer's output names, or -1.
pid_t pid_said(const std::string& out, const std::string& prefix = "pid ") {
  std::smatch m;
  if (!std::regex_search(out, m, std::regex("(^|\\n)" + prefix + "(\\d+)\\n"))) return -1;
  return static_cast<pid_t>(std::stol(m[2]));
}

class Http2Drain : public ::testing::Test {
 protected:
  void SetUp() override {
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);  // the new master of an upgrade is re-parented to us
    backend_.set_handler([this](test::BackendConn& c, const test::BackendRequest&) {
      // The response waits until the test lets it go (or the test ends).
      while (!release_.load() && !stopping_.load()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      if (stopping_.load()) return false;
      const std::string body = slow_body();
      if (!c.send("HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) +
                  "\r\n\r\n")) {
        return false;
      }
      // In pieces, so the body is still arriving while the worker drains.
      for (std::size_t at = 0; at < body.size(); at += 65536) {
        if (!c.send(std::string_view(body).substr(at, 65536))) return false;
      }
      return false;
    });
  }
  void TearDown() override {
    // Under the asan preset the server is instrumented too.
    const std::string& log = h_.log();
    EXPECT_EQ(log.find("Sanitizer"), std::string::npos) << log;
    EXPECT_EQ(log.find("runtime error:"), std::string::npos) << log;
    stopping_ = true;
    backend_.stop();
    if (new_master_ > 0 && test::alive(new_master_)) {
      ::kill(new_master_, SIGTERM);
      test::wait_for([&] { return ::waitpid(new_master_, nullptr, WNOHANG) == new_master_; }, 5000);
    }
    h_.stop(false);
  }

  std::string conf(int port, const std::string& main = "") {
    return "daemon off;\nerror_log stderr notice;\nworker_processes 1;\n" + main + events_block() +
           "http {\n  log_format t \"$request $status\";\n  access_log " + h_.dir() +
           "/access.log t;\n  server {\n    listen 127.0.0.1:" + std::to_string(port) +
           ";\n    http2 on;\n    location = /pid { return 200 \"$pid\\n\"; }\n"
           "    location /slow { proxy_pass http://" +
           backend_.address() + "; }\n  }\n}\n";
  }

  // Starts the master and one worker; the port goes into the configuration
  // so that a reload keeps the socket.
  void start(const std::string& main = "") {
    h_.set_binary(VIGIL_BINARY);
    h_.write_raw_conf(conf(0, main));
    ASSERT_TRUE(h_.start(1)) << h_.log();
    port_ = h_.port();
    ASSERT_GT(port_, 0) << h_.log();
    h_.write_raw_conf(conf(port_, main));
    worker_ = h_.started_workers().at(0);
  }

  // A busy connection (a stream waiting on the backend) and an idle one
  // (one stream answered), both on the worker that runs now.
  void open_connections() {
    idle_ = peer({std::to_string(port_), "idle", "/pid"});
    ASSERT_TRUE(idle_->wait_for_output("ready\n")) << idle_->output();
    EXPECT_EQ(pid_said(idle_->output()), worker_) << idle_->output();
    busy_ = peer({std::to_string(port_), "drain", "/pid", "/slow"});
    ASSERT_TRUE(busy_->wait_for_output("open\n")) << busy_->output();
    EXPECT_EQ(pid_said(busy_->output()), worker_) << busy_->output();
    ASSERT_TRUE(test::wait_for([&] { return backend_.requests() == 1; })) << h_.log();
  }

  // After the signal: GOAWAY NO_ERROR naming stream 3 on both connections,
  // the idle one closed while the busy one still waits.
  void expect_goaways() {
    ASSERT_TRUE(busy_->wait_for_output("goaway 0 3\n")) << busy_->output() << h_.log();
    ASSERT_TRUE(idle_->wait_for_output("goaway 0 1\n")) << idle_->output() << h_.log();
    ASSERT_TRUE(idle_->wait_for_output("closed\n")) << idle_->output() << h_.log();
    EXPECT_EQ(busy_->output().find("slow"), std::string::npos) << busy_->output();
    EXPECT_TRUE(test::alive(worker_));
  }

  // The backend answers: the whole body arrives, the late stream is not
  // answered, then the connection closes and the old worker exits.
  void expect_body_and_close() {
    release_ = true;
    ASSERT_EQ(busy_->wait(30000), 0) << busy_->output() << h_.log();
    const std::string out = busy_->output();
    EXPECT_NE(out.find("slow 200 " + std::to_string(kSlowBody) + " " +
                       md5_of(slow_body(), h_.dir()) + "\n"),
              std::string::npos)
        << out << h_.log();
    EXPECT_NE(out.find("late none\nclosed\n"), std::string::npos) << out;
    EXPECT_TRUE(test::wait_for([&] { return !test::alive(worker_); }, 10000));
  }

  // A new connection is served by another worker than the old one.
  pid_t new_pid() {
    auto [rc, out] = test::run({"curl", "-sS", "--http2-prior-knowledge",
                                "http://127.0.0.1:" + std::to_string(port_) + "/pid"});
    if (rc != 0) return -1;
    return static_cast<pid_t>(std::atol(out.c_str()));
  }

  Harness h_;
  test::Backend backend_;
  std::atomic<bool> release_{false};
  std::atomic<bool> stopping_{false};
  int port_ = 0;
  pid_t worker_ = -1;
  pid_t new_master_ = -1;
  std::unique_ptr<test::Process> idle_, busy_;
};

TEST_F(Http2Drain, QuitFinishesTheStreamInFlight) {
  start();
  open_connections();
  h_.signal(SIGQUIT);
  expect_goaways();
  expect_body_and_close();
  EXPECT_EQ(h_.wait_exit(10000), 0) << h_.log();
}

TEST_F(Http2Drain, ReloadFinishesTheStreamInFlightAndNewConnectionsGoToTheNewWorker) {
  start();
  open_connections();
  h_.signal(SIGHUP);
  expect_goaways();
  // The old worker no longer accepts: the new one answers.
  const pid_t now = new_pid();
  EXPECT_GT(now, 0);
  EXPECT_NE(now, worker_);
  expect_body_and_close();
  EXPECT_TRUE(test::alive(h_.master()));
  const pid_t later = new_pid();
  EXPECT_EQ(later, now);
}

TEST_F(Http2Drain, BinaryUpgradeFinishesTheStreamInFlight) {
  start();
  open_connections();
  const pid_t old_master = h_.master();
  ::kill(old_master, SIGUSR2);
  ASSERT_TRUE(h_.wait_log("start new binary process")) << h_.log();
  std::smatch m;
  const std::string log = h_.log();
  ASSERT_TRUE(std::regex_search(log, m, std::regex("start new binary process (\\d+)")));
  new_master_ = static_cast<pid_t>(std::stol(m[1]));
  ASSERT_TRUE(h_.wait_log_count("running:", 2)) << h_.log();
  // QUIT to the old master: its worker drains, the new master's serves.
  ::kill(old_master, SIGQUIT);
  expect_goaways();
  const pid_t now = new_pid();
  EXPECT_GT(now, 0);
  EXPECT_NE(now, worker_);
  expect_body_and_close();
  EXPECT_EQ(h_.wait_exit(10000), 0) << h_.log();
  EXPECT_TRUE(test::alive(new_master_));
  EXPECT_EQ(new_pid(), now);
}

TEST_F(Http2Drain, WorkerShutdownTimeoutEndsAStreamThatDoesNotFinish) {
  start("worker_shutdown_timeout 1s;\n");
  open_connections();
  h_.signal(SIGQUIT);
  expect_goaways();
  // The backend never answers: the timeout closes the connection.
  ASSERT_EQ(busy_->wait(30000), 0) << busy_->output() << h_.log();
  EXPECT_NE(busy_->output().find("slow incomplete 0\n"), std::string::npos) << busy_->output();
  EXPECT_NE(busy_->output().find("closed\n"), std::string::npos) << busy_->output();
  EXPECT_EQ(h_.wait_exit(10000), 0) << h_.log();
  // The stream's request ended with its connection: logged as 499, as
  // nginx logs a request whose client connection went first.
  const std::string log = test::read_file(h_.dir() + "/access.log");
  EXPECT_NE(log.find("GET /slow HTTP/2.0 499\n"), std::string::npos) << log;
}

}  // namespace
}  // namespace vigil
