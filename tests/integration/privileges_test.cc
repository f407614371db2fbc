// Worker credentials and the checks around them, through the real vigil
// binary: the default user when the master runs as root, `user root;`,
// working_directory and worker_rlimit_core as the workers see them, log files
// that stay writable across a reopen, what -t reports, and a master that
// exits when no worker can start.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "harness.h"
#include "test_util.h"

namespace vigil {
namespace {

using test::Harness;

std::string conf_text(int port, const std::string& main, const std::string& events = "",
                      const std::string& http = "access_log off;") {
  return "daemon off;\nerror_log stderr notice;\nworker_processes 2;\n" + main + "\nevents { " +
         events + " }\nhttp {\n  " + http +
         "\n  server {\n    listen 127.0.0.1:" + std::to_string(port) +
         ";\n    root html;\n  }\n}\n";
}

void make_docroot(Harness& h) {
  ::chmod(h.dir().c_str(), 0755);
  ::mkdir((h.dir() + "/html").c_str(), 0755);
  std::ofstream(h.dir() + "/html/index.html") << "hello\n";
  ::chmod((h.dir() + "/html/index.html").c_str(), 0644);
}

// The four ids of a "Uid:" or "Gid:" line of /proc/<pid>/status.
std::string ids(pid_t pid, const std::string& field) {
  std::istringstream in(test::read_file("/proc/" + std::to_string(pid) + "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) {
      std::istringstream w(line.substr(field.size() + 1));
      std::string a, b, c, d;
      w >> a >> b >> c >> d;
      return a + " " + b + " " + c + " " + d;
    }
  }
  return "";
}

std::string same4(unsigned id) {
  const std::string s = std::to_string(id);
  return s + " " + s + " " + s + " " + s;
}

// The body of GET / on a fresh connection, "" on failure.
std::string get_index(int port) {
  int fd = test::send_request(port, "GET / HTTP/1.0\r\nHost: t\r\n\r\n");
  if (fd == -1) return "";
  const std::string all = test::read_n(fd, 1 << 20, 5000);
  ::close(fd);
  const std::size_t at = all.find("\r\n\r\n");
  if (all.rfind("HTTP/1.1 200", 0) != 0 || at == std::string::npos) return "";
  return all.substr(at + 4);
}

std::string run_test_flag(Harness& h) {
  test::Process p({VIGIL_BINARY, "-t", "-p", h.dir(), "-c", h.conf_path()});
  p.wait();
  return p.output();
}

TEST(Privileges, WorkersDropToNobodyByDefaultAndStillServeFiles) {
  Harness h;
  make_docroot(h);
  const int port = test::free_port();
  h.set_binary(VIGIL_BINARY);
  h.write_raw_conf(conf_text(port, ""));
  ASSERT_TRUE(h.start(2)) << h.log();
  const auto workers = h.started_workers();
  ASSERT_EQ(workers.size(), 2u);
  // Root drops to nobody (65534 here); anyone else keeps their own ids.
  const unsigned uid = ::geteuid() == 0 ? 65534u : ::geteuid();
  const unsigned gid = ::geteuid() == 0 ? 65534u : ::getegid();
  for (pid_t w : workers) {
    EXPECT_EQ(ids(w, "Uid"), same4(uid)) << "worker " << w;
    EXPECT_EQ(ids(w, "Gid"), same4(gid)) << "worker " << w;
  }
  // The master keeps its credentials: it opens sockets again on reload.
  EXPECT_EQ(ids(h.master(), "Uid"), same4(::geteuid()));
  EXPECT_EQ(get_index(port), "hello\n");
}

TEST(Privileges, UserRootMustBeAskedFor) {
  Harness h;
  make_docroot(h);
  const int port = test::free_port();
  h.set_binary(VIGIL_BINARY);
  h.write_raw_conf(conf_text(port, "user root;"));
  ASSERT_TRUE(h.start(2)) << h.log();
  for (pid_t w : h.started_workers()) EXPECT_EQ(ids(w, "Uid"), same4(::geteuid()));
  EXPECT_EQ(get_index(port), "hello\n");
}

TEST(Privileges, WorkingDirectoryAndCoreLimitAreTheWorkers) {
  Harness h;
  make_docroot(h);
  ::mkdir((h.dir() + "/cores").c_str(), 0777);
  const int port = test::free_port();
  h.set_binary(VIGIL_BINARY);
  h.write_raw_conf(conf_text(port, "working_directory cores;\nworker_rlimit_core 2m;"));
  ASSERT_TRUE(h.start(2)) << h.log();
  for (pid_t w : h.started_workers()) {
    char cwd[4096] = {};
    const std::string link = "/proc/" + std::to_string(w) + "/cwd";
    ASSERT_GT(::readlink(link.c_str(), cwd, sizeof cwd - 1), 0);
    EXPECT_EQ(std::string(cwd), h.dir() + "/cores");
    const std::string limits = test::read_file("/proc/" + std::to_string(w) + "/limits");
    EXPECT_NE(limits.find("Max core file size        2097152              2097152"),
              std::string::npos)
        << limits;
  }
}

TEST(Privileges, AccessLogStaysWritableAfterRotation) {
  Harness h;
  make_docroot(h);
  const int port = test::free_port();
  h.set_binary(VIGIL_BINARY);
  h.write_raw_conf(conf_text(port, "", "", "access_log logs/access.log buffer=64 flush=100ms;"));
  ASSERT_TRUE(h.start(2)) << h.log();
  const std::string log_path = h.dir() + "/logs/access.log";
  ASSERT_EQ(::rename(log_path.c_str(), (log_path + ".1").c_str()), 0);
  ::kill(h.master(), SIGUSR1);
  ASSERT_TRUE(h.wait_log_count("reopening logs", 3)) << h.log();
  // The workers, no longer root, reopen a file the master created for them.
  struct stat st {};
  ASSERT_EQ(::stat(log_path.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, ::geteuid() == 0 ? 65534u : ::geteuid());
  bool logged = false;
  for (int i = 0; i < 100 && !logged; ++i) {
    EXPECT_EQ(get_index(port), "hello\n");
    logged = test::read_file(log_path).find("GET / HTTP/1.0") != std::string::npos;
  }
  EXPECT_TRUE(logged) << h.log();
  EXPECT_EQ(h.count("[alert]"), 0u) << h.log();
}

TEST(Privileges, TestFlagWarnsWhenTheUserCannotReadTheRoot) {
  if (::geteuid() != 0) {
    // Without root there is no other user to check as; the flag must still pass.
    Harness h;
    h.write_raw_conf(conf_text(test::free_port(), ""));
    EXPECT_NE(run_test_flag(h).find("test is successful"), std::string::npos);
    return;
  }
  Harness h;
  make_docroot(h);
  ::chmod((h.dir() + "/html").c_str(), 0700);  // root's only
  h.write_raw_conf(conf_text(test::free_port(), ""));
  std::string out = run_test_flag(h);
  EXPECT_NE(out.find("[warn] root \"" + h.dir() + "/html\" cannot be read by user \"nobody\""),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("test is successful"), std::string::npos) << out;
  // Readable: no warning.
  ::chmod((h.dir() + "/html").c_str(), 0755);
  out = run_test_flag(h);
  EXPECT_EQ(out.find("cannot be read"), std::string::npos) << out;
}

TEST(Privileges, UnknownUserFailsTheTest) {
  Harness h;
  h.write_raw_conf(conf_text(test::free_port(), "user no_such_user_vigil;"));
  const std::string out = run_test_flag(h);
  if (::geteuid() == 0) {
    EXPECT_NE(out.find("getpwnam(\"no_such_user_vigil\") failed"), std::string::npos) << out;
    EXPECT_NE(out.find("test failed"), std::string::npos) << out;
  } else {
    EXPECT_NE(out.find("makes sense only if the master process runs with super-user"),
              std::string::npos)
        << out;
  }
}

TEST(FailEarly, TestFlagRefusesWhatAWorkerWouldRefuse) {
  Harness h;
  h.write_raw_conf(conf_text(test::free_port(), "", "use select; worker_connections 8192;"));
  std::string out = run_test_flag(h);
  EXPECT_NE(out.find("the maximum number of files supported by select() is"), std::string::npos)
      << out;
  EXPECT_NE(out.find("test failed"), std::string::npos) << out;

  h.write_raw_conf(
      conf_text(test::free_port(), "worker_rlimit_nofile 100;", "worker_connections 1000;"));
  out = run_test_flag(h);
  EXPECT_NE(out.find("[warn] 1000 worker_connections exceed open file resource limit: 100"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("test is successful"), std::string::npos) << out;
}

TEST(FailEarly, MasterExitsWhenNoWorkerCanStart) {
  Harness h;
  make_docroot(h);
  h.set_binary(VIGIL_BINARY);
  h.write_raw_conf(conf_text(test::free_port(), "", "use select; worker_connections 8192;"));
  ASSERT_TRUE(h.start(0)) << h.log();
  EXPECT_EQ(h.wait_exit(10000), 1) << h.log();
  EXPECT_EQ(h.count("exited with fatal code 2 and cannot be respawned"), 2u) << h.log();
  EXPECT_EQ(h.count("no worker process is running"), 1u) << h.log();
  EXPECT_FALSE(test::alive(h.master()));
}

}  // namespace
}  // namespace vigil
