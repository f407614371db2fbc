#pragma once
// allow / deny in stream (nginx's ngx_stream_access_module): the rules
// (core/access_rule.h) of the server, or of the stream block when the server
// has none of its own, checked in order once the session is accepted, before
// TLS and proxying; the first that matches decides.

#include <vector>

#include "core/access_rule.h"
#include "core/conf/module.h"
#include "vigil/core/result.h"

namespace vigil::stream {

struct Session;

// "allow address | CIDR | unix: | all" and "deny ...": one rule more.
Status set_access_rule(const DirectiveCall& call, std::vector<AccessRule>& rules);

// Whether the session's rules let its client in; a denied one is logged
// ("access forbidden by rule", at [error], as nginx).
bool access_allows(Session& s);

}  // namespace vigil::stream
