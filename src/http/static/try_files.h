#pragma once
// try_files file ... uri | =code (nginx's try files phase of
// ngx_http_core_module): see try_files.cc.

#include <memory>
#include <string>
#include <vector>

#include "http/core/variables.h"

namespace vigil::http {

struct Request;

// One "file" argument: checked as root + value; a name that ended in '/'
// (the slash is dropped when compiled, as nginx) must be a directory.
struct TryFile {
  VarTemplate name;
  bool test_dir = false;
};

struct TryFiles {
  std::vector<TryFile> files;
  VarTemplate fallback;  // the last argument when it is a URI
  std::string named;     // the last argument when it is "@name"
  int code = 0;          // "=code": the status when nothing matched
};

// Runs the try_files of r.loc, and of every location an internal redirect
// leads to. Returns 0 when r.loc's handler is to serve r.uri (changed to the
// file found, or to the redirect's URI with its arguments), or the status
// to answer (the "=code", or 500 for a redirect loop or no memory).
// The module's conf at each level: its try_files, never inherited.
struct TryFilesConf {
  std::shared_ptr<const TryFiles> try_files;
};

class HttpModule;
struct HttpLocConf;
const HttpModule& try_files_module();
// The try_files of a location (or server level), or null.
const TryFiles* location_try_files(const HttpLocConf& loc);

class PhaseEngine;
// try_files' phase handler: the first file that exists becomes $uri, else
// "=code" or an internal redirect to the last argument.
void add_try_files_phase(PhaseEngine& engine);

}  // namespace vigil::http
