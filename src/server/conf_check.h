#pragma once
// What `vigil -t` checks beyond the syntax: what a worker would refuse at
// start, found before any process is started (nginx finds some of these only
// in the worker's log). Errors fail the test; warnings are printed only.
//
//   error  the event loop cannot be created as configured: `use` names a
//          method this kernel or build lacks (io_uring), select() with more
//          worker_connections than FD_SETSIZE, ...
//   warn   worker_connections above the open-file limit the workers will have
//   warn   "user" given while not running as root (ignored, as nginx says)
//   warn   an http `root` the worker user cannot read (checked as that user)

#include <string>
#include <vector>

namespace vigil {

class Configuration;

struct ConfCheck {
  std::vector<std::string> errors;
  std::vector<std::string> warnings;
};

ConfCheck check_configuration(const Configuration& conf);

}  // namespace vigil
