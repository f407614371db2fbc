#pragma once
// A ConfScope is one instance of a context while loading: the main context,
// and each block a module opens inside it (a "server", a "location", ...). It holds the confs modules keep at that level and remembers which
// directives were set in it (and where), which is how duplicates are caught,
// defaults filled and values inherited without "unset" sentinel values in the
// typed conf structs.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "vigil/core/result.h"

namespace vigil {

class SharedZones;  // core/shm_zone.h
class ErrorLogs;    // core/error_logs.h

// Bitmask of contexts, nginx's NGX_*_CONF. Core names only the main context;
// each layer that opens blocks claims its own bits next to its module, and the
// server's module registry is where they meet, so two layers must not claim
// the same bit: the registry's test checks that.
using ConfContextMask = std::uint32_t;
inline constexpr ConfContextMask kMainConf = 1u << 0;
inline constexpr ConfContextMask kAnyConf = ~0u;

// "prefix" + "/" + "path" unless path is absolute or prefix is empty (the
// current directory: the path is then printed exactly as written).
std::string join_conf_path(std::string_view prefix, std::string_view path);

class ModuleRegistry;  // core/conf/module.h

// What handlers and init functions may need to know about the load.
struct ConfEnv {
  std::string prefix;       // -p, "" for the current directory
  std::string conf_prefix;  // directory of the main configuration file, "" or ending in '/'
  bool allow_include = true;
  std::string default_error_log;  // -e, "" = logs/error.log
  // Set while the embedded configuration is in use: compiled-in copies of
  // the files it includes (ConfLoadOptions::embedded_includes).
  std::vector<std::pair<std::string, std::string_view>> embedded_includes;
  // The load's shared zone registry (owned by the Configuration): directive
  // handlers register the zones they need here. Never null during a load.
  SharedZones* zones = nullptr;
  // The error logs below main (core/error_logs.h), owned by the Configuration.
  ErrorLogs* error_logs = nullptr;
  // Warnings of the load (owned by the Configuration): printed at -t and at
  // start, they do not fail it. Never null during a load.
  std::vector<std::string>* warnings = nullptr;
  // The modules of the load: an init may look up another module's index
  // (modules->index_of) to read that module's confs in a scope.
  const ModuleRegistry* modules = nullptr;

  // Relative paths in directives (pid, error_log) are relative to the prefix;
  // include patterns are relative to the configuration's directory, as in nginx.
  std::string prefixed(std::string_view path) const { return join_conf_path(prefix, path); }
  std::string conf_prefixed(std::string_view path) const {
    return join_conf_path(conf_prefix, path);
  }
};

class ConfScope {
 public:
  struct SetRecord {
    std::string where;  // " in F:L" or " in command line"
  };

  ConfScope(ConfContextMask context, ConfScope* parent, std::string where,
            std::vector<std::string> args)
      : context_(context), parent_(parent), where_(std::move(where)), args_(std::move(args)) {}
  ConfScope(const ConfScope&) = delete;
  ConfScope& operator=(const ConfScope&) = delete;

  ConfContextMask context() const { return context_; }
  const ConfScope* parent() const { return parent_; }
  ConfScope* parent() { return parent_; }
  // " in F:L" of the block directive that opened this scope ("" for main).
  const std::string& where() const { return where_; }
  // The arguments of that block directive ("location /x {" gives {"/x"}).
  const std::vector<std::string>& args() const { return args_; }
  const std::vector<std::unique_ptr<ConfScope>>& children() const { return children_; }
  ConfScope& add_child(ConfContextMask context, std::string where, std::vector<std::string> args);

  // The conf module `module` (registry index) keeps at this level for its
  // conf spec `spec`, or null when it keeps none here.
  void* conf(std::size_t module, int spec) const;
  void set_conf(std::size_t module, int spec, std::shared_ptr<void> conf);
  // Nearest scope, this one or an ancestor, that holds (module, spec).
  ConfScope* owner_of(std::size_t module, int spec);

  const SetRecord* find_set(std::string_view directive) const;
  void mark_set(std::string_view directive, SetRecord record);

 private:
  ConfContextMask context_;
  ConfScope* parent_;
  std::string where_;
  std::vector<std::string> args_;
  std::vector<std::unique_ptr<ConfScope>> children_;
  std::map<std::pair<std::size_t, int>, std::shared_ptr<void>> confs_;
  std::map<std::string, SetRecord, std::less<>> set_;
};

// What a module's init_conf and merge_conf see: the scope being finished and
// the facts about which of the module's directives were set in it.
class ConfInit {
 public:
  ConfInit(const ConfEnv& env, const ConfScope& scope, std::size_t module = 0)
      : env_(env), scope_(scope), module_(module) {}

  const ConfEnv& env() const { return env_; }
  const ConfScope& scope() const { return scope_; }
  // The registry index of the module whose conf is being finished, so an init
  // can read the module's confs in other scopes (scope.conf(module(), spec)):
  // how a protocol builds its server tables once the whole block is merged.
  std::size_t module() const { return module_; }
  bool is_set(std::string_view directive) const { return scope_.find_set(directive) != nullptr; }
  // " in F:L" where `directive` was set in this scope, or "".
  std::string where(std::string_view directive) const {
    const auto* rec = scope_.find_set(directive);
    return rec ? rec->where : std::string();
  }
  // `message` located at `directive` when it was set (init-time validation).
  Status error(std::string_view directive, std::string_view message) const {
    return Status::error(std::string(message) + where(directive));
  }

 private:
  const ConfEnv& env_;
  const ConfScope& scope_;
  std::size_t module_;
};

}  // namespace vigil
