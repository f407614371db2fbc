#include "server/cycle.h"

#include "core/core_module.h"

namespace vigil {

Result<std::unique_ptr<Cycle>> make_cycle(std::unique_ptr<Configuration> conf, Cycle* previous,
                                          Log& log, ListenerSet* inherited) {
  auto cycle = std::make_unique<Cycle>();
  const CoreConf& core = conf->core();
  // A reload never changes the process model (nginx ignores master_process then too).
  cycle->master = previous ? previous->master : core.master_process;
  cycle->workers = cycle->master ? core.worker_processes : 1;
  cycle->generation = previous ? previous->generation + 1 : 0;
  cycle->conf = std::move(conf);

  // Shared zones before sockets, as nginx does, and before any fork: the
  // workers inherit the mappings at the same addresses. Zones of `previous`
  // with the same name, size and tag are reused with their contents; the rest
  // of `previous`'s are unmapped (in this process) when it is destroyed.
  if (Status s = cycle->conf->zones().map(previous ? &previous->conf->zones() : nullptr); !s) {
    return s;
  }

  auto set = ListenerSet::create(*cycle->conf, cycle->workers, log);
  if (!set) return set.status();
  cycle->listeners = std::move(set).value();
  ListenerSet* from = previous != nullptr ? &previous->listeners : inherited;
  if (Status s = cycle->listeners.open(from, kBindTries, log); !s) {
    return s;
  }
  return cycle;
}

}  // namespace vigil
