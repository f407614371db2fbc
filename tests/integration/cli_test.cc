// The vigil program's command line, run as a real process.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "integration/http_harness.h"
#include "test_process.h"
#include "test_util.h"

namespace vigil {
namespace {

const std::string kVigil = VIGIL_BINARY;

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/vigil_cli_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ::mkdir((dir_ + "/conf").c_str(), 0755);
    ::mkdir((dir_ + "/logs").c_str(), 0755);
  }
  void TearDown() override { test::run({"rm", "-rf", dir_}); }
  void write(const std::string& rel, const std::string& text) {
    std::ofstream(dir_ + "/" + rel) << text;
  }
  std::string dir_;
};

const char* kGood =
    "worker_processes 2;\n"
    "daemon off;\n"
    "error_log stderr notice;\n"
    "events {\n"
    "    worker_connections 256;\n"
    "}\n";

TEST_F(Cli, TestFlagOnAGoodFile) {
  write("conf/good.conf", kGood);
  auto [rc, out] = test::run({kVigil, "-p", dir_, "-c", "conf/good.conf", "-t"});
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("vigil: the configuration file " + dir_ + "/conf/good.conf syntax is ok"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("vigil: configuration file " + dir_ + "/conf/good.conf test is successful"),
            std::string::npos)
      << out;
}

// A prefix given with its trailing slash (as nginx-tests and init scripts
// pass it): the failure names the file once joined, as the error line does.
TEST_F(Cli, TestFailedNamesTheJoinedPath) {
  write("conf/bad.conf", std::string(kGood) + "\nfoo bar;\n");
  auto [rc, out] = test::run({kVigil, "-p", dir_ + "/", "-c", "conf/bad.conf", "-t"});
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("in " + dir_ + "/conf/bad.conf:8"), std::string::npos) << out;
  EXPECT_NE(out.find("vigil: configuration file " + dir_ + "/conf/bad.conf test failed"),
            std::string::npos)
      << out;
}

TEST_F(Cli, TestFlagOnABadFileNamesFileLineAndProblem) {
  write("conf/bad.conf", std::string(kGood) + "\nfoo bar;\n");
  auto [rc, out] = test::run({kVigil, "-p", dir_, "-c", "conf/bad.conf", "-t"});
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("vigil: [emerg] unknown directive \"foo\" in " + dir_ + "/conf/bad.conf:8"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("test failed"), std::string::npos) << out;
  EXPECT_EQ(out.find("syntax is ok"), std::string::npos) << out;
}

TEST_F(Cli, BadValueIsReportedWithDirectiveAndLine) {
  write("conf/v.conf", "events {\n    worker_connections 12x;\n}\n");
  auto [rc, out] = test::run({kVigil, "-t", "-c", dir_ + "/conf/v.conf"});
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out.find("invalid value \"12x\" in \"worker_connections\" directive in " + dir_ +
                     "/conf/v.conf:2"),
            std::string::npos)
      << out;
}

TEST_F(Cli, MissingFileGivenWithCIsAnError) {
  auto [rc, out] = test::run({kVigil, "-t", "-c", dir_ + "/conf/none.conf"});
  EXPECT_EQ(rc, 1);
  EXPECT_NE(
      out.find("open() \"" + dir_ + "/conf/none.conf\" failed (2: No such file or directory)"),
      std::string::npos)
      << out;
}

TEST_F(Cli, EmbeddedDefaultIsUsedWhenNoFileExists) {
  auto [rc, out] = test::run({kVigil, "-p", dir_, "-T"});
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("conf/vigil.conf (embedded) syntax is ok"), std::string::npos) << out;
  // -T dumps the embedded text itself.
  EXPECT_NE(out.find("# configuration file conf/vigil.conf (embedded):"), std::string::npos) << out;
  EXPECT_NE(out.find("worker_connections"), std::string::npos) << out;
}

TEST_F(Cli, AFileAtTheDefaultPathWinsOverTheEmbeddedOne) {
  write("conf/vigil.conf", kGood);
  auto [rc, out] = test::run({kVigil, "-p", dir_, "-t"});
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find(dir_ + "/conf/vigil.conf syntax is ok"), std::string::npos) << out;
  EXPECT_EQ(out.find("(embedded)"), std::string::npos) << out;
}

TEST_F(Cli, GlobalDirectivesFromTheCommandLine) {
  write("conf/good.conf", kGood);
  // -g is parsed before the file: the same directive in both is a duplicate.
  auto [rc, out] =
      test::run({kVigil, "-p", dir_, "-c", "conf/good.conf", "-t", "-g", "daemon on;"});
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out.find("\"daemon\" directive is duplicate in " + dir_ + "/conf/good.conf:2"),
            std::string::npos)
      << out;
  // A directive not allowed in the main context.
  auto [rc2, out2] =
      test::run({kVigil, "-p", dir_, "-c", "conf/good.conf", "-t", "-g", "worker_connections 9;"});
  EXPECT_EQ(rc2, 1);
  EXPECT_NE(out2.find("\"worker_connections\" directive is not allowed here in command line"),
            std::string::npos)
      << out2;
}

TEST_F(Cli, GlobalDirectiveOverrideTakesEffectWhenRunning) {
  // pid is not in the file: -g sets it, and the running server writes it there.
  write("conf/good.conf", kGood);
  std::string pid_path = dir_ + "/logs/from-g.pid";
  test::Process server({kVigil, "-p", dir_, "-c", "conf/good.conf", "-g", "pid " + pid_path + ";"});
  ASSERT_TRUE(server.wait_for_output("started")) << server.output();
  test::wait_for([&] { return ::access(pid_path.c_str(), F_OK) == 0; }, 1000);
  std::ifstream f(pid_path);
  int pid = 0;
  f >> pid;
  EXPECT_EQ(pid, server.pid());
  // vigil -s stop finds it through the pid file.
  auto [rc, out] = test::run(
      {kVigil, "-p", dir_, "-c", "conf/good.conf", "-g", "pid " + pid_path + ";", "-s", "stop"});
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(server.wait(), 0) << server.output();
  EXPECT_NE(::access(pid_path.c_str(), F_OK), 0) << "the pid file is removed at exit";
}

TEST_F(Cli, SignalWithoutARunningServerSaysWhy) {
  write("conf/good.conf", kGood);
  auto [rc, out] = test::run({kVigil, "-p", dir_, "-c", "conf/good.conf", "-s", "reload"});
  EXPECT_EQ(rc, 1);
  EXPECT_NE(
      out.find("open() \"" + dir_ + "/logs/vigil.pid\" failed (2: No such file or directory)"),
      std::string::npos)
      << out;
}

TEST_F(Cli, BadOptionsAndVersion) {
  auto [rc, out] = test::run({kVigil, "-x"});
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out.find("invalid option: \"x\""), std::string::npos) << out;
  auto [rc2, out2] = test::run({kVigil, "-s", "explode"});
  EXPECT_EQ(rc2, 1);
  EXPECT_NE(out2.find("invalid option: \"-s explode\""), std::string::npos) << out2;
  auto [rc3, out3] = test::run({kVigil, "-c"});
  EXPECT_EQ(rc3, 1);
  EXPECT_NE(out3.find("option \"-c\" requires file name"), std::string::npos) << out3;
  auto [rc4, out4] = test::run({kVigil, "-V"});
  EXPECT_EQ(rc4, 0);
  EXPECT_NE(out4.find("vigil version: vigil/"), std::string::npos) << out4;
  EXPECT_NE(out4.find("epoll"), std::string::npos) << out4;
}

// Tools written for nginx read its -V lines: the version it behaves as, and
// the modules, in nginx's configure vocabulary.
TEST_F(Cli, VersionSpeaksNginxsVocabulary) {
  auto [rc, out] = test::run({kVigil, "-V"});
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("\nnginx version: nginx/1.22.1\n"), std::string::npos) << out;
  EXPECT_NE(out.find("TLS SNI support enabled\n"), std::string::npos) << out;
  const std::size_t at = out.find("\nconfigure arguments: ");
  ASSERT_NE(at, std::string::npos) << out;
  const std::string args = out.substr(at, out.find('\n', at + 1) - at) + " ";
  for (const char* with :
       {"--with-http_ssl_module ", "--with-http_stub_status_module ", "--with-stream ",
        "--with-stream_ssl_module ", "--with-mail ", "--with-mail_ssl_module "}) {
    EXPECT_NE(args.find(with), std::string::npos) << with << " in " << args;
  }
  for (const char* has : {"http_proxy_module", "http_limit_req_module", "http_access_module",
                          "stream_upstream_hash_module", "mail_smtp_module"}) {
    EXPECT_EQ(args.find(has), std::string::npos) << has << " in " << args;
  }
  // A module declared absent is one whose directive the configuration
  // refuses, and one not declared absent is accepted.
  struct Probe {
    const char* module;
    const char* directive;
  };
  for (Probe p : {Probe{"--without-http_gzip_module ", "gzip on;"},
                  Probe{"--without-http_map_module ", "map $uri $m { default 1; }"},
                  Probe{"--without-http_ssi_module ", "ssi on;"},
                  Probe{"--without-http_limit_conn_module ", "limit_conn_log_level info;"}}) {
    write("conf/p.conf", std::string("events {}\nhttp {\n    ") + p.directive + "\n}\n");
    auto [trc, tout] = test::run({kVigil, "-p", dir_, "-c", "conf/p.conf", "-t"});
    const bool declared_absent = args.find(p.module) != std::string::npos;
    EXPECT_EQ(trc, declared_absent ? 1 : 0) << p.module << "\n" << args << "\n" << tout;
  }
  auto [vrc, vout] = test::run({kVigil, "-v"});
  EXPECT_EQ(vrc, 0);
  EXPECT_NE(vout.find("nginx version: nginx/1.22.1\n"), std::string::npos) << vout;
}

// -e (nginx's): the error log while the configuration is read, and the
// main error_log when the configuration names none.
TEST_F(Cli, ErrorLogOptionTakesStartupErrorsAndIsTheDefaultErrorLog) {
  write("conf/bad.conf", "events {}\nnot_a_directive;\n");
  auto [rc, out] = test::run({kVigil, "-p", dir_, "-c", "conf/bad.conf", "-e", "logs/start.log"});
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("[emerg] unknown directive \"not_a_directive\""), std::string::npos) << out;
  const std::string start = test::read_file(dir_ + "/logs/start.log");
  EXPECT_NE(start.find("[emerg] "), std::string::npos) << start;
  EXPECT_NE(start.find("unknown directive \"not_a_directive\" in " + dir_ + "/conf/bad.conf:2"),
            std::string::npos)
      << start;

  // No error_log in the file: the server's errors go to the -e file.
  const int port = test::free_port();
  write("conf/run.conf",
        "daemon off;\nmaster_process off;\nevents {}\nhttp {\n    server {\n"
        "        listen 127.0.0.1:" +
            std::to_string(port) +
            ";\n"
            "        access_log off;\n    }\n}\n");
  test::Process server({kVigil, "-p", dir_, "-c", "conf/run.conf", "-e", "logs/run.log"});
  test::Response missing;
  ASSERT_TRUE(test::wait_for([&] {
    missing = test::get(port, "GET /missing HTTP/1.0\r\n\r\n");
    return missing.status == 404;
  })) << server.output();
  ASSERT_TRUE(test::wait_for([&] {
    return test::read_file(dir_ + "/logs/run.log").find("No such file or directory") !=
           std::string::npos;
  })) << server.output()
      << test::read_file(dir_ + "/logs/run.log");
  server.signal(SIGTERM);
  EXPECT_EQ(server.wait(), 0) << server.output();
  EXPECT_NE(::access((dir_ + "/logs/error.log").c_str(), F_OK), 0) << "-e replaces the default";

  auto [qrc, qout] = test::run({kVigil, "-e"});
  EXPECT_EQ(qrc, 1);
  EXPECT_NE(qout.find("option \"-e\" requires file name"), std::string::npos) << qout;
}

// Several error_log lines in the main context: each file gets what its level admits.
TEST_F(Cli, SeveralErrorLogsEachGetTheirLines) {
  const int port = test::free_port();
  write("conf/run.conf",
        "daemon off;\nmaster_process off;\nerror_log logs/a.log;\n"
        "error_log logs/b.log notice;\nevents {}\nhttp {\n    server {\n"
        "        listen 127.0.0.1:" +
            std::to_string(port) +
            ";\n"
            "        access_log off;\n    }\n}\n");
  test::Process server({kVigil, "-p", dir_, "-c", "conf/run.conf"});
  ASSERT_TRUE(test::wait_for([&] {
    return test::get(port, "GET /missing HTTP/1.0\r\n\r\n").status == 404;
  })) << server.output();
  for (const char* file : {"/logs/a.log", "/logs/b.log"}) {
    EXPECT_TRUE(test::wait_for([&] {
      return test::read_file(dir_ + file).find("No such file or directory") != std::string::npos;
    })) << file
        << ": " << test::read_file(dir_ + file);
  }
  // notice lines (the start) go to b.log only.
  EXPECT_NE(test::read_file(dir_ + "/logs/b.log").find("[notice]"), std::string::npos);
  EXPECT_EQ(test::read_file(dir_ + "/logs/a.log").find("[notice]"), std::string::npos);
  server.signal(SIGTERM);
  EXPECT_EQ(server.wait(), 0) << server.output();
}

// Test tools and migrated configurations carry nginx's temporary-file
// paths: their syntax is checked at load time (client_body_temp_path is
// made when a body first needs it; proxy_temp_path is never used).
TEST_F(Cli, TempPathDirectivesAreCheckedAndAccepted) {
  write("conf/t.conf",
        "events {}\nhttp {\n    client_body_temp_path /tmp/cb 1 2;\n"
        "    proxy_temp_path /tmp/pt;\n    server {\n        location / {\n"
        "            client_body_temp_path b 2;\n            client_body_in_single_buffer on;\n"
        "        }\n    }\n}\n");
  auto [rc, out] = test::run({kVigil, "-p", dir_, "-c", "conf/t.conf", "-t"});
  EXPECT_EQ(rc, 0) << out;
  write("conf/t.conf", "events {}\nhttp {\n    client_body_temp_path /tmp/cb 3;\n}\n");
  auto [rc2, out2] = test::run({kVigil, "-p", dir_, "-c", "conf/t.conf", "-t"});
  EXPECT_EQ(rc2, 1) << out2;
  EXPECT_NE(out2.find("invalid value \"3\" in \"client_body_temp_path\" directive"),
            std::string::npos)
      << out2;
}

TEST_F(Cli, StartsOnTheEmbeddedDefaultAndStopsOnSigterm) {
  test::Process server({kVigil, "-p", dir_});
  ASSERT_TRUE(server.wait_for_output("started")) << server.output();
  EXPECT_NE(server.output().find("using the embedded default configuration"), std::string::npos);
  server.signal(SIGTERM);
  EXPECT_EQ(server.wait(), 0) << server.output();
}

#if VIGIL_HAVE_URING
// `use io_uring` on a kernel without it (io_uring_setup fails with ENOSYS,
// simulated by a seccomp filter): a clear [emerg] with file:line at -t and
// at start, never a worker that dies later.
TEST_F(Cli, UseIoUringOnAKernelWithoutItIsAnEmerg) {
  write("conf/u.conf",
        "daemon off;\nmaster_process off;\nerror_log stderr notice;\n"
        "events {\n    use io_uring;\n}\n");
  const std::string wrap = std::string(VIGIL_SUPPORT_DIR) + "/without_io_uring";
  for (bool test_only : {true, false}) {
    std::vector<std::string> argv{wrap, kVigil, "-p", dir_, "-c", "conf/u.conf"};
    if (test_only) argv.push_back("-t");
    auto [rc, out] = test::run(argv);
    EXPECT_EQ(rc, 1) << out;
    EXPECT_NE(out.find("[emerg] io_uring is not available on this kernel"), std::string::npos)
        << out;
    EXPECT_NE(out.find(dir_ + "/conf/u.conf:5"), std::string::npos) << out;
    if (test_only) {
      EXPECT_NE(out.find("test failed"), std::string::npos) << out;
    }
  }
  // The same file is fine where io_uring works.
  auto [rc, out] = test::run({kVigil, "-p", dir_, "-c", "conf/u.conf", "-t"});
  EXPECT_EQ(rc, 0) << out;
}
#endif

}  // namespace
}  // namespace vigil
