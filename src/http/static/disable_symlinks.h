#pragma once
// disable_symlinks: opening a static file under the location's symlink rule
// (see disable_symlinks.cc).

namespace vigil::http {

struct HttpLocConf;

// open(2) of `name` (absolute) with `flags`, refusing symbolic links as
// loc.disable_symlinks says; -1 with errno (ELOOP for a refused link).
int open_file_checked(const HttpLocConf& loc, const char* name, int flags);

}  // namespace vigil::http
