#include "stream/set.h"

#include <utility>

#include "stream/session.h"

namespace vigil::stream {

Status set_set(const DirectiveCall& call, std::vector<SetOp>& ops) {
  auto name = declared_variable_word(call.arg(0));
  if (!name) return call.error(name.status().message());
  SetOp op;
  op.index = declare_variable(name.value());
  auto value = VarTemplate::compile(call.arg(1));
  if (!value) return call.error(value.status().message());
  op.value = std::move(value.value());
  ops.push_back(std::move(op));
  return Status::ok();
}

bool run_sets(Session& s, const std::vector<SetOp>& ops) {
  for (const SetOp& op : ops) {
    std::string_view v;
    if (!op.value.evaluate(s, v) || !set_session_value(s, op.index, v)) return false;
  }
  return true;
}

}  // namespace vigil::stream
