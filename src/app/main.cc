// vigil's command line, in nginx's shape:
//   vigil [-?hvVtTq] [-s signal] [-p prefix] [-e filename] [-c filename] [-g directives]
#include <signal.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "core/conf/loader.h"
#include "core/conf/scope.h"
#include "core/core_module.h"
#include "core/process/pidfile.h"
#include "core/process/signals.h"
#include "server/build_info.h"
#include "server/conf_check.h"
#include "server/modules.h"
#include "server/runtime.h"
#include "server/upgrade.h"
#include "vigil/core/log.h"
#include "vigil/version.h"

namespace {

struct Options {
  bool help = false, version = false, version_full = false;
  bool test = false, dump = false, quiet = false;
  std::string signal, prefix, conf, directives, error_log;
};

void usage() {
  std::fputs(
      "Usage: vigil [-?hvVtTq] [-s signal] [-p prefix] [-e filename] [-c filename] [-g directives]\n\n"
      "Options:\n"
      "  -?,-h         : this help\n"
      "  -v            : show version and exit\n"
      "  -V            : show version and build options and exit\n"
      "  -t            : test configuration and exit\n"
      "  -T            : test configuration, dump it and exit\n"
      "  -q            : suppress non-error messages during configuration testing\n"
      "  -s signal     : send signal to a master process: stop, quit, reopen, reload,\n"
      "                  upgrade\n"
      "  -p prefix     : set prefix path (default: the current directory)\n"
      "  -e filename   : set error log file for start-up and the default error_log\n"
      "                  (default: logs/error.log; \"stderr\" for the terminal)\n"
      "  -c filename   : set configuration file (default: conf/vigil.conf, else the\n"
      "                  configuration compiled into the binary)\n"
      "  -g directives : set global directives out of configuration file\n",
      stderr);
}

// Returns false (after printing why) on a bad command line.
bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const char* p = argv[i];
    if (*p++ != '-') {
      std::fprintf(stderr, "vigil: invalid option: \"%s\"\n", argv[i]);
      return false;
    }
    while (*p) {
      char opt = *p++;
      std::string* value = nullptr;
      switch (opt) {
        case '?':
        case 'h': o.help = true; continue;
        case 'v': o.version = true; continue;
        case 'V': o.version = o.version_full = true; continue;
        case 't': o.test = true; continue;
        case 'T': o.test = o.dump = true; continue;
        case 'q': o.quiet = true; continue;
        case 's': value = &o.signal; break;
        case 'p': value = &o.prefix; break;
        case 'c': value = &o.conf; break;
        case 'g': value = &o.directives; break;
        case 'e': value = &o.error_log; break;
        default:
          std::fprintf(stderr, "vigil: invalid option: \"%c\"\n", opt);
          return false;
      }
      // The value is the rest of this word ("-cfile") or the next word.
      if (*p) {
        *value = p;
      } else if (i + 1 < argc) {
        *value = argv[++i];
      } else {
        std::fprintf(stderr, "vigil: option \"-%c\" requires %s\n", opt,
                     opt == 's' ? "signal name" : opt == 'p' ? "directory name"
                     : opt == 'c' || opt == 'e' ? "file name" : "parameter");
        return false;
      }
      break;
    }
  }
  if (!o.signal.empty() && vigil::signals::from_command(o.signal.c_str()) == 0) {
    std::fprintf(stderr, "vigil: invalid option: \"-s %s\"\n", o.signal.c_str());
    return false;
  }
  return true;
}

void show_version(bool full) {
  if (full) {
    std::fputs(vigil::build_description(vigil::server_conf_modules()).c_str(), stderr);
    return;
  }
  std::fprintf(stderr, "vigil version: vigil/%s\nnginx version: nginx/%s\n", VIGIL_VERSION_STRING,
               vigil::kNginxCompatibleVersion);
}

// -e: while the configuration is read, an error goes to this file as well as
// to the terminal, as nginx's does (nginx's -e; "stderr" is the terminal alone).
class StartupLog {
 public:
  explicit StartupLog(const Options& o) {
    if (o.error_log.empty() || o.error_log == "stderr") return;
    const std::string path = vigil::join_conf_path(o.prefix, o.error_log);
    if (vigil::Status s = log_.open(path, vigil::LogLevel::kNotice); !s) {
      std::fprintf(stderr, "vigil: [alert] could not open error log file: %s\n",
                   s.to_string().c_str());
      return;
    }
    open_ = true;
  }
  void emerg(const std::string& message) {
    std::fprintf(stderr, "vigil: [emerg] %s\n", message.c_str());
    if (open_) log_.write(vigil::LogLevel::kEmerg, 0, "%s", message.c_str());
  }

 private:
  vigil::Log log_;
  bool open_ = false;
};

}  // namespace

int main(int argc, char** argv) {
  using namespace vigil;
  set_command_line(argc, argv);  // for a binary upgrade (USR2)
  Options o;
  if (!parse(argc, argv, o)) return 1;
  if (o.version) show_version(o.version_full);
  if (o.help) usage();
  if (o.version || o.help) return 0;

  ConfLoadOptions lo = server_load_options();
  lo.prefix = o.prefix;
  lo.conf_path = o.conf;
  lo.extra_directives = o.directives;
  lo.error_log = o.error_log;
  StartupLog startup(o);
  auto conf = Configuration::load(lo);
  if (!conf) {
    startup.emerg(conf.status().message());
    if (o.test) {
      // The path as the loader joined it (nginx's message names it so).
      const std::string path =
          join_conf_path(o.prefix, o.conf.empty() ? "conf/vigil.conf" : o.conf);
      std::fprintf(stderr, "vigil: configuration file %s test failed\n", path.c_str());
    }
    return 1;
  }
  std::unique_ptr<Configuration> owned = std::move(conf).value();
  const Configuration& c = *owned;

  if (o.test) {
    if (!o.quiet) {
      std::fprintf(stderr, "vigil: the configuration file %s syntax is ok\n", c.main_path().c_str());
    }
    // What a worker would refuse at start, found now rather than in its log.
    const ConfCheck check = check_configuration(c);
    for (const std::string& w : check.warnings) std::fprintf(stderr, "vigil: [warn] %s\n", w.c_str());
    for (const std::string& e : check.errors) startup.emerg(e);
    if (!check.errors.empty()) {
      std::fprintf(stderr, "vigil: configuration file %s test failed\n", c.main_path().c_str());
      return 1;
    }
    if (!o.quiet) {
      std::fprintf(stderr, "vigil: configuration file %s test is successful\n", c.main_path().c_str());
    }
    if (o.dump) std::fputs(c.dump().c_str(), stdout);
    return 0;
  }

  if (!o.signal.empty()) {
    auto pid = read_pid_file(c.core().pid_path);
    if (!pid) {
      std::fprintf(stderr, "vigil: [error] %s\n", pid.status().to_string().c_str());
      return 1;
    }
    if (::kill(pid.value(), signals::from_command(o.signal.c_str())) == -1) {
      std::fprintf(stderr, "vigil: [alert] kill(%d, %s) failed (%d: %s)\n", pid.value(),
                   o.signal.c_str(), errno, std::strerror(errno));
      return 1;
    }
    return 0;
  }

  Log& log = Log::global();
  if (Status s = open_error_logs(log, c.core()); !s) {
    startup.emerg(s.to_string());
    return 1;
  }
  if (c.used_embedded()) {
    VIGIL_LOG(log, kNotice, 0, "using the embedded default configuration");
  }
  for (const std::string& w : c.warnings()) VIGIL_LOG(log, kWarn, 0, "%s", w.c_str());
  return run_server(std::move(owned), lo, log);
}
