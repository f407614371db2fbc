#pragma once
// An HTTP module with a configuration of its own (nginx's ngx_http_module_t
// with its loc conf): its directives and conf specs are an ordinary
// configuration Module, registered after "http" (http_modules() lists them;
// the server layer registers each), and a location reaches the module's conf
// through loc_conf<T>(loc, module), as nginx's ngx_http_get_module_loc_conf.
// Each module also has a per-request context slot (Request::ctx[index()]).
//
// docs/modules.md shows how a module declares its conf and directives and
// reads them at request time (http/access/access.cc is the one it follows);
// http/empty_gif/ is a whole module, built and tested.

#include <cstdint>
#include <functional>
#include <span>

#include "core/conf/module.h"
#include "http/core/conf.h"
#include "http/core/variables.h"

namespace vigil::http {

// Modules with a per-request context slot; Request::ctx has this many.
inline constexpr std::uint32_t kMaxHttpModules = 32;

class HttpModule {
 public:
  explicit HttpModule(std::string name);
  HttpModule(const HttpModule&) = delete;
  HttpModule& operator=(const HttpModule&) = delete;

  // Declares the module's conf kept at every http level (http, server,
  // location), merged top-down like the core's.
  template <class Conf>
  ConfSlot<Conf> add_loc_conf(std::function<Status(const ConfInit&, Conf&)> init = {},
                              std::function<Status(const ConfInit&, const Conf&, Conf&)> merge = {}) {
    auto slot = conf_.add_conf<Conf>(kHttpMainConf | kHttpSrvConf | kHttpLocConf, std::move(init),
                                     std::move(merge));
    loc_spec_ = slot.index();
    return slot;
  }

  Module& conf() { return conf_; }
  const Module& conf() const { return conf_; }
  // The variables the module provides (variables.h), found by name when a
  // configuration string is compiled.
  void set_variables(std::span<const VarSpec> vars) { variables_ = vars; }
  std::span<const VarSpec> variables() const { return variables_; }
  int loc_spec() const { return loc_spec_; }
  // The module's slot in HttpLocConf::module_confs and Request::ctx.
  std::uint32_t index() const { return index_; }

 private:
  Module conf_;
  int loc_spec_ = -1;
  std::uint32_t index_;
  std::span<const VarSpec> variables_;
};

// Every HTTP module with a conf of its own, in registration order (modules.cc).
std::span<const HttpModule* const> http_modules();

// The module's conf for a location (or a server's level); the module must
// have declared add_loc_conf<Conf>.
template <class Conf>
const Conf& loc_conf(const HttpLocConf& loc, const HttpModule& module) {
  return *static_cast<const Conf*>(loc.module_confs[module.index()]);
}

// Fills loc.module_confs from the scope the loc conf was made for (conf.cc,
// when the http block is finished).
Status bind_module_confs(const ConfEnv& env, const ConfScope& scope, HttpLocConf& loc);

}  // namespace vigil::http
