// Tests for src/core/log.cc: line format, levels, errno suffix, reopen.

#include "vigil/core/log.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "vigil/core/clock.h"

namespace vigil {
namespace {

class LogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/vigil_log_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/error.log";
  }
  void TearDown() override {
    std::remove(path_.c_str());
    std::remove((path_ + ".1").c_str());
    rmdir(dir_.c_str());
  }

  static std::string slurp(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  static std::vector<std::string> lines(const std::string& path) {
    std::vector<std::string> out;
    std::istringstream in(slurp(path));
    for (std::string l; std::getline(in, l);) out.push_back(l);
    return out;
  }

  std::string dir_;
  std::string path_;
};

// Several targets: a line goes to each whose level admits it; open() drops
// the added ones; reopen() reopens them all.
TEST_F(LogTest, AddedTargetsEachTakeTheirLevel) {
  const std::string second = dir_ + "/second.log";
  Log log;
  ASSERT_TRUE(log.open(path_, LogLevel::kError).is_ok());
  ASSERT_TRUE(log.add(second, LogLevel::kInfo).is_ok());
  EXPECT_TRUE(log.enabled(LogLevel::kInfo));
  EXPECT_FALSE(log.enabled(LogLevel::kDebug));
  log.write(LogLevel::kInfo, 0, "detail");
  log.write(LogLevel::kError, 0, "failure");
  ASSERT_EQ(lines(path_).size(), 1u);
  EXPECT_NE(lines(path_)[0].find("[error]"), std::string::npos);
  ASSERT_EQ(lines(second).size(), 2u);
  EXPECT_NE(lines(second)[0].find("detail"), std::string::npos);

  ASSERT_EQ(std::rename(second.c_str(), (second + ".1").c_str()), 0);
  ASSERT_TRUE(log.reopen().is_ok());
  log.write(LogLevel::kError, 0, "after rotation");
  EXPECT_EQ(lines(second).size(), 1u);

  ASSERT_TRUE(log.open(path_, LogLevel::kError).is_ok());
  EXPECT_FALSE(log.enabled(LogLevel::kInfo));
  log.write(LogLevel::kError, 0, "only the first");
  EXPECT_EQ(lines(second).size(), 1u);
  std::remove(second.c_str());
  std::remove((second + ".1").c_str());
}

TEST_F(LogTest, LineFormatMatchesNginx) {
  clock::time_update_fixed(1795287812, 0, 1, 0);
  Log log;
  ASSERT_TRUE(log.open(path_, LogLevel::kInfo).is_ok());
  EXPECT_EQ(log.target(), path_);
  EXPECT_GT(log.fd(), 2);
  log.write(LogLevel::kNotice, 0, "started %s, %d workers", "vigil", 4);
  log.write(LogLevel::kError, EACCES, "open() \"%s\" failed", "/etc/shadow");

  const auto l = lines(path_);
  ASSERT_EQ(l.size(), 2u);
  const std::regex re(R"((\d{4}/\d\d/\d\d \d\d:\d\d:\d\d) \[([a-z]+)\] (\d+)#(\d+): (.*))");
  std::smatch m;
  ASSERT_TRUE(std::regex_match(l[0], m, re)) << l[0];
  EXPECT_EQ(m[1], "2026/11/21 19:03:32");
  EXPECT_EQ(m[2], "notice");
  EXPECT_EQ(std::stol(m[3]), static_cast<long>(getpid()));
  EXPECT_EQ(m[4], "0");
  EXPECT_EQ(m[5], "started vigil, 4 workers");

  ASSERT_TRUE(std::regex_match(l[1], m, re)) << l[1];
  EXPECT_EQ(m[2], "error");
  EXPECT_EQ(m[5], "open() \"/etc/shadow\" failed (13: Permission denied)");
}

TEST_F(LogTest, LevelFiltering) {
  Log log;
  ASSERT_TRUE(log.open(path_, LogLevel::kWarn).is_ok());
  EXPECT_TRUE(log.enabled(LogLevel::kEmerg));
  EXPECT_TRUE(log.enabled(LogLevel::kWarn));
  EXPECT_FALSE(log.enabled(LogLevel::kNotice));
  log.write(LogLevel::kDebug, 0, "debug");
  log.write(LogLevel::kInfo, 0, "info");
  log.write(LogLevel::kNotice, 0, "notice");
  log.write(LogLevel::kWarn, 0, "warn");
  log.write(LogLevel::kCrit, 0, "crit");
  VIGIL_LOG(log, kInfo, 0, "macro info");
  VIGIL_LOG(log, kEmerg, 0, "macro emerg");

  const auto l = lines(path_);
  ASSERT_EQ(l.size(), 3u);
  EXPECT_NE(l[0].find("[warn] "), std::string::npos);
  EXPECT_NE(l[1].find("[crit] "), std::string::npos);
  EXPECT_NE(l[2].find("[emerg] "), std::string::npos);
  EXPECT_NE(l[2].find(": macro emerg"), std::string::npos);

  log.set_level(LogLevel::kDebug);
  log.write(LogLevel::kDebug, 0, "now visible");
  EXPECT_EQ(lines(path_).size(), 4u);
}

TEST_F(LogTest, MacroDoesNotEvaluateArgumentsWhenDisabled) {
  Log log;
  ASSERT_TRUE(log.open(path_, LogLevel::kError).is_ok());
  int calls = 0;
  auto count = [&calls] { return ++calls; };
  VIGIL_LOG(log, kDebug, 0, "%d", count());
  EXPECT_EQ(calls, 0);
}

TEST_F(LogTest, WritingKeepsErrno) {
  Log log;
  ASSERT_TRUE(log.open(path_, LogLevel::kInfo).is_ok());
  errno = ENOENT;
  log.write(LogLevel::kError, EPIPE, "x");
  EXPECT_EQ(errno, ENOENT);
}

TEST_F(LogTest, AppendsToAnExistingFile) {
  {
    std::ofstream out(path_);
    out << "old line\n";
  }
  Log log;
  ASSERT_TRUE(log.open(path_, LogLevel::kInfo).is_ok());
  log.write(LogLevel::kNotice, 0, "new line");
  const auto l = lines(path_);
  ASSERT_EQ(l.size(), 2u);
  EXPECT_EQ(l[0], "old line");
}

TEST_F(LogTest, ReopenAfterRename) {
  Log log;
  ASSERT_TRUE(log.open(path_, LogLevel::kInfo).is_ok());
  const int fd = log.fd();
  log.write(LogLevel::kNotice, 0, "before rotation");

  const std::string rotated = path_ + ".1";
  ASSERT_EQ(std::rename(path_.c_str(), rotated.c_str()), 0);
  log.write(LogLevel::kNotice, 0, "after rename, before reopen");  // still the old file
  ASSERT_TRUE(log.reopen().is_ok());
  log.write(LogLevel::kNotice, 0, "after reopen");

  // The descriptor number survived (concurrent writers never saw it closed),
  // and it is still close-on-exec.
  EXPECT_EQ(log.fd(), fd);
  EXPECT_EQ(fcntl(log.fd(), F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);

  const auto old_lines = lines(rotated);
  ASSERT_EQ(old_lines.size(), 2u);
  EXPECT_NE(old_lines[0].find("before rotation"), std::string::npos);
  EXPECT_NE(old_lines[1].find("after rename, before reopen"), std::string::npos);
  const auto new_lines = lines(path_);
  ASSERT_EQ(new_lines.size(), 1u);
  EXPECT_NE(new_lines[0].find("after reopen"), std::string::npos);
}

TEST_F(LogTest, OpenFailureNamesThePath) {
  Log log;
  const std::string bad = dir_ + "/no/such/dir/error.log";
  Status s = log.open(bad, LogLevel::kInfo);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.err(), ENOENT);
  EXPECT_EQ(s.to_string(), "open() \"" + bad + "\" failed (2: No such file or directory)");
  // A failed open leaves the log where it was.
  EXPECT_EQ(log.target(), "stderr");
  EXPECT_EQ(log.fd(), 2);
}

TEST_F(LogTest, StderrTargetAndReopenIsANoop) {
  Log log;
  EXPECT_EQ(log.target(), "stderr");
  EXPECT_EQ(log.level(), LogLevel::kNotice);
  ASSERT_TRUE(log.open(path_, LogLevel::kInfo).is_ok());
  ASSERT_TRUE(log.open("stderr", LogLevel::kWarn).is_ok());
  EXPECT_EQ(log.fd(), 2);
  EXPECT_EQ(log.level(), LogLevel::kWarn);
  EXPECT_TRUE(log.reopen().is_ok());
}

TEST_F(LogTest, VeryLongMessageIsTruncatedWithEllipsis) {
  Log log;
  ASSERT_TRUE(log.open(path_, LogLevel::kInfo).is_ok());
  const std::string huge(100000, 'x');
  log.write(LogLevel::kError, ECONNRESET, "%s", huge.c_str());
  log.write(LogLevel::kNotice, 0, "next line intact");

  const auto l = lines(path_);
  ASSERT_EQ(l.size(), 2u);
  EXPECT_LE(l[0].size() + 1, 2048u);  // the line and its newline fit the buffer
  // The cut is marked, and the errno is still there after it.
  EXPECT_NE(l[0].find("xxx... (104: Connection reset by peer)"), std::string::npos) << l[0];
  EXPECT_NE(l[1].find("next line intact"), std::string::npos);
}

TEST_F(LogTest, MessageJustFittingIsNotCut) {
  Log log;
  ASSERT_TRUE(log.open(path_, LogLevel::kInfo).is_ok());
  const std::string msg(1500, 'y');
  log.write(LogLevel::kNotice, 0, "%s", msg.c_str());
  const auto l = lines(path_);
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(l[0].substr(l[0].size() - msg.size()), msg);
  EXPECT_EQ(l[0].find("..."), std::string::npos);
}

TEST(LogLevels, NamesAndParsing) {
  const char* names[] = {"emerg", "alert", "crit", "error", "warn", "notice", "info", "debug"};
  for (int i = 0; i < 8; ++i) {
    LogLevel lvl = LogLevel::kEmerg;
    ASSERT_TRUE(parse_log_level(names[i], &lvl)) << names[i];
    EXPECT_EQ(static_cast<int>(lvl), i);
    EXPECT_EQ(log_level_name(lvl), names[i]);
  }
  LogLevel lvl = LogLevel::kInfo;
  EXPECT_FALSE(parse_log_level("err", &lvl));
  EXPECT_FALSE(parse_log_level("", &lvl));
  EXPECT_FALSE(parse_log_level("DEBUG", &lvl));
  EXPECT_EQ(lvl, LogLevel::kInfo);  // untouched on failure
}

TEST(LogGlobal, IsOneObjectOnStderr) {
  Log& a = Log::global();
  Log& b = Log::global();
  EXPECT_EQ(&a, &b);
  EXPECT_EQ(a.target(), "stderr");
}

}  // namespace
}  // namespace vigil
