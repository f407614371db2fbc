#pragma once
// One configuration generation as the runtime runs it (nginx's ngx_cycle_t,
// reduced to what the process model needs): the configuration and the
// listening sockets opened for it. The master keeps one and replaces it on
// reload; each worker runs on the one it was forked with.

#include <memory>

#include "core/conf/loader.h"
#include "server/listeners.h"
#include "vigil/core/result.h"

namespace vigil {

class Log;

struct Cycle {
  // Declared first, destroyed last: the listeners point into it.
  std::unique_ptr<Configuration> conf;
  ListenerSet listeners;
  unsigned generation = 0;
  int workers = 1;  // worker processes it runs; 1 without a master
  bool master = false;
};

// bind() attempts when opening sockets, 500 ms apart (nginx tries 5 times).
inline constexpr int kBindTries = 5;

// Builds a cycle from `conf`: asks the protocols for their listeners and opens
// them, taking over the sockets of `previous` that are still wanted (reload),
// or at start those of `inherited` (binary upgrade, socket activation).
Result<std::unique_ptr<Cycle>> make_cycle(std::unique_ptr<Configuration> conf, Cycle* previous,
                                          Log& log, ListenerSet* inherited = nullptr);

}  // namespace vigil
