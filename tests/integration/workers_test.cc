// The master/worker process model with real processes and sockets, through
// tests/support/worker_harness (the vigil runtime with a test-only protocol).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <fstream>
#include <map>
#include <string>

#include "harness.h"

namespace vigil {
namespace {

using test::Harness;

std::string listen_line(int port, const char* options = "") {
  return "harness_listen 127.0.0.1:" + std::to_string(port) + " " + options + ";\n";
}

// Workers that appear in /metrics, as pid -> accepted.
std::map<pid_t, std::uint64_t> metrics(int port) {
  std::map<pid_t, std::uint64_t> out;
  std::string body = test::get(port, "/metrics");
  std::regex re("slot \\d+ pid (\\d+) accepted (\\d+) used (\\d+) max (\\d+)");
  for (auto it = std::sregex_iterator(body.begin(), body.end(), re); it != std::sregex_iterator();
       ++it) {
    out[static_cast<pid_t>(std::stol((*it)[1]))] = std::stoull((*it)[2]);
  }
  return out;
}

TEST(Workers, MasterForksWorkersThatServeAndPublishTheirCounters) {
  Harness h;
  h.write_conf("worker_processes 2;\n" + listen_line(0), "worker_connections 64;");
  ASSERT_TRUE(h.start(2)) << h.log();
  const int port = h.port();
  EXPECT_NE(h.log().find("master process, 2 worker processes"), std::string::npos) << h.log();

  // The master serves nothing itself: every answer comes from a worker.
  auto r = test::run_load(port, 200, 4);
  EXPECT_EQ(r.failed, 0u);
  EXPECT_EQ(r.ok, 200u);
  std::vector<pid_t> workers = h.started_workers();
  ASSERT_EQ(workers.size(), 2u);
  for (auto [pid, n] : r.per_pid) {
    EXPECT_NE(pid, h.master());
    EXPECT_TRUE(pid == workers[0] || pid == workers[1]) << pid;
  }

  // Each worker owns a slot of the shared counters: its pid, what it
  // accepted, its pool. The workers' totals are what the clients did (the
  // /metrics request itself included).
  std::string body = test::get(port, "/metrics");
  std::regex re("slot \\d+ pid (\\d+) accepted (\\d+) used (\\d+) max (\\d+)");
  std::uint64_t accepted = 0;
  int slots = 0;
  for (auto it = std::sregex_iterator(body.begin(), body.end(), re); it != std::sregex_iterator();
       ++it) {
    ++slots;
    pid_t pid = static_cast<pid_t>(std::stol((*it)[1]));
    EXPECT_TRUE(pid == workers[0] || pid == workers[1]) << body;
    accepted += std::stoull((*it)[2]);
    EXPECT_GE(std::stoull((*it)[3]), 1u) << body;  // its listening socket at least
    EXPECT_EQ(std::stoull((*it)[4]), 64u) << body;
  }
  EXPECT_EQ(slots, 2) << body;
  EXPECT_EQ(accepted, 201u) << body;
}

TEST(Workers, RespawnsAWorkerKilledWithSigkill) {
  Harness h;
  h.write_conf("worker_processes 2;\n" + listen_line(0), "");
  ASSERT_TRUE(h.start(2)) << h.log();
  const int port = h.port();
  pid_t victim = test::body_pid(test::get(port));
  ASSERT_GT(victim, 0);
  ASSERT_EQ(::kill(victim, SIGKILL), 0);

  ASSERT_TRUE(h.wait_log("worker process " + std::to_string(victim) + " exited on signal 9"))
      << h.log();
  ASSERT_TRUE(h.wait_log_count("start worker process", 3)) << h.log();
  ASSERT_TRUE(h.wait_log_count("running:", 3)) << h.log();
  std::vector<pid_t> workers = h.started_workers();
  pid_t fresh = workers.back();
  EXPECT_NE(fresh, victim);
  EXPECT_TRUE(test::alive(fresh));
  // Served again, and the new worker is one of those serving.
  std::set<pid_t> seen;
  for (int i = 0; i < 200 && !seen.count(fresh); ++i) {
    pid_t pid = test::body_pid(test::get(port));
    ASSERT_GT(pid, 0);
    EXPECT_NE(pid, victim);
    seen.insert(pid);
  }
  EXPECT_TRUE(seen.count(fresh)) << "the respawned worker " << fresh << " never answered";
  EXPECT_TRUE(metrics(port).count(fresh)) << "its counters slot names it";
}

// A worker killed while it holds the accept mutex: without the master's
// force-unlock nobody could ever accept again. The harness makes a worker take
// the lock and block holding it, the test shows that then nobody accepts, kills
// the worker, and expects the waiting connection served within a second.
TEST(Workers, ForceUnlocksTheAcceptMutexOfAKilledWorker) {
  Harness h;
  h.write_conf("worker_processes 2;\n" + listen_line(0), "accept_mutex on;");
  ASSERT_TRUE(h.start(2)) << h.log();
  const int port = h.port();
  std::string held = test::get(port, "/hold-accept-mutex");
  ASSERT_EQ(held.rfind("held ", 0), 0u) << held << h.log();
  pid_t holder = static_cast<pid_t>(std::atol(held.c_str() + 5));

  // The lock is held: the other worker cannot listen, nobody accepts.
  int waiting = test::send_request(port, "GET / HTTP/1.0\r\n\r\n");
  ASSERT_GE(waiting, 0);
  EXPECT_EQ(test::read_n(waiting, 1, 1200), "") << "served although the accept mutex is held";

  ASSERT_EQ(::kill(holder, SIGKILL), 0);
  auto killed_at = test::now_ms();
  std::string body = test::read_body(waiting, 3000);
  auto served_after = test::now_ms() - killed_at;
  ::close(waiting);
  EXPECT_GT(test::body_pid(body), 0) << h.log();
  EXPECT_LT(served_after, 1000) << h.log();
  EXPECT_TRUE(h.wait_log("the accept mutex was held by exited worker process " +
                         std::to_string(holder) + ": unlocked"))
      << h.log();
  EXPECT_TRUE(h.wait_log("worker process " + std::to_string(holder) + " exited on signal 9"));
  ASSERT_TRUE(h.wait_log_count("running:", 3)) << h.log();
  auto r = test::run_load(port, 50, 2);
  EXPECT_EQ(r.failed, 0u);
}

TEST(Workers, FatalExitCodeIsNotRespawnedOtherCodesAre) {
  Harness h;
  h.write_conf("worker_processes 2;\n" + listen_line(0), "");
  ASSERT_TRUE(h.start(2)) << h.log();
  const int port = h.port();
  std::vector<pid_t> first = h.started_workers();

  // Code 3: an ordinary failure, respawned.
  int fd = test::send_request(port, "GET /exit/3 HTTP/1.0\r\n\r\n");
  ASSERT_GE(fd, 0);
  EXPECT_EQ(test::read_n(fd, 1, 3000), "");
  ::close(fd);
  ASSERT_TRUE(h.wait_log("exited with code 3")) << h.log();
  ASSERT_TRUE(h.wait_log_count("running:", 3)) << h.log();

  // Code 2: "cannot start" — respawning would only fail again.
  fd = test::send_request(port, "GET /exit/2 HTTP/1.0\r\n\r\n");
  ASSERT_GE(fd, 0);
  EXPECT_EQ(test::read_n(fd, 1, 3000), "");
  ::close(fd);
  ASSERT_TRUE(h.wait_log("exited with fatal code 2 and cannot be respawned")) << h.log();
  ASSERT_TRUE(h.master_barrier()) << h.log();
  EXPECT_EQ(h.count("start worker process"), 3u) << h.log();
  EXPECT_GT(test::body_pid(test::get(port)), 0) << "the remaining worker serves";
}

TEST(Workers, RespawnBacksOffWhenAWorkerKeepsDyingYoung) {
  Harness h;
  h.write_conf("worker_processes 1;\n" + listen_line(0), "");
  ASSERT_TRUE(h.start(1)) << h.log();
  const int port = h.port();
  // The mechanism's own clock: a worker that dies within 1000 ms of its
  // start is "young". This one must not be.
  ::usleep(1100000);
  for (std::size_t round = 1; round <= 3; ++round) {
    ASSERT_TRUE(h.wait_log_count("running:", round)) << h.log();
    int fd = test::send_request(port, "GET /exit/3 HTTP/1.0\r\n\r\n");
    ASSERT_GE(fd, 0);
    test::read_n(fd, 1, 3000);
    ::close(fd);
    ASSERT_TRUE(h.wait_log_count("exited with code 3", round)) << h.log();
  }
  // Deaths 2 and 3 came within a second of starting: the third waits.
  ASSERT_TRUE(h.wait_log("died 2 times in a row within 1000 ms of starting, respawning in 100 ms"))
      << h.log();
  ASSERT_TRUE(h.wait_log_count("running:", 4)) << h.log();
  EXPECT_GT(test::body_pid(test::get(port)), 0);
}

TEST(Workers, FastStopWithTermEndsEveryProcess) {
  Harness h;
  h.write_conf("worker_processes 3;\n" + listen_line(0), "");
  ASSERT_TRUE(h.start(3)) << h.log();
  const int port = h.port();
  std::vector<pid_t> workers = h.started_workers();
  // An idle connection does not delay a fast stop.
  int idle = test::send_request(port, "");
  ASSERT_GE(idle, 0);
  h.proc().signal(SIGTERM);
  auto t0 = test::now_ms();
  EXPECT_EQ(h.wait_exit(5000), 0) << h.proc().output();
  EXPECT_LT(test::now_ms() - t0, 2000);
  for (pid_t pid : workers) EXPECT_FALSE(test::alive(pid)) << pid;
  EXPECT_NE(::access(h.pid_path().c_str(), F_OK), 0) << "the pid file is removed";
  EXPECT_EQ(test::connect_loopback(port), -1) << "nothing listens any more";
  ::close(idle);
}

// QUIT: an idle connection is closed at once, a request in flight (half a
// request head sent) keeps its worker until it completes; new connections
// are refused meanwhile.
TEST(Workers, GracefulQuitFinishesRequestsInFlightAndClosesIdleConnections) {
  Harness h;
  h.write_conf("worker_processes 1;\n" + listen_line(0), "");
  ASSERT_TRUE(h.start(1)) << h.log();
  const int port = h.port();
  pid_t worker = h.started_workers().at(0);

  int half = test::send_request(port, "GET / HTTP/1.0\r\n");
  int idle = test::send_request(port, "");
  int slow = test::send_request(port, "GET /sleep/1500 HTTP/1.0\r\n\r\n");
  ASSERT_GE(half, 0);
  ASSERT_GE(idle, 0);
  ASSERT_GE(slow, 0);
  // All three are accepted and both heads read (requests started: the half
  // one, the slow one, and each /metrics request so far) before QUIT.
  long polls = 0;
  ASSERT_TRUE(test::wait_for([&] {
    std::string m = test::get(port, "/metrics");
    ++polls;
    std::size_t at = m.find("requests ");
    return m.find(" used 5 ") != std::string::npos &&  // listener + 3 + this request
           at != std::string::npos && std::atol(m.c_str() + at + 9) == 2 + polls;
  })) << test::get(port, "/metrics");

  h.proc().signal(SIGQUIT);
  EXPECT_EQ(test::read_n(idle, 1, 2000), "") << "the idle connection is closed";
  ASSERT_TRUE(h.wait_log(std::to_string(worker) + "#0: gracefully shutting down")) << h.log();
  EXPECT_TRUE(test::holds_for([&] { return test::alive(worker); }, 300))
      << "requests in flight keep the worker";
  EXPECT_EQ(test::connect_loopback(port), -1) << "the listening socket is closed";

  // The slow request completes on its own.
  EXPECT_EQ(test::body_pid(test::read_body(slow, 3000)), worker);
  EXPECT_TRUE(test::alive(worker));
  // The half request completes when its client finishes it.
  ASSERT_EQ(::write(half, "\r\n", 2), 2);
  EXPECT_EQ(test::body_pid(test::read_body(half, 3000)), worker);
  EXPECT_EQ(h.wait_exit(5000), 0) << h.proc().output();
  EXPECT_FALSE(test::alive(worker));
  for (int fd : {half, idle, slow}) ::close(fd);
}

TEST(Workers, WorkerShutdownTimeoutClosesWhatIsLeft) {
  Harness h;
  h.write_conf("worker_processes 1;\nworker_shutdown_timeout 300ms;\n" + listen_line(0), "");
  ASSERT_TRUE(h.start(1)) << h.log();
  const int port = h.port();
  int half = test::send_request(port, "GET / HTTP/1.0\r\n");
  ASSERT_GE(half, 0);
  // Accepted and its head begun (requests: the half one + each /metrics).
  long polls = 0;
  ASSERT_TRUE(test::wait_for([&] {
    std::string m = test::get(port, "/metrics");
    ++polls;
    std::size_t at = m.find("requests ");
    return m.find(" used 3 ") != std::string::npos && at != std::string::npos &&
           std::atol(m.c_str() + at + 9) == 1 + polls;
  }));
  h.proc().signal(SIGQUIT);
  auto t0 = test::now_ms();
  EXPECT_EQ(test::read_n(half, 1, 3000), "");
  auto closed_after = test::now_ms() - t0;
  EXPECT_GE(closed_after, 250);
  EXPECT_LT(closed_after, 2000);
  EXPECT_EQ(h.wait_exit(5000), 0) << h.proc().output();
  EXPECT_NE(h.proc().output().find("worker_shutdown_timeout: closing 1 connections"),
            std::string::npos)
      << h.proc().output();
  ::close(half);
}

TEST(Workers, ReopenIsForwardedToWorkersAndProtocols) {
  Harness h;
  h.write_conf("worker_processes 2;\n" + listen_line(0), "");
  ASSERT_TRUE(h.start(2)) << h.log();
  const int port = h.port();
  h.proc().signal(SIGUSR1);
  EXPECT_TRUE(h.wait_log_count("reopening logs", 3)) << h.log();  // master + 2 workers
  EXPECT_TRUE(h.wait_log_count("harness: reopen_logs", 2)) << h.log();
  EXPECT_EQ(h.count("start worker process"), 2u);
  EXPECT_GT(test::body_pid(test::get(port)), 0);
}

TEST(Workers, BadConfigurationOnReloadKeepsTheOldWorkersServing) {
  Harness h;
  h.write_conf("worker_processes 2;\n" + listen_line(0), "");
  ASSERT_TRUE(h.start(2)) << h.log();
  const int port = h.port();
  std::vector<pid_t> workers = h.started_workers();

  std::ofstream(h.conf_path(), std::ios::app) << "bogus_directive on;\n";
  auto [rc, out] = test::run({test::kHarness, "-p", h.dir(), "-c", "conf/h.conf", "-s", "reload"});
  EXPECT_NE(rc, 0) << "the signaller parses the file too and refuses it: " << out;
  h.proc().signal(SIGHUP);
  ASSERT_TRUE(h.wait_log("unknown directive \"bogus_directive\" in " + h.conf_path() + ":9"))
      << h.log();
  EXPECT_TRUE(std::regex_search(h.log(), std::regex("\\[emerg\\] \\d+#0: unknown directive")));
  ASSERT_TRUE(h.master_barrier()) << h.log();
  EXPECT_EQ(h.count("start worker process"), 2u) << h.log();
  for (pid_t pid : workers) EXPECT_TRUE(test::alive(pid));
  auto r = test::run_load(port, 100, 2);
  EXPECT_EQ(r.failed, 0u);
  for (auto [pid, n] : r.per_pid) EXPECT_TRUE(pid == workers[0] || pid == workers[1]) << pid;

  // A listener that cannot be opened is refused the same way.
  test::TakenPort blocker;
  const int taken = blocker.port();
  ASSERT_GT(taken, 0);
  h.write_conf("worker_processes 2;\n" + listen_line(port) + listen_line(taken), "");
  h.proc().signal(SIGHUP);
  ASSERT_TRUE(h.wait_log("bind() to 127.0.0.1:" + std::to_string(taken) + " failed (98", 8000))
      << h.log();
  EXPECT_EQ(h.log().find("Address already in use) (98"), std::string::npos) << "said once";
  EXPECT_EQ(h.count("start worker process"), 2u) << h.log();
  EXPECT_EQ(test::body_pid(test::get(port)) > 0, true);
}

TEST(Workers, ReloadChangesListenersAndReplacesWorkers) {
  Harness h;
  h.write_conf("worker_processes 2;\n" + listen_line(0), "");
  ASSERT_TRUE(h.start(2)) << h.log();
  const int a = h.port();
  std::vector<pid_t> old_workers = h.started_workers();

  // Another address (127.0.0.1:0 again: a new port, as port 0 always asks).
  h.write_conf("worker_processes 3;\n" + listen_line(0), "");
  h.proc().signal(SIGHUP);
  ASSERT_TRUE(h.wait_log("reconfigured: 3 worker processes started, 2 told to stop")) << h.log();
  ASSERT_TRUE(h.wait_log_count("running:", 5)) << h.log();
  std::vector<int> ports = h.listen_ports();
  ASSERT_EQ(ports.size(), 2u) << h.log();
  const int b = ports.back();
  EXPECT_NE(a, b);
  for (pid_t pid : old_workers) {
    EXPECT_TRUE(h.wait_log("worker process " + std::to_string(pid) + " exited with code 0"))
        << h.log();
  }
  pid_t pid = test::body_pid(test::get(b));
  EXPECT_GT(pid, 0);
  EXPECT_EQ(std::count(old_workers.begin(), old_workers.end(), pid), 0);
  EXPECT_EQ(test::connect_loopback(a), -1)
      << "the listener the new configuration dropped is closed";
}

struct Mode {
  const char* name;
  int workers;
  const char* listen_options;
  const char* events;
  int connections = 512;  // worker_connections
};

std::string mode_name(const ::testing::TestParamInfo<Mode>& p) {
  std::string n = p.param.name;
  n.erase(std::remove(n.begin(), n.end(), '_'), n.end());
  return n;
}
std::string mode_name_with_workers(const ::testing::TestParamInfo<Mode>& p) {
  return mode_name(p) + std::to_string(p.param.workers);
}

// With the accept mutex one worker holds it most of the time (it keeps it
// while it waits); what spreads connections then is seed 002 9.8.3: a worker
// with more than 7/8 of its pool in use sits out. With 64 connections it sits
// out once it has 56 clients, and the pool would start closing idle
// connections (reusing them, losing what they were about to ask) only at 59:
// 58 clients reach the first and never the second. The other modes get pools
// that take every client alone.
constexpr int kClients = 58;

class WorkerModes : public ::testing::TestWithParam<Mode> {};

// Every worker accepts some of 2,000 connections and none is lost.
TEST_P(WorkerModes, EveryWorkerAcceptsAndNoConnectionIsLost) {
  const Mode& m = GetParam();
  Harness h;
  h.write_conf(
      "worker_processes " + std::to_string(m.workers) + ";\n" + listen_line(0, m.listen_options),
      "worker_connections " + std::to_string(m.connections) + ";\naccept_mutex_delay 20ms;\n" +
          m.events);
  ASSERT_TRUE(h.start(m.workers)) << h.log();
  const int port = h.port();
  EXPECT_NE(h.log().find(std::string(m.name)), std::string::npos) << h.log();

  std::vector<pid_t> workers = h.started_workers();
  ASSERT_EQ(workers.size(), static_cast<std::size_t>(m.workers));
  // Batches of 2,000 requests until every worker has accepted some (on two
  // busy cores one batch may not give the mutex to all four), at most 5;
  // no request may fail in any of them.
  std::map<pid_t, std::size_t> served;
  auto all_served = [&] {
    for (pid_t pid : workers) {
      if (served[pid] == 0) return false;
    }
    return true;
  };
  for (int batch = 0; batch < 5 && !all_served(); ++batch) {
    auto r = test::run_load(port, 2000, kClients, "/sleep/2");
    EXPECT_EQ(r.failed, 0u) << h.log();
    EXPECT_EQ(r.ok, 2000u);
    for (const auto& [pid, n] : r.per_pid) served[pid] += n;
  }
  std::string shares;
  for (pid_t pid : workers) shares += " " + std::to_string(served[pid]);
  for (pid_t pid : workers) EXPECT_GT(served[pid], 0u) << "per-worker counts:" << shares;
  EXPECT_EQ(served.size(), workers.size()) << shares;
}

// lock_file selects seed 004's fallback: the accept mutex as an fcntl() lock.
TEST(Workers, AcceptMutexOnAFileLockSharesTheWork) {
  Harness h;
  h.write_conf("worker_processes 2;\nlock_file logs/accept.lock;\n" + listen_line(0, ""),
               "worker_connections 64;\naccept_mutex on;\naccept_mutex_delay 20ms;\n");
  ASSERT_TRUE(h.start(2)) << h.log();
  const int port = h.port();
  EXPECT_NE(h.log().find("accept_mutex"), std::string::npos) << h.log();
  auto r = test::run_load(port, 2000, kClients, "/sleep/2");
  EXPECT_EQ(r.failed, 0u) << h.log();
  EXPECT_EQ(r.ok, 2000u);
  std::vector<pid_t> workers = h.started_workers();
  ASSERT_EQ(workers.size(), 2u);
  for (pid_t pid : workers) EXPECT_GT(r.per_pid[pid], 0u);
  // The lock lives in the file while the server runs.
  EXPECT_EQ(::access((h.dir() + "/logs/accept.lock").c_str(), F_OK), 0);
}

INSTANTIATE_TEST_SUITE_P(Accept, WorkerModes,
                         ::testing::Values(Mode{"accept_mutex", 2, "", "accept_mutex on;", 64},
                                           Mode{"accept_mutex", 4, "", "accept_mutex on;", 64},
                                           Mode{"EPOLLEXCLUSIVE", 2, "", ""},
                                           Mode{"EPOLLEXCLUSIVE", 4, "", ""},
                                           Mode{"reuseport", 2, "reuseport", ""},
                                           Mode{"reuseport", 4, "reuseport", ""}),
                         mode_name_with_workers);

class ReloadUnderLoad : public ::testing::TestWithParam<Mode> {};

// A client keeps connecting while the server is reloaded several times: no
// connection is refused, no request fails, and both old and new workers answer.
TEST_P(ReloadUnderLoad, LosesNoConnection) {
  const Mode& m = GetParam();
  Harness h;
  h.write_conf(
      "worker_processes " + std::to_string(m.workers) + ";\n" + listen_line(0, m.listen_options),
      m.events);
  ASSERT_TRUE(h.start(m.workers)) << h.log();
  const int port = h.port();
  // The reloads name the port the server got, so they keep its socket.
  h.write_conf(
      "worker_processes " + std::to_string(m.workers) + ";\n" + listen_line(port, m.listen_options),
      m.events);

  std::atomic<bool> done{false};
  std::atomic<std::size_t> answered{0};
  test::LoadResult result;
  std::thread client([&] {
    std::vector<std::thread> threads;
    std::mutex mu;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&] {
        test::LoadResult r;
        while (!done) {
          pid_t pid = test::body_pid(test::get(port));
          if (pid > 0) {
            ++r.per_pid[pid];
            ++r.ok;
            ++answered;
          } else {
            ++r.failed;
          }
        }
        std::lock_guard<std::mutex> g(mu);
        for (auto [p, n] : r.per_pid) result.per_pid[p] += n;
        result.ok += r.ok;
        result.failed += r.failed;
      });
    }
    for (auto& th : threads) th.join();
  });
  const int kReloads = 4;
  // Load runs between reloads: at least 50 answers each time.
  auto some_load = [&] {
    const std::size_t from = answered.load();
    return test::wait_for([&] { return answered.load() >= from + 50; }, 10000);
  };
  for (int i = 0; i < kReloads; ++i) {
    ASSERT_TRUE(some_load());
    if (i % 2 == 0) {
      auto [rc, out] =
          test::run({test::kHarness, "-p", h.dir(), "-c", "conf/h.conf", "-s", "reload"});
      EXPECT_EQ(rc, 0) << out;
    } else {
      h.proc().signal(SIGHUP);
    }
    ASSERT_TRUE(h.wait_log_count("reconfigured:", static_cast<std::size_t>(i + 1))) << h.log();
  }
  EXPECT_TRUE(some_load());  // the last generation answers too
  done = true;
  client.join();
  EXPECT_EQ(result.failed, 0u) << h.log();
  EXPECT_GT(result.ok, 100u);
  // Requests were answered by more than one generation of workers.
  EXPECT_GT(result.per_pid.size(), static_cast<std::size_t>(m.workers)) << h.log();
  ASSERT_TRUE(
      h.wait_log_count("exited with code 0", static_cast<std::size_t>(kReloads * m.workers)))
      << h.log();
  EXPECT_EQ(h.count("exited on signal"), 0u) << h.log();
}

INSTANTIATE_TEST_SUITE_P(Accept, ReloadUnderLoad,
                         ::testing::Values(Mode{"accept_mutex", 2, "", "accept_mutex on;"},
                                           Mode{"EPOLLEXCLUSIVE", 2, "", ""},
                                           Mode{"reuseport", 2, "reuseport", ""}),
                         mode_name);

TEST(Workers, SingleProcessServesItselfWithMasterProcessOff) {
  Harness h;
  h.write_conf("master_process off;\nworker_processes 4;\n" + listen_line(0), "");
  h.start(0);
  ASSERT_TRUE(h.wait_log("started, pid")) << h.log();
  const int port = h.port();
  EXPECT_EQ(test::body_pid(test::get(port)), h.master());
  EXPECT_EQ(h.count("start worker process"), 0u);
  h.proc().signal(SIGHUP);
  EXPECT_TRUE(h.wait_log("reload needs master_process; ignoring SIGHUP")) << h.log();
  h.proc().signal(SIGQUIT);
  EXPECT_EQ(h.wait_exit(5000), 0) << h.log();
}

TEST(Workers, DaemonDetachesAndStopsThroughThePidFile) {
  Harness h;
  std::ofstream(h.conf_path())
      << "daemon on;\nerror_log logs/error.log notice;\nworker_processes 2;\n"
      << listen_line(0) << "events {}\n";
  auto [rc, out] = test::run({test::kHarness, "-p", h.dir(), "-c", "conf/h.conf"});
  EXPECT_EQ(rc, 0) << out;
  pid_t master = 0;
  test::wait_for([&] {
    std::ifstream f(h.pid_path());
    f >> master;
    return master != 0;
  });
  ASSERT_GT(master, 0);
  EXPECT_TRUE(test::alive(master));
  // The daemon logs to logs/error.log: its port is there.
  int port = -1;
  test::wait_for([&] {
    std::smatch m;
    std::string log = h.read("logs/error.log");
    if (std::regex_search(log, m, std::regex("listening on 127\\.0\\.0\\.1:(\\d+)")))
      port = std::stoi(m[1]);
    return port > 0;
  });
  ASSERT_GT(port, 0) << h.read("logs/error.log");
  pid_t worker = 0;
  test::wait_for([&] { return (worker = test::body_pid(test::get(port))) != 0; });
  EXPECT_GT(worker, 0);
  EXPECT_NE(worker, master);
  auto [rc2, out2] = test::run({test::kHarness, "-p", h.dir(), "-c", "conf/h.conf", "-s", "stop"});
  EXPECT_EQ(rc2, 0) << out2;
  EXPECT_TRUE(test::wait_for([&] { return !test::alive(master); }));
  EXPECT_FALSE(test::alive(worker));
  EXPECT_NE(::access(h.pid_path().c_str(), F_OK), 0);
  if (test::alive(master)) ::kill(master, SIGKILL);
  if (test::alive(worker)) ::kill(worker, SIGKILL);
}

TEST(Workers, CpuAffinityAutoPinsEachWorkerToOneCpu) {
  long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
  if (cpus < 2) GTEST_SKIP() << "needs two CPUs";
  Harness h;
  h.write_conf("worker_processes 2;\nworker_cpu_affinity auto;\n" + listen_line(0), "");
  ASSERT_TRUE(h.start(2)) << h.log();
  std::vector<pid_t> workers = h.started_workers();
  ASSERT_EQ(workers.size(), 2u);
  std::set<std::string> lists;
  for (pid_t pid : workers) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/status");
    std::string line, list;
    while (std::getline(f, line)) {
      if (line.rfind("Cpus_allowed_list:", 0) == 0)
        list = line.substr(line.find_last_of(" \t") + 1);
    }
    EXPECT_EQ(list.find_first_of(",-"), std::string::npos) << "one CPU only: " << list;
    lists.insert(list);
  }
  EXPECT_EQ(lists.size(), 2u) << "different CPUs";
  EXPECT_EQ(h.count("sched_setaffinity(0x"), 2u) << h.log();
}

TEST(Workers, CpuAffinityDirectiveIsChecked) {
  Harness h;
  auto check = [&](const std::string& directive) {
    std::ofstream(h.conf_path()) << directive << "\nevents {}\n";
    return test::run({VIGIL_BINARY, "-t", "-c", h.conf_path()});
  };
  EXPECT_EQ(check("worker_cpu_affinity auto;").first, 0);
  EXPECT_EQ(check("worker_cpu_affinity auto 1010;").first, 0);
  EXPECT_EQ(check("worker_processes 4;\nworker_cpu_affinity 0001 0010 0100 1000;").first, 0);
  auto [rc, out] = check("worker_cpu_affinity 0102;");
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out.find("invalid value \"0102\" in \"worker_cpu_affinity\" directive"),
            std::string::npos)
      << out;
  EXPECT_EQ(check("worker_cpu_affinity 0000;").first, 1) << "no CPU at all";
  EXPECT_EQ(check("worker_cpu_affinity " + std::string(65, '1') + ";").first, 1);
  EXPECT_EQ(check("worker_cpu_affinity auto 01 10;").first, 1);
}

}  // namespace
}  // namespace vigil
