#pragma once
// A fixture that runs each test in a fresh temporary directory (the prefix is
// "" = the current directory, so messages print paths exactly as nginx would
// with -p pointing here) and helpers to write files and load them.

#include <gtest/gtest.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>

#include "core/conf/loader.h"
#include "core/core_module.h"
#include "event/event_conf.h"
#include "server/modules.h"

namespace vigil::testing {

class ConfDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char cwd[PATH_MAX];
    ASSERT_NE(::getcwd(cwd, sizeof(cwd)), nullptr);
    old_cwd_ = cwd;
    char tmpl[] = "/tmp/vigil_conf_test_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ASSERT_EQ(::chdir(dir_.c_str()), 0);
  }
  void TearDown() override {
    EXPECT_EQ(::chdir(old_cwd_.c_str()), 0);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  // Writes `text` to `path` (relative to the test directory), creating parents.
  void write(const std::string& path, std::string_view text) {
    std::filesystem::path p(path);
    if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
    std::ofstream out(path, std::ios::binary);
    out << text;
  }

  ConfLoadOptions options(std::string extra = {}) {
    ConfLoadOptions o;
    o.modules = &server_conf_modules();
    o.extra_directives = std::move(extra);
    o.allow_embedded = false;
    return o;
  }

  // Writes conf/vigil.conf and loads it with default options.
  Result<std::unique_ptr<Configuration>> load(std::string_view text, std::string extra = {}) {
    write("conf/vigil.conf", text);
    return Configuration::load(options(std::move(extra)));
  }

  // The error message of loading `text`, or "(loaded)" when it loaded.
  std::string error_of(std::string_view text, std::string extra = {}) {
    auto r = load(text, std::move(extra));
    return r ? std::string("(loaded)") : r.status().message();
  }
  std::string error_of(const ConfLoadOptions& o) {
    auto r = Configuration::load(o);
    return r ? std::string("(loaded)") : r.status().message();
  }

  std::string dir_;
  std::string old_cwd_;
};

}  // namespace vigil::testing
