#include "core/conf/module.h"

#include <cassert>

namespace vigil {

std::vector<std::string> DirectiveCall::args() const {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < arg_count(); ++i) out.push_back(arg(i));
  return out;
}

Status DirectiveCall::error(std::string_view message) const {
  return Status::error(std::string(message) + where());
}

Status DirectiveCall::invalid_value(std::size_t i, std::string_view detail) const {
  return Status::error("invalid value \"" + arg(i) + "\" in \"" + name() + "\" directive" +
                       std::string(detail) + where());
}

DirectiveBody DirectiveBody::handler(std::function<Status(const DirectiveCall&)> fn) {
  DirectiveBody b;
  b.set = [fn = std::move(fn)](const DirectiveCall& call, void*) { return fn(call); };
  return b;
}

Directive& Module::add(std::string name, ConfContextMask contexts, Arity arity,
                       DirectiveBody body) {
  // A body made from another module's ConfSlot would write the wrong struct.
  assert(body.spec < static_cast<int>(confs_.size()));
  assert(body.spec < 0 || body.conf_type == confs_[static_cast<std::size_t>(body.spec)].type);
  Directive d;
  d.name = std::move(name);
  d.contexts = contexts;
  d.arity = arity;
  d.body = std::move(body);
  directives_.push_back(std::move(d));
  return directives_.back();
}

Directive& Module::add_block(std::string name, ConfContextMask contexts, Arity arity,
                             ConfContextMask opens, DirectiveBody body) {
  Directive& d = add(std::move(name), contexts, arity, std::move(body));
  d.block = true;
  d.opens = opens;
  return d;
}

std::size_t ModuleRegistry::index_of(const Module& module) const {
  for (std::size_t i = 0; i < modules_.size(); ++i) {
    if (modules_[i] == &module) return i;
  }
  return npos;
}

}  // namespace vigil
