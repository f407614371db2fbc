// HTTP modules with confs of their own (module.h).
#include "http/core/module.h"

#include <cstdio>
#include <cstdlib>

namespace vigil::http {
namespace {

std::uint32_t next_index() {
  static std::uint32_t next = 0;
  if (next == kMaxHttpModules) {
    // A build with more modules than slots: raise kMaxHttpModules.
    std::fputs("vigil: too many HTTP modules for kMaxHttpModules\n", stderr);
    std::abort();
  }
  return next++;
}

}  // namespace

HttpModule::HttpModule(std::string name) : conf_(std::move(name)), index_(next_index()) {}

Status bind_module_confs(const ConfEnv& env, const ConfScope& scope, HttpLocConf& loc) {
  loc.module_confs.assign(kMaxHttpModules, nullptr);
  if (env.modules == nullptr) return Status::ok();
  for (const HttpModule* m : http_modules()) {
    if (m->loc_spec() < 0) continue;
    const std::size_t at = env.modules->index_of(m->conf());
    if (at == ModuleRegistry::npos) {
      return Status::error("internal error: module \"" + m->conf().name() + "\" is not loaded");
    }
    const void* conf = scope.conf(at, m->loc_spec());
    if (conf == nullptr) return Status::error("internal error: no conf of \"" + m->conf().name() + "\"");
    loc.module_confs[m->index()] = conf;
  }
  return Status::ok();
}

}  // namespace vigil::http
