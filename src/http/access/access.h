#pragma once
// The access module (nginx's ngx_http_access_module): allow / deny rules by
// client address, checked in order, the first match deciding (access.cc).

#include <vector>

#include "core/access_rule.h"

namespace vigil::http {

struct Request;

// The rules themselves are shared with stream (core/access_rule.h).
using ::vigil::AccessRule;
using ::vigil::any_rule_matches;
using ::vigil::parse_access_rule;

// The module's conf at each level: its rules in order. A level with no
// allow or deny of its own inherits its parent's whole list (nginx's rule).
struct AccessConf {
  std::vector<AccessRule> rules;
  // satisfy any: the client passes the access phase when allow/deny or
  // auth_basic lets it in (nginx keeps this in its core location conf).
  bool satisfy_any = false;
};

class HttpModule;
const HttpModule& access_module();

// The allow/deny rules of r.loc: 0 when a rule allows the client, 403 when
// one denies it (logged "access forbidden by rule" when `log`), and
// kPhaseDeclined (phases.h) when there are no rules or none matches.
int access_phase(Request& r, bool log);

class PhaseEngine;
// allow/deny's access phase handler.
void add_access_phase(PhaseEngine& engine);

}  // namespace vigil::http
