// vigil's command line, in nginx's shape:
//   vigil [-?hvVtTq] [-s signal] [-p prefix] [-c filename] [-g directives]
#include <signal.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "core/conf/loader.h"
#include "core/core_module.h"
#include "core/process/pidfile.h"
#include "core/process/signals.h"
#include "server/conf_check.h"
#include "server/modules.h"
#include "server/runtime.h"
#include "server/upgrade.h"
#include "vigil/core/log.h"
#include "vigil/event/backend.h"
#include "vigil/version.h"

namespace {

struct Options {
  bool help = false, version = false, version_full = false;
  bool test = false, dump = false, quiet = false;
  std::string signal, prefix, conf, directives;
};

void usage() {
  std::fputs(
      "Usage: vigil [-?hvVtTq] [-s signal] [-p prefix] [-c filename] [-g directives]\n\n"
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
                     : opt == 'c' ? "file name" : "parameter");
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
  std::fprintf(stderr, "vigil version: vigil/%s\n", VIGIL_VERSION_STRING);
  if (!full) return;
#if defined(__clang__)
  std::fprintf(stderr, "built by clang %s\n", __clang_version__);
#elif defined(__GNUC__)
  std::fprintf(stderr, "built by gcc %s\n", __VERSION__);
#endif
  std::string backends;
  for (auto name : vigil::backend_names()) {
    if (!backends.empty()) backends += ", ";
    backends += name;
  }
  std::fprintf(stderr, "event backends: %s\n", backends.c_str());
}

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
  auto conf = Configuration::load(lo);
  if (!conf) {
    std::fprintf(stderr, "vigil: [emerg] %s\n", conf.status().message().c_str());
    if (o.test) {
      std::string path = o.conf.empty() ? "conf/vigil.conf" : o.conf;
      if (!o.prefix.empty() && path[0] != '/') path = o.prefix + "/" + path;
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
    for (const std::string& e : check.errors) std::fprintf(stderr, "vigil: [emerg] %s\n", e.c_str());
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
  if (Status s = log.open(c.core().error_log, c.core().error_log_level); !s) {
    std::fprintf(stderr, "vigil: [emerg] %s\n", s.to_string().c_str());
    return 1;
  }
  if (c.used_embedded()) {
    VIGIL_LOG(log, kNotice, 0, "using the embedded default configuration");
  }
  for (const std::string& w : c.warnings()) VIGIL_LOG(log, kWarn, 0, "%s", w.c_str());
  return run_server(std::move(owned), lo, log);
}
