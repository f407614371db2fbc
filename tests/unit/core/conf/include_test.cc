// Tests "include" (src/core/core_module.cc) and the parser's file stack
// (src/core/conf/parser.cc): globbing, resolution against the configuration's
// directory, context, nesting, cycles, depth, and the messages for each.

#include <gtest/gtest.h>

#include "conf_test_util.h"

namespace vigil {
namespace {

using testing::ConfDirTest;

class IncludeTest : public ConfDirTest {};

TEST_F(IncludeTest, GlobIsSortedAndParsedInPlace) {
  write("conf/conf.d/b.conf", "worker_processes 4;\n");
  write("conf/conf.d/a.conf", "daemon off;\n");
  write("conf/conf.d/skip.txt", "this is not configuration");
  auto r = load("include conf.d/*.conf;\nevents {}\n");
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_FALSE((*r)->core().daemon);
  EXPECT_EQ((*r)->core().worker_processes, 4);
  const auto& src = (*r)->sources();
  ASSERT_EQ(src.size(), 3u);
  EXPECT_EQ(src[0].path, "conf/vigil.conf");
  EXPECT_EQ(src[1].path, "conf/conf.d/a.conf");
  EXPECT_EQ(src[2].path, "conf/conf.d/b.conf");
  EXPECT_EQ(src[1].text, "daemon off;\n");
  EXPECT_EQ((*r)->dump(),
            "# configuration file conf/vigil.conf:\ninclude conf.d/*.conf;\nevents {}\n\n"
            "# configuration file conf/conf.d/a.conf:\ndaemon off;\n\n"
            "# configuration file conf/conf.d/b.conf:\nworker_processes 4;\n\n");
}

TEST_F(IncludeTest, PlainFileAndQuestionMarkAndClassPatterns) {
  write("conf/one.conf", "daemon off;");
  write("conf/w1.conf", "master_process off;");
  write("conf/x7.conf", "worker_processes 7;");
  auto r = load("include one.conf;\ninclude w?.conf;\ninclude [x]*.conf;\nevents {}");
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_FALSE((*r)->core().daemon);
  EXPECT_FALSE((*r)->core().master_process);
  EXPECT_EQ((*r)->core().worker_processes, 7);
}

TEST_F(IncludeTest, RelativeToConfigurationDirectoryNotCwd) {
  write("etc/main.conf", "include parts/*.conf;\nevents { include ev.conf; }\n");
  write("etc/parts/p.conf", "daemon off;");
  write("etc/ev.conf", "worker_connections 33;");
  write("parts/p.conf", "bogus;");  // would be picked up if resolved against the cwd
  ConfLoadOptions o = options();
  o.conf_path = "etc/main.conf";
  auto r = Configuration::load(o);
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_FALSE((*r)->core().daemon);
  EXPECT_EQ(event_conf(**r).connections, 33u);
}

TEST_F(IncludeTest, AbsolutePattern) {
  write("abs/x.conf", "daemon off;");
  auto r = load("include " + dir_ + "/abs/*.conf;\nevents {}");
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_FALSE((*r)->core().daemon);
}

TEST_F(IncludeTest, InsideEventsContext) {
  write("conf/events.conf", "# event tuning\nworker_connections 2048;\nmulti_accept on;\n");
  auto r = load("events {\n  include events.conf;\n  accept_mutex on;\n}\n");
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ(event_conf(**r).connections, 2048u);
  EXPECT_TRUE(event_conf(**r).multi_accept);
  EXPECT_TRUE(event_conf(**r).accept_mutex);
  // A main-context directive in a file included from events is rejected there.
  write("conf/events.conf", "daemon off;\n");
  EXPECT_EQ(error_of("events {\n  include events.conf;\n}\n"),
            "\"daemon\" directive is not allowed here in conf/events.conf:1");
}

TEST_F(IncludeTest, WholeEventsBlockFromAFile) {
  write("conf/ev.conf", "events {\n  worker_connections 64;\n}\n");
  auto r = load("include ev.conf;\n");
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ(event_conf(**r).connections, 64u);
}

TEST_F(IncludeTest, Nested) {
  write("conf/a.conf", "include b.conf;\ndaemon off;\n");
  write("conf/b.conf", "include sub/c.conf;\n");
  write("conf/sub/c.conf", "worker_processes 9;\n");
  auto r = load("include a.conf;\nevents {}\n");
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_FALSE((*r)->core().daemon);
  EXPECT_EQ((*r)->core().worker_processes, 9);
  ASSERT_EQ((*r)->sources().size(), 4u);
  EXPECT_EQ((*r)->sources()[3].path, "conf/sub/c.conf");
}

TEST_F(IncludeTest, SameFileTwiceIsDumpedOnce) {
  write("conf/empty.conf", "# nothing\n");
  auto r = load("include empty.conf;\ninclude empty.conf;\nevents {}");
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ((*r)->sources().size(), 2u);
}

// As nginx (Debian's nginx.conf includes an empty conf.d/*.conf): accepted,
// with a warning naming the include.
TEST_F(IncludeTest, MatchedNoFilesIsAWarning) {
  for (int pass = 0; pass < 2; ++pass) {
    auto r = load("events {}\ninclude conf.d/*.conf;\n");
    ASSERT_TRUE(r) << r.status().message();
    ASSERT_EQ((*r)->warnings().size(), 1u) << pass;
    EXPECT_EQ((*r)->warnings()[0], "include \"conf.d/*.conf\" matched no files in conf/vigil.conf:2");
    std::filesystem::create_directories("conf/conf.d");  // the second pass: an empty directory
  }
  write("conf/conf.d/a.conf", "worker_processes 3;");
  auto r = load("events {}\ninclude conf.d/*.conf;\n");
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_TRUE((*r)->warnings().empty());
  EXPECT_EQ((*r)->core().worker_processes, 3);
}

TEST_F(IncludeTest, MissingPlainFile) {
  EXPECT_EQ(error_of("events {}\n\ninclude nope.conf;\n"),
            "open() \"conf/nope.conf\" failed (2: No such file or directory) in "
            "conf/vigil.conf:3");
}

TEST_F(IncludeTest, ErrorsNameTheIncludedFile) {
  write("conf/inc.conf", "\n\nbogus;\n");
  EXPECT_EQ(error_of("include inc.conf;\nevents {}"),
            "unknown directive \"bogus\" in conf/inc.conf:3");
  write("conf/inc.conf", "daemon on;\n");
  EXPECT_EQ(error_of("daemon off;\ninclude inc.conf;\nevents {}"),
            "\"daemon\" directive is duplicate in conf/inc.conf:1");
  write("conf/inc.conf", "worker_processes x;\n");
  EXPECT_EQ(error_of("include inc.conf;\nevents {}"),
            "invalid value \"x\" in \"worker_processes\" directive in conf/inc.conf:1");
}

TEST_F(IncludeTest, BlocksDoNotSpanFiles) {
  write("conf/open.conf", "events {\n");
  EXPECT_EQ(error_of("include open.conf;\n}\n"),
            "unexpected end of file, expecting \"}\" in conf/open.conf:2");
  write("conf/close.conf", "}\n");
  EXPECT_EQ(error_of("events {\ninclude close.conf;\n"), "unexpected \"}\" in conf/close.conf:1");
}

TEST_F(IncludeTest, Cycles) {
  EXPECT_EQ(error_of("include vigil.conf;\nevents {}"),
            "include cycle: \"conf/vigil.conf\" is already being parsed in conf/vigil.conf:1");
  write("conf/a.conf", "include b.conf;\n");
  write("conf/b.conf", "\ninclude a.conf;\n");
  EXPECT_EQ(error_of("events {}\ninclude a.conf;"),
            "include cycle: \"conf/a.conf\" is already being parsed in conf/b.conf:2");
  // Through a glob too.
  write("conf/g/self.conf", "include g/*.conf;\n");
  EXPECT_EQ(error_of("events {}\ninclude g/*.conf;"),
            "include cycle: \"conf/g/self.conf\" is already being parsed in conf/g/self.conf:1");
}

TEST_F(IncludeTest, DepthIsLimited) {
  // f0 -> f1 -> ... -> f19: more files open at once than the limit allows.
  for (int i = 0; i < 20; ++i) {
    write("conf/f" + std::to_string(i) + ".conf",
          i < 19 ? "include f" + std::to_string(i + 1) + ".conf;\n" : "daemon off;\n");
  }
  EXPECT_EQ(error_of("events {}\ninclude f0.conf;\n"),
            "includes nested too deeply (more than 16 files) in conf/f14.conf:1");
  ConfLoadOptions o = options();
  o.limits.max_include_depth = 32;
  auto r = Configuration::load(o);
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_FALSE((*r)->core().daemon);
}

TEST_F(IncludeTest, FromEmbeddedResolvesUnderPrefixConf) {
  write("conf/extra.conf", "worker_processes 5;");
  ConfLoadOptions o;
  o.modules = &server_conf_modules();
  o.embedded_text = "include extra.conf;\nevents {}\n";
  // conf/vigil.conf does not exist, so the embedded text is used; its
  // includes resolve under <prefix>/conf/.
  auto r = Configuration::load(o);
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_TRUE((*r)->used_embedded());
  EXPECT_EQ((*r)->core().worker_processes, 5);
  ASSERT_EQ((*r)->sources().size(), 2u);
  EXPECT_EQ((*r)->sources()[1].path, "conf/extra.conf");

  o.prefix = dir_;
  r = Configuration::load(o);
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ((*r)->sources()[1].path, dir_ + "/conf/extra.conf");
}

TEST_F(IncludeTest, FromCommandLine) {
  write("conf/g.conf", "daemon off;");
  auto r = load("events {}", "include g.conf;");
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_FALSE((*r)->core().daemon);
  auto none = load("events {}", "include none/*.conf;");
  ASSERT_TRUE(none) << none.status().message();
  ASSERT_EQ((*none)->warnings().size(), 1u);
  EXPECT_EQ((*none)->warnings()[0], "include \"none/*.conf\" matched no files in command line");
}

TEST_F(IncludeTest, ArgumentsAndDisabling) {
  EXPECT_EQ(error_of("include;\nevents {}"),
            "invalid number of arguments in \"include\" directive in conf/vigil.conf:1");
  EXPECT_EQ(error_of("include a b;\nevents {}"),
            "invalid number of arguments in \"include\" directive in conf/vigil.conf:1");
  EXPECT_EQ(error_of("include \"\";\nevents {}"),
            "invalid value \"\" in \"include\" directive in conf/vigil.conf:1");
  write("conf/x.conf", "daemon off;");
  ConfLoadOptions o = options();
  o.allow_include = false;
  write("conf/vigil.conf", "events {}\ninclude x.conf;\n");
  EXPECT_EQ(error_of(o), "\"include\" directive is disabled in conf/vigil.conf:2");
}

}  // namespace
}  // namespace vigil
