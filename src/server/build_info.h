#pragma once
// What `vigil -V` says about the build, in nginx's words as well as Vigil's:
// tools written for nginx (its own test suite, certbot's nginx plugin,
// configuration managers) read nginx's "nginx version:" and "configure
// arguments:" lines to learn which modules a binary has.

#include <string>

#include "core/conf/module.h"
#include "core/nginx_version.h"

namespace vigil {

// nginx's `configure` arguments that describe the modules `modules` holds:
// "--with-X" for a module nginx builds only on request that Vigil has,
// "--without-X" for one nginx builds by default that Vigil lacks. A module
// counts as present when the directive that names it is registered in the
// contexts nginx allows it in, so the line follows the code as modules are
// added.
std::string nginx_configure_arguments(const ModuleRegistry& modules);

// The whole -V text (nginx's lines, then Vigil's event backends), one line
// each, newline-terminated.
std::string build_description(const ModuleRegistry& modules);

}  // namespace vigil
