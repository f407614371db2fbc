#pragma once
// Loading the configuration: the API the vigil program uses.
//
//   ConfLoadOptions opts;
//   opts.prefix = "/opt/vigil";           // -p  ("" = current directory)
//   opts.conf_path = "conf/test.conf";     // -c  ("" = default, see below)
//   opts.extra_directives = "daemon off;"; // -g
//   auto conf = Configuration::load(opts);
//   if (!conf) {  // print it as nginx does: "vigil: [emerg] <message>"
//     std::fprintf(stderr, "vigil: [emerg] %s\n", conf.status().message().c_str());
//     return 1;
//   }
//   const CoreConf& core = (*conf)->core();    // core_module.h
//   const X& x = (*conf)->get<X>(x_module());  // any module's conf
//   if (dump) std::fputs((*conf)->dump().c_str(), stdout);  // -T
//
// Resolution (nginx's rules):
//   - prefix "" means the current directory: relative paths stay as written,
//     so messages print "conf/vigil.conf", not an absolute path;
//   - conf_path relative -> against prefix; "" -> <prefix>/conf/vigil.conf,
//     and when that file does not exist (and allow_embedded, and there is an
//     embedded_text), the embedded text is parsed instead, named
//     "conf/vigil.conf (embedded)" (the server layer compiles conf/vigil.conf
//     in: server_load_options() in server/modules.h);
//   - include patterns resolve against the main file's directory (nginx's conf
//     prefix); for the embedded text, <prefix>/conf/, falling back to the
//     compiled-in copy of a file it includes (embedded_includes);
//   - pid and error_log paths resolve against prefix (CoreConf holds them resolved).
//   - -g text is parsed in the main context before the file, like nginx, so a
//     directive in both is '"x" directive is duplicate in <file>:<line>'; an
//     error inside the -g text ends with " in command line".
//
// Errors: load() stops at the first error. status().message() is the whole
// text to print (location and errno text included); status().err() is 0.

#include <memory>
#include <string>
#include <string_view>
#include <typeinfo>
#include <utility>
#include <vector>

#include "core/conf/module.h"
#include "core/conf/parser.h"
#include "core/conf/scope.h"
#include "core/error_logs.h"
#include "core/shm_zone.h"
#include "vigil/core/result.h"

namespace vigil {

struct CoreConf;  // core/core_module.h

struct ConfLoadOptions {
  std::string prefix;     // -p; "" = current directory
  std::string conf_path;  // -c; "" = <prefix>/conf/vigil.conf or the embedded text
  // The default configuration's text, used when conf_path is "" and
  // <prefix>/conf/vigil.conf does not exist; empty: no fallback.
  std::string_view embedded_text;
  bool allow_embedded = true;    // false: a missing default file is an open() error
  // Files the embedded text includes, compiled in too: while the embedded
  // configuration is in use, "include NAME" of a file missing under the
  // prefix parses this text instead ("conf/NAME (embedded)"), so the default
  // configuration runs under any prefix. A file that exists always wins.
  std::vector<std::pair<std::string, std::string_view>> embedded_includes;
  std::string extra_directives;  // -g "directive ...; ..."
  // -e: the error log while the configuration is read, and the main
  // error_log when the configuration names none ("" = logs/error.log).
  std::string error_log;
  // Modules to load with, in order; null = core_module() alone. Must outlive
  // the Configuration. The server's list is server_conf_modules().
  const ModuleRegistry* modules = nullptr;
  bool allow_include = true;  // the fuzz target turns file access off
  ConfParserLimits limits;
};

class Configuration {
 public:
  static Result<std::unique_ptr<Configuration>> load(const ConfLoadOptions& options);

  Configuration(const Configuration&) = delete;
  Configuration& operator=(const Configuration&) = delete;

  // Main-context settings, defaults filled and paths resolved.
  const CoreConf& core() const;

  // The conf `module` keeps for its spec `spec` (0 = the first add_conf) in
  // the first scope holding it, searching the main scope, then its blocks
  // breadth-first. find() returns null when there is none or C is not the
  // spec's type; get() treats that as a programming error and aborts.
  template <class C>
  const C* find(const Module& module, int spec = 0) const {
    return static_cast<const C*>(find_conf(module, spec, typeid(C)));
  }
  template <class C>
  const C& get(const Module& module, int spec = 0) const {
    return *static_cast<const C*>(get_conf(module, spec, typeid(C)));
  }

  // The scope tree, for modules that walk their blocks (a protocol's servers, ...).
  const ConfScope& main_scope() const { return *main_; }
  const ModuleRegistry& modules() const { return *modules_; }
  const ConfEnv& env() const { return env_; }
  // The shared zones the directives registered (core/shm_zone.h). Mapped by
  // the runtime (server/cycle.cc) before it forks workers; the mappings live
  // as long as this Configuration (and any later one that reuses them).
  SharedZones& zones() { return *zones_; }
  const SharedZones& zones() const { return *zones_; }
  // The error logs of the levels below main (core/error_logs.h), open once
  // the load succeeded; reopened on USR1 by the master and every worker.
  ErrorLogs& error_logs() { return *error_logs_; }
  const ErrorLogs& error_logs() const { return *error_logs_; }

  // Every file read, in the order first opened (each once), for -T. -g text
  // is not a file and is not listed, as in nginx.
  const std::vector<ConfSource>& sources() const { return sources_; }
  bool used_embedded() const { return used_embedded_; }
  // What the load noticed but accepted, each ending in " in F:L".
  const std::vector<std::string>& warnings() const { return warnings_; }
  // The main file as resolved: "conf/vigil.conf", or
  // "conf/vigil.conf (embedded)" when the embedded text was used.
  const std::string& main_path() const { return main_path_; }

  // nginx -T's output: for each source "# configuration file PATH:\n", the
  // text, and a newline.
  std::string dump() const;

 private:
  Configuration() = default;
  const void* find_conf(const Module& module, int spec, const std::type_info& type) const;
  const void* get_conf(const Module& module, int spec, const std::type_info& type) const;

  // Declared before main_: the confs may keep ShmZone pointers, so the zones
  // are destroyed after them.
  std::unique_ptr<SharedZones> zones_ = std::make_unique<SharedZones>();
  // Before main_ too: the confs keep Log pointers into it.
  std::unique_ptr<ErrorLogs> error_logs_ = std::make_unique<ErrorLogs>();
  std::vector<std::string> warnings_;
  std::unique_ptr<ConfScope> main_;
  const ModuleRegistry* modules_ = nullptr;
  ConfEnv env_;
  std::vector<ConfSource> sources_;
  bool used_embedded_ = false;
  std::string main_path_;
};

std::string dump_conf_sources(const std::vector<ConfSource>& sources);

}  // namespace vigil
