// Binary upgrade on the fly, as nginx does it, through the real vigil binary
// under a bounded client load: USR2 starts a new master (same binary) on the
// same sockets, WINCH stops the old workers, then QUIT to the old master
// finishes the upgrade — or HUP to it and QUIT to the new one rolls back.
// Not one request may fail either way.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <atomic>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include "harness.h"
#include "test_util.h"

namespace vigil {
namespace {

using test::Harness;

pid_t pid_in(const std::string& path) {
  return static_cast<pid_t>(std::atol(test::read_file(path).c_str()));
}

// Requests on fresh connections, one after the other, until stopped (or a
// bound is reached): every one must be answered in full.
class Load {
 public:
  explicit Load(int port) : port_(port) {
    thread_ = std::thread([this] {
      for (int i = 0; i < 200000 && !stop_.load(); ++i) {
        int fd = test::send_request(port_, "GET / HTTP/1.0\r\nHost: t\r\n\r\n");
        const std::string all = fd == -1 ? "" : test::read_n(fd, 1 << 16, 5000);
        if (fd != -1) ::close(fd);
        const bool good = all.rfind("HTTP/1.1 200", 0) == 0 && all.size() >= 6 &&
                          all.compare(all.size() - 6, 6, "hello\n") == 0;
        (good ? ok_ : failed_).fetch_add(1);
      }
    });
  }
  ~Load() { finish(); }
  void finish() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  std::size_t ok() const { return ok_.load(); }
  std::size_t failed() const { return failed_.load(); }
  // Waits until `n` more requests succeeded (the server is really serving).
  bool served(std::size_t n, int timeout_ms = 5000) {
    const std::size_t target = ok_.load() + n;
    const auto deadline = test::now_ms() + timeout_ms;
    while (ok_.load() < target) {
      if (test::now_ms() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return true;
  }

 private:
  int port_;
  std::atomic<bool> stop_{false};
  std::atomic<std::size_t> ok_{0}, failed_{0};
  std::thread thread_;
};

class UpgradeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The new master is the old one's child; when the old one exits it is
    // re-parented to us, so the test can reap it.
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);
    ::chmod(h_.dir().c_str(), 0755);
    ::mkdir((h_.dir() + "/html").c_str(), 0755);
    std::ofstream(h_.dir() + "/html/index.html") << "hello\n";
    port_ = test::free_port();
    h_.set_binary(VIGIL_BINARY);
    h_.write_raw_conf(
        "daemon off;\nerror_log stderr notice;\nworker_processes 2;\nevents { }\n"
        "http {\n  access_log off;\n  server {\n    listen 127.0.0.1:" +
        std::to_string(port_) + ";\n    root html;\n  }\n}\n");
    ASSERT_TRUE(h_.start(2)) << h_.log();
    old_ = h_.master();
  }
  void TearDown() override {
    if (new_ > 0 && ::kill(new_, 0) == 0) {
      ::kill(new_, SIGTERM);
      for (int i = 0; i < 500; ++i) {
        if (::waitpid(new_, nullptr, WNOHANG) == new_) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
    h_.stop();
  }

  // USR2, then both generations run: returns once the new master's workers do.
  void start_new_binary() {
    ::kill(old_, SIGUSR2);
    ASSERT_TRUE(h_.wait_log("start new binary process")) << h_.log();
    std::smatch m;
    const std::string log = h_.log();
    ASSERT_TRUE(std::regex_search(log, m, std::regex("start new binary process (\\d+)")));
    new_ = static_cast<pid_t>(std::stol(m[1]));
    ASSERT_TRUE(h_.wait_log_count("running:", 4)) << h_.log();
    EXPECT_EQ(pid_in(h_.pid_path()), new_);
    EXPECT_EQ(pid_in(h_.pid_path() + ".oldbin"), old_);
    EXPECT_NE(h_.log().find("using inherited socket"), std::string::npos) << h_.log();
  }

  // WINCH: the old workers finish and exit, the old master stays.
  void stop_old_workers() {
    ::kill(old_, SIGWINCH);
    ASSERT_TRUE(h_.wait_log_count("exited with code 0", 2)) << h_.log();
    EXPECT_TRUE(test::alive(old_));
  }

  Harness h_;
  int port_ = 0;
  pid_t old_ = 0;
  pid_t new_ = 0;
};

TEST_F(UpgradeTest, UpgradeUnderLoadLosesNoRequest) {
  Load load(port_);
  ASSERT_TRUE(load.served(50));
  start_new_binary();
  ASSERT_TRUE(load.served(50));
  stop_old_workers();
  ASSERT_TRUE(load.served(50)) << "the new workers do not serve";
  // QUIT to the old master: the upgrade is done.
  ::kill(old_, SIGQUIT);
  EXPECT_EQ(h_.wait_exit(10000), 0) << h_.log();
  ASSERT_TRUE(load.served(100)) << "the new master stopped serving with the old one";
  load.finish();
  EXPECT_EQ(load.failed(), 0u) << h_.log();
  EXPECT_EQ(pid_in(h_.pid_path()), new_);
  struct stat st {};
  EXPECT_EQ(::stat((h_.pid_path() + ".oldbin").c_str(), &st), -1) << "the old pid file is left";
}

TEST_F(UpgradeTest, RollbackUnderLoadLosesNoRequest) {
  Load load(port_);
  ASSERT_TRUE(load.served(50));
  start_new_binary();
  stop_old_workers();
  ASSERT_TRUE(load.served(50));
  // HUP to the old master: its workers come back, without a reload.
  ::kill(old_, SIGHUP);
  ASSERT_TRUE(h_.wait_log("starting worker processes again")) << h_.log();
  ASSERT_TRUE(h_.wait_log_count("running:", 6)) << h_.log();
  EXPECT_EQ(h_.count("reconfiguring"), 0u);
  // QUIT to the new master: it goes, and the old one takes its pid file back.
  ::kill(new_, SIGQUIT);
  ASSERT_TRUE(h_.wait_log("new binary process " + std::to_string(new_) + " exited with code 0"))
      << h_.log();
  ASSERT_TRUE(load.served(100)) << "the old master's workers do not serve";
  load.finish();
  EXPECT_EQ(load.failed(), 0u) << h_.log();
  EXPECT_EQ(pid_in(h_.pid_path()), old_);
  struct stat st {};
  EXPECT_EQ(::stat((h_.pid_path() + ".oldbin").c_str(), &st), -1);
  EXPECT_TRUE(test::alive(old_));
}

}  // namespace
}  // namespace vigil
