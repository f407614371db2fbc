#pragma once
// try_files file ... uri | =code (nginx's try files phase of
// ngx_http_core_module): see try_files.cc.

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
  int code = 0;          // "=code": the status when nothing matched
};

// Runs the try_files of r.loc, and of every location an internal redirect
// leads to. Returns 0 when r.loc's handler is to serve r.uri (changed to the
// file found, or to the redirect's URI with its arguments), or the status
// to answer (the "=code", or 500 for a redirect loop or no memory).
class PhaseEngine;
// try_files' phase handler: the first file that exists becomes $uri, else
// "=code" or an internal redirect to the last argument.
void add_try_files_phase(PhaseEngine& engine);

}  // namespace vigil::http
