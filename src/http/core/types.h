#pragma once
// The extension -> media type map (nginx's "types { }" and default_type).
// Built at load time, read-only afterwards; lookups compare the extension
// case-insensitively without allocating.

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace vigil::http {

class TypesMap {
 public:
  // Later entries for the same extension win, as nginx warns and overrides.
  void add(std::string_view extension, std::string_view type);
  // Sorts the entries; call once after the last add().
  void finish();

  // The type for `extension` (case-insensitive), or "" when unknown.
  std::string_view find(std::string_view extension) const;
  std::size_t size() const { return entries_.size(); }

  // The map used when a configuration has no "types" block: the common web
  // types, a small subset of conf/mime.types.
  static const TypesMap& builtin();

 private:
  std::vector<std::pair<std::string, std::string>> entries_;  // lower-case extension, type
};

}  // namespace vigil::http
