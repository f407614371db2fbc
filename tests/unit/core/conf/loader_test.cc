// Tests src/core/conf/loader.cc with the built-in modules (core_module.cc,
// event/event_conf.cc): defaults, every directive, every error message with
// its location, -g, the embedded configuration and the -T dump.

#include "core/conf/loader.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "conf_test_util.h"
#include "core/core_module.h"
#include "event/event_conf.h"

namespace vigil {
namespace {

using testing::ConfDirTest;

class LoaderTest : public ConfDirTest {};

TEST_F(LoaderTest, DefaultsFilledByInit) {
  auto r = load("events {}\n");
  ASSERT_TRUE(r) << r.status().message();
  const CoreConf& core = (*r)->core();
  EXPECT_EQ(core.worker_processes, 1);
  EXPECT_TRUE(core.daemon);
  EXPECT_TRUE(core.master_process);
  EXPECT_EQ(core.pid_path, "logs/vigil.pid");
  EXPECT_EQ(core.error_log, "logs/error.log");
  EXPECT_EQ(core.error_log_level, LogLevel::kError);
  EXPECT_EQ(core.worker_rlimit_nofile, -1);
  EXPECT_EQ(core.timer_resolution, 0u);
  EXPECT_EQ(core.worker_shutdown_timeout, 0u);
  const EventConf& ev = event_conf(**r);
  EXPECT_EQ(ev.connections, 512u);
  EXPECT_EQ(ev.use, "");
  EXPECT_FALSE(ev.multi_accept);
  EXPECT_FALSE(ev.accept_mutex);
  EXPECT_EQ(ev.accept_mutex_delay, 500u);
  EXPECT_EQ(ev.epoll_events, 512u);
  EXPECT_EQ(ev.kqueue_changes, 512u);
  EXPECT_EQ(ev.kqueue_events, 512u);
  EXPECT_FALSE((*r)->used_embedded());
  EXPECT_EQ((*r)->main_path(), "conf/vigil.conf");
}

TEST_F(LoaderTest, EveryDirectiveSet) {
  auto r = load(
      "worker_processes 3;\n"
      "daemon off;\n"
      "master_process OFF;\n"
      "pid run/v.pid;\n"
      "error_log /var/log/v.log warn;\n"
      "worker_rlimit_nofile 65535;\n"
      "timer_resolution 100ms;\n"
      "worker_shutdown_timeout 1m30s;\n"
      "events {\n"
      "  worker_connections 4096;\n"
      "  use epoll;\n"
      "  multi_accept on;\n"
      "  accept_mutex on;\n"
      "  accept_mutex_delay 1s;\n"
      "  epoll_events 64;\n"
      "}\n");
  ASSERT_TRUE(r) << r.status().message();
  const CoreConf& core = (*r)->core();
  EXPECT_EQ(core.worker_processes, 3);
  EXPECT_FALSE(core.daemon);
  EXPECT_FALSE(core.master_process);
  EXPECT_EQ(core.pid_path, "run/v.pid");
  EXPECT_EQ(core.error_log, "/var/log/v.log");
  EXPECT_EQ(core.error_log_level, LogLevel::kWarn);
  EXPECT_EQ(core.worker_rlimit_nofile, 65535);
  EXPECT_EQ(core.timer_resolution, 100u);
  EXPECT_EQ(core.worker_shutdown_timeout, 90000u);
  const EventConf& ev = event_conf(**r);
  EXPECT_EQ(ev.connections, 4096u);
  EXPECT_EQ(ev.use, "epoll");
  EXPECT_TRUE(ev.multi_accept);
  EXPECT_TRUE(ev.accept_mutex);
  EXPECT_EQ(ev.accept_mutex_delay, 1000u);
  EXPECT_EQ(ev.epoll_events, 64u);
}

TEST_F(LoaderTest, WorkerProcessesAuto) {
  auto r = load("worker_processes auto; events {}");
  ASSERT_TRUE(r) << r.status().message();
  long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
  ASSERT_GT(cpus, 0);
  EXPECT_EQ((*r)->core().worker_processes, cpus);
}

TEST_F(LoaderTest, ErrorLogTargetsAndLevels) {
  auto r = load("error_log stderr; events {}");
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ((*r)->core().error_log, "stderr");
  EXPECT_EQ((*r)->core().error_log_level, LogLevel::kError);

  r = load("error_log logs/x.log debug; events {}");
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ((*r)->core().error_log, "logs/x.log");
  EXPECT_EQ((*r)->core().error_log_level, LogLevel::kDebug);
  EXPECT_TRUE((*r)->core().more_error_logs.empty());

  // Several: the first is the log, the others are added with their levels.
  r = load("error_log logs/x.log; error_log logs/y.log info; error_log stderr; events {}");
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ((*r)->core().error_log, "logs/x.log");
  using Target = std::pair<std::string, LogLevel>;
  EXPECT_EQ((*r)->core().more_error_logs,
            (std::vector<Target>{{"logs/y.log", LogLevel::kInfo}, {"stderr", LogLevel::kError}}));

  EXPECT_EQ(error_of("error_log stderr loud; events {}"),
            "invalid value \"loud\" in \"error_log\" directive, it must be \"debug\", \"info\", "
            "\"notice\", \"warn\", \"error\", \"crit\", \"alert\" or \"emerg\" in "
            "conf/vigil.conf:1");
  std::string many = "events {}\n";
  for (int i = 0; i < 9; ++i) many += "error_log logs/e" + std::to_string(i) + ".log;\n";
  EXPECT_EQ(error_of(many), "too many \"error_log\" directives in conf/vigil.conf:10");
  EXPECT_EQ(error_of("error_log a b c; events {}"),
            "invalid number of arguments in \"error_log\" directive in conf/vigil.conf:1");
}

TEST_F(LoaderTest, PathsResolveAgainstPrefix) {
  write("conf/vigil.conf", "pid my.pid; error_log /abs/e.log; events {}");
  ConfLoadOptions o = options();
  o.prefix = dir_;  // absolute prefix this time
  auto r = Configuration::load(o);
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ((*r)->core().pid_path, dir_ + "/my.pid");
  EXPECT_EQ((*r)->core().error_log, "/abs/e.log");
  EXPECT_EQ((*r)->main_path(), dir_ + "/conf/vigil.conf");

  write("conf/vigil.conf", "events {}");
  o.prefix = dir_ + "/";
  r = Configuration::load(o);
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ((*r)->core().pid_path, dir_ + "/logs/vigil.pid");
  EXPECT_EQ((*r)->core().error_log, dir_ + "/logs/error.log");
}

TEST_F(LoaderTest, ConfPathResolution) {
  write("other/main.conf", "events {}");
  ConfLoadOptions o = options();
  o.conf_path = "other/main.conf";
  auto r = Configuration::load(o);
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ((*r)->main_path(), "other/main.conf");
  EXPECT_EQ((*r)->env().conf_prefix, "other/");

  o.prefix = "/nonexistent-prefix";
  EXPECT_EQ(error_of(o),
            "open() \"/nonexistent-prefix/other/main.conf\" failed (2: No such file or directory)");

  o.prefix = "";
  o.conf_path = dir_ + "/other/main.conf";  // absolute: the prefix does not apply
  r = Configuration::load(o);
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ((*r)->env().conf_prefix, dir_ + "/other/");
}

TEST_F(LoaderTest, UnknownDirective) {
  std::string text = "events {}\n";
  for (int i = 2; i < 12; ++i) text += "# filler\n";
  text += "foo bar;\n";
  EXPECT_EQ(error_of(text), "unknown directive \"foo\" in conf/vigil.conf:12");
  EXPECT_EQ(error_of("events { bar; }"), "unknown directive \"bar\" in conf/vigil.conf:1");
  EXPECT_EQ(error_of("foo { }"), "unknown directive \"foo\" in conf/vigil.conf:1");
  // Names are case-sensitive, as in nginx.
  EXPECT_EQ(error_of("Daemon off; events {}"), "unknown directive \"Daemon\" in conf/vigil.conf:1");
}

TEST_F(LoaderTest, NotAllowedHere) {
  EXPECT_EQ(error_of("worker_connections 10;\nevents {}"),
            "\"worker_connections\" directive is not allowed here in conf/vigil.conf:1");
  EXPECT_EQ(error_of("events {\n  daemon off;\n}"),
            "\"daemon\" directive is not allowed here in conf/vigil.conf:2");
  EXPECT_EQ(error_of("events {\n  events { }\n}"),
            "\"events\" directive is not allowed here in conf/vigil.conf:2");
}

TEST_F(LoaderTest, InvalidNumberOfArguments) {
  EXPECT_EQ(error_of("events {\n worker_connections;\n}"),
            "invalid number of arguments in \"worker_connections\" directive in conf/vigil.conf:2");
  EXPECT_EQ(error_of("events {\n worker_connections 1 2;\n}"),
            "invalid number of arguments in \"worker_connections\" directive in conf/vigil.conf:2");
  EXPECT_EQ(error_of("daemon; events {}"),
            "invalid number of arguments in \"daemon\" directive in conf/vigil.conf:1");
  EXPECT_EQ(error_of("events x { }"),
            "invalid number of arguments in \"events\" directive in conf/vigil.conf:1");
  // "1h 30m" unquoted is two arguments.
  EXPECT_EQ(error_of("timer_resolution 1h 30m; events {}"),
            "invalid number of arguments in \"timer_resolution\" directive in conf/vigil.conf:1");
}

TEST_F(LoaderTest, InvalidValues) {
  EXPECT_EQ(error_of("events {\n worker_connections 12x;\n}"),
            "invalid value \"12x\" in \"worker_connections\" directive in conf/vigil.conf:2");
  EXPECT_EQ(error_of("events { worker_connections 0; }"),
            "invalid value \"0\" in \"worker_connections\" directive in conf/vigil.conf:1");
  EXPECT_EQ(error_of("events { worker_connections 99999999999999999999; }"),
            "invalid value \"99999999999999999999\" in \"worker_connections\" directive in "
            "conf/vigil.conf:1");
  EXPECT_EQ(
      error_of("events { worker_connections 2147483648; }"),
      "invalid value \"2147483648\" in \"worker_connections\" directive in conf/vigil.conf:1");
  EXPECT_EQ(error_of("worker_processes 0; events {}"),
            "invalid value \"0\" in \"worker_processes\" directive in conf/vigil.conf:1");
  EXPECT_EQ(error_of("worker_processes -2; events {}"),
            "invalid value \"-2\" in \"worker_processes\" directive in conf/vigil.conf:1");
  EXPECT_EQ(error_of("daemon yes; events {}"),
            "invalid value \"yes\" in \"daemon\" directive, it must be \"on\" or \"off\" in "
            "conf/vigil.conf:1");
  EXPECT_EQ(error_of("events { accept_mutex_delay 5x; }"),
            "invalid value \"5x\" in \"accept_mutex_delay\" directive in conf/vigil.conf:1");
  EXPECT_EQ(error_of("timer_resolution 99999999999999999999k; events {}"),
            "invalid value \"99999999999999999999k\" in \"timer_resolution\" directive in "
            "conf/vigil.conf:1");
  EXPECT_EQ(error_of("pid \"\"; events {}"),
            "invalid value \"\" in \"pid\" directive in conf/vigil.conf:1");
  EXPECT_EQ(error_of("worker_rlimit_nofile 0; events {}"),
            "invalid value \"0\" in \"worker_rlimit_nofile\" directive in conf/vigil.conf:1");
}

TEST_F(LoaderTest, UseValidatesTheEventMethod) {
  for (const char* name : {"epoll", "poll", "select", "io_uring"}) {
    auto r = load(std::string("events { use ") + name + "; }");
    ASSERT_TRUE(r) << r.status().message();
    EXPECT_EQ(event_conf(**r).use, name);
  }
  auto r = load("events { use EPOLL; }");  // keywords are case-insensitive
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ(event_conf(**r).use, "epoll");
  EXPECT_EQ(error_of("events {\n use eventport;\n}"),
            "invalid value \"eventport\" in \"use\" directive, it must be \"epoll\", \"poll\", "
            "\"select\", \"io_uring\" or \"kqueue\" in conf/vigil.conf:2");
  // kqueue is a known name; whether it loads depends on the build (a BSD,
  // or Linux with VIGIL_KQUEUE_ROOT=libkqueue).
#if VIGIL_HAVE_KQUEUE
  auto kq = load("events { use kqueue; kqueue_changes 64; kqueue_events 32; }");
  ASSERT_TRUE(kq) << kq.status().message();
  EXPECT_EQ(event_conf(**kq).use, "kqueue");
  EXPECT_EQ(event_conf(**kq).kqueue_changes, 64u);
  EXPECT_EQ(event_conf(**kq).kqueue_events, 32u);
#else
  EXPECT_NE(error_of("events {\n use kqueue;\n}").find("invalid event type \"kqueue\""),
            std::string::npos);
#endif
}

TEST_F(LoaderTest, Duplicates) {
  EXPECT_EQ(error_of("events {\n worker_connections 1;\n worker_connections 2;\n}"),
            "\"worker_connections\" directive is duplicate in conf/vigil.conf:3");
  EXPECT_EQ(error_of("daemon on;\nevents {}\ndaemon on;\n"),
            "\"daemon\" directive is duplicate in conf/vigil.conf:3");
  EXPECT_EQ(error_of("events {}\nevents {}\n"),
            "\"events\" directive is duplicate in conf/vigil.conf:2");
}

TEST_F(LoaderTest, BlockShapeErrors) {
  EXPECT_EQ(error_of("events {\n worker_connections 10 {\n }\n}"),
            "directive \"worker_connections\" is not terminated by \";\" in conf/vigil.conf:2");
  EXPECT_EQ(error_of("events;"), "directive \"events\" has no opening \"{\" in conf/vigil.conf:1");
  EXPECT_EQ(error_of("events {\n worker_connections 10;\n"),
            "unexpected end of file, expecting \"}\" in conf/vigil.conf:3");
  EXPECT_EQ(error_of("events {}\ndaemon off"),
            "unexpected end of file, expecting \";\" or \"}\" in conf/vigil.conf:2");
  EXPECT_EQ(error_of("events {}\n}\n"), "unexpected \"}\" in conf/vigil.conf:2");
  EXPECT_EQ(error_of("events {}\n{\n"), "unexpected \"{\" in conf/vigil.conf:2");
  EXPECT_EQ(error_of("events { use \"epoll; }\n"),
            "unterminated double quoted string in conf/vigil.conf:1");
}

TEST_F(LoaderTest, EventsSectionRequired) {
  EXPECT_EQ(error_of(""), "no \"events\" section in configuration");
  EXPECT_EQ(error_of("daemon off;\n"), "no \"events\" section in configuration");
}

TEST_F(LoaderTest, FirstErrorInFileOrderWins) {
  // The unknown directive on line 1 is reported, not the syntax error after it.
  EXPECT_EQ(error_of("foo;\nevents {\n"), "unknown directive \"foo\" in conf/vigil.conf:1");
}

TEST_F(LoaderTest, MissingFiles) {
  ConfLoadOptions o = options();
  EXPECT_EQ(error_of(o), "open() \"conf/vigil.conf\" failed (2: No such file or directory)");
  o.conf_path = "missing.conf";
  EXPECT_EQ(error_of(o), "open() \"missing.conf\" failed (2: No such file or directory)");
  // -c never falls back to the embedded text.
  o.allow_embedded = true;
  o.embedded_text = "events {}";
  EXPECT_EQ(error_of(o), "open() \"missing.conf\" failed (2: No such file or directory)");
  // A directory is not a configuration.
  std::filesystem::create_directories("adir");
  o.conf_path = "adir";
  EXPECT_EQ(error_of(o), "read() \"adir\" failed (21: Is a directory)");
}

TEST_F(LoaderTest, ExtraDirectivesFromCommandLine) {
  auto r = load("events {}\n", "daemon off; worker_processes 2;");
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_FALSE((*r)->core().daemon);
  EXPECT_EQ((*r)->core().worker_processes, 2);
  EXPECT_EQ((*r)->sources().size(), 1u);  // -g is not a file

  // Both in -g and in the file: the file's occurrence is the duplicate.
  EXPECT_EQ(error_of("events {}\ndaemon on;\n", "daemon off;"),
            "\"daemon\" directive is duplicate in conf/vigil.conf:2");
  EXPECT_EQ(error_of("events {}\n", "daemon off; daemon on;"),
            "\"daemon\" directive is duplicate in command line");
  EXPECT_EQ(error_of("events {}\n", "bogus 1;"), "unknown directive \"bogus\" in command line");
  EXPECT_EQ(error_of("events {}\n", "worker_connections 1;"),
            "\"worker_connections\" directive is not allowed here in command line");
  EXPECT_EQ(error_of("events {}\n", "daemon off"),
            "unexpected end of parameter, expecting \";\" in command line");
  EXPECT_EQ(error_of("\n", "events { }"),
            "block directives are not supported in -g option in command line");
  EXPECT_EQ(error_of("events {}\n", "daemon maybe;"),
            "invalid value \"maybe\" in \"daemon\" directive, it must be \"on\" or \"off\" in "
            "command line");
}

TEST_F(LoaderTest, EmbeddedWhenDefaultFileMissing) {
  ConfLoadOptions o;
  o.modules = &server_conf_modules();
  o.embedded_text = "daemon off;\nevents {\n worker_connections 77;\n}\n";
  auto r = Configuration::load(o);
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_TRUE((*r)->used_embedded());
  EXPECT_EQ((*r)->main_path(), "conf/vigil.conf (embedded)");
  EXPECT_EQ(event_conf(**r).connections, 77u);
  EXPECT_FALSE((*r)->core().daemon);
  ASSERT_EQ((*r)->sources().size(), 1u);
  EXPECT_EQ((*r)->sources()[0].path, "conf/vigil.conf (embedded)");
  EXPECT_EQ((*r)->sources()[0].text, o.embedded_text);
  EXPECT_EQ((*r)->env().conf_prefix, "conf/");

  o.embedded_text = "events {}\nnope;\n";
  EXPECT_EQ(error_of(o), "unknown directive \"nope\" in conf/vigil.conf (embedded):2");

  // The file wins when it exists.
  write("conf/vigil.conf", "events { worker_connections 5; }");
  r = Configuration::load(o);
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_FALSE((*r)->used_embedded());
  EXPECT_EQ(event_conf(**r).connections, 5u);
}

TEST_F(LoaderTest, RealEmbeddedConfigurationLoads) {
  ConfLoadOptions o = server_load_options();  // the compiled-in conf/vigil.conf
  auto r = Configuration::load(o);
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_TRUE((*r)->used_embedded());
  EXPECT_EQ((*r)->sources()[0].text, kEmbeddedConf);
  // The values conf/vigil.conf sets today.
  EXPECT_FALSE((*r)->core().daemon);
  EXPECT_FALSE((*r)->core().master_process);
  EXPECT_EQ((*r)->core().error_log, "stderr");
  EXPECT_EQ((*r)->core().error_log_level, LogLevel::kNotice);
  EXPECT_EQ(event_conf(**r).connections, 1024u);
}

TEST_F(LoaderTest, DumpForDashT) {
  auto r = load("events {}  # no newline at end");
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ((*r)->dump(),
            "# configuration file conf/vigil.conf:\nevents {}  # no newline at end\n");
  std::vector<ConfSource> two{{"a.conf", "x;\n"}, {"b.conf", "y;"}};
  EXPECT_EQ(dump_conf_sources(two),
            "# configuration file a.conf:\nx;\n\n# configuration file b.conf:\ny;\n");
}

TEST_F(LoaderTest, TypedAccess) {
  auto r = load("events { worker_connections 9; }");
  ASSERT_TRUE(r) << r.status().message();
  const Configuration& c = **r;
  EXPECT_EQ(&c.get<EventConf>(event_module()), &event_conf(c));
  EXPECT_EQ(c.find<EventConf>(event_module())->connections, 9u);
  EXPECT_EQ(c.find<CoreConf>(event_module()), nullptr);      // wrong type
  EXPECT_EQ(c.find<EventConf>(event_module(), 1), nullptr);  // no such spec
  Module stranger("stranger");
  EXPECT_EQ(c.find<EventConf>(stranger), nullptr);  // not in the registry
  // The scope tree: main with one events child.
  ASSERT_EQ(c.main_scope().children().size(), 1u);
  EXPECT_EQ(c.main_scope().children()[0]->context(), kEventsConf);
  EXPECT_EQ(c.main_scope().children()[0]->where(), " in conf/vigil.conf:1");
}

}  // namespace
}  // namespace vigil
