#include "core/conf/scope.h"

namespace vigil {

std::string join_conf_path(std::string_view prefix, std::string_view path) {
  if (prefix.empty() || (!path.empty() && path.front() == '/')) return std::string(path);
  std::string out(prefix);
  if (out.back() != '/') out += '/';
  out += path;
  return out;
}

ConfScope& ConfScope::add_child(ConfContextMask context, std::string where,
                                std::vector<std::string> args) {
  children_.push_back(
      std::make_unique<ConfScope>(context, this, std::move(where), std::move(args)));
  return *children_.back();
}

void* ConfScope::conf(std::size_t module, int spec) const {
  auto it = confs_.find({module, spec});
  return it == confs_.end() ? nullptr : it->second.get();
}

void ConfScope::set_conf(std::size_t module, int spec, std::shared_ptr<void> conf) {
  confs_[{module, spec}] = std::move(conf);
}

ConfScope* ConfScope::owner_of(std::size_t module, int spec) {
  for (ConfScope* s = this; s != nullptr; s = s->parent_) {
    if (s->conf(module, spec) != nullptr) return s;
  }
  return nullptr;
}

const ConfScope::SetRecord* ConfScope::find_set(std::string_view directive) const {
  auto it = set_.find(directive);
  return it == set_.end() ? nullptr : &it->second;
}

void ConfScope::mark_set(std::string_view directive, SetRecord record) {
  set_.emplace(std::string(directive), std::move(record));
}

}  // namespace vigil
