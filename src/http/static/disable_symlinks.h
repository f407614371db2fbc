#pragma once
// disable_symlinks: opening a static file under the location's symlink rule
// (see disable_symlinks.cc), a module with its own conf at every http level.

#include <cstdint>
#include <string>

namespace vigil::http {

class HttpModule;
struct Request;
struct HttpLocConf;

// disable_symlinks off | on | if_not_owner
enum class DisableSymlinks : std::uint8_t { kOff, kOn, kIfNotOwner };

// The module's conf; a level that does not set disable_symlinks inherits
// its parent's mode and from= together.
struct DisableSymlinksConf {
  DisableSymlinks mode = DisableSymlinks::kOff;
  std::string from;  // "from=" part, resolved ("": the whole path is checked)
};

const HttpModule& disable_symlinks_module();
// The rule of a location (or of a server's level).
const DisableSymlinksConf& disable_symlinks_conf(const HttpLocConf& loc);

// open(2) of `name` (absolute) with `flags`, refusing symbolic links as the
// location's disable_symlinks says; -1 with errno (ELOOP for a refused link).
// from=$document_root is the document root of `r` (null: the location's
// root without variables evaluated).
int open_file_checked(const Request* r, const HttpLocConf& loc, const char* name, int flags);

}  // namespace vigil::http
