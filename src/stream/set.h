#pragma once
// set in stream (nginx's ngx_stream_set_module):
//
//   server { set $variable value; }
//
// Each session gives $variable the value (with variables) in nginx's
// pre-access phase, after realip and before limit_conn and allow / deny,
// in the order the server lists them. A variable that is also a map, geo
// or split_clients reads the set value from then on; one only `set`
// declares reads as empty where no `set` gave it a value.

#include <cstdint>
#include <vector>

#include "core/conf/module.h"
#include "stream/variables.h"

namespace vigil::stream {

struct Session;

struct SetOp {
  std::uint32_t index = 0;  // DeclaredVariable::index
  VarTemplate value;
};

Status set_set(const DirectiveCall& call, std::vector<SetOp>& ops);
// Runs the server's `set`s; false without memory (the session ends with 500).
bool run_sets(Session& s, const std::vector<SetOp>& ops);

}  // namespace vigil::stream
