#include "stream/split_clients.h"

#include <memory>
#include <utility>
#include <vector>

#include "core/split_clients.h"
#include "stream/session.h"
#include "stream/variables.h"

namespace vigil::stream {
namespace {

class SplitVariable final : public ComputedVariable {
 public:
  VarTemplate source;
  std::vector<SplitPart> parts;

  bool value(const Session& s, VarSink& out) const override {
    std::string_view src;
    if (!source.evaluate(s, src)) return false;
    out.put(split_value(
        parts, murmur_hash2(reinterpret_cast<const unsigned char*>(src.data()), src.size())));
    return true;
  }
};

}  // namespace

Status set_split_clients(const DirectiveCall& call) {
  auto name = declared_variable_word(call.arg(1));
  if (!name) return call.error(name.status().message());
  auto split = std::make_shared<SplitVariable>();
  auto src = VarTemplate::compile(call.arg(0));
  if (!src) return call.error(src.status().message());
  split->source = std::move(src.value());
  SplitClientsSink sink(split->parts);
  if (Status s = call.parse_block(sink); !s) return s;
  declare_variable(name.value(), std::move(split));
  return Status::ok();
}

}  // namespace vigil::stream
