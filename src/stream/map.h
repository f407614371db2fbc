#pragma once
// map in stream (nginx's ngx_stream_map_module):
//
//   map $source $variable {
//     [hostnames;] [volatile;]
//     default value;
//     key value;  ~regex value;  ~*regex value;
//   }
//
// $variable is the value of the first entry the source matches: a key
// (without regard to case), then the expressions in order, else the
// default (none: the empty string). Values may hold variables.

#include <memory>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/conf/module.h"
#include "core/regex.h"
#include "core/var_sink.h"
#include "stream/variables.h"

namespace vigil::stream {

class StreamMap final : public ComputedVariable {
 public:
  struct StringHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };

  // The value for `s` (always found: the default when nothing matches).
  bool value(const Session& s, VarSink& out) const override;

  VarTemplate source;
  struct Value {
    VarTemplate text;
  };
  std::unordered_map<std::string, Value, StringHash, std::equal_to<>> exact;  // lower-case keys
  struct RegexEntry {
    Regex re;
    Value value;
  };
  std::vector<RegexEntry> regexes;
  std::optional<Value> fallback;

 private:
  static bool put(const Session& s, const Value& v, VarSink& out);
};

// The `map` block of the stream main context (registered by stream_conf.cc).
Status set_map(const DirectiveCall& call);

}  // namespace vigil::stream
