#pragma once
// The mail proxy's hooks for the process runtime (server/modules.h).

#include <memory>
#include <vector>

#include "core/conf/loader.h"
#include "vigil/core/result.h"
#include "vigil/event/listening.h"

namespace vigil::mail {

Status create_listeners(const Configuration& conf, std::vector<std::unique_ptr<Listening>>& out);

}  // namespace vigil::mail
