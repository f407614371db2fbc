#include "stream/geo.h"

#include <memory>
#include <optional>
#include <utility>

#include "core/geo_block.h"
#include "stream/session.h"
#include "stream/variables.h"

namespace vigil::stream {
namespace {

class GeoVariable final : public ComputedVariable {
 public:
  std::optional<VarTemplate> source;  // none: the client's address
  GeoBlock geo;

  bool value(const Session& s, VarSink& out) const override {
    if (!source) {
      out.put(geo_lookup(geo, s.client->peer_addr));
      return true;
    }
    std::string_view text;
    if (!source->evaluate(s, text)) return false;
    sockaddr_storage addr{};
    const bool ok = parse_geo_address(text, addr);
    out.put(geo_lookup(geo, ok ? reinterpret_cast<const sockaddr*>(&addr) : nullptr));
    return true;
  }
};

}  // namespace

Status set_geo(const DirectiveCall& call) {
  const bool has_source = call.arg_count() == 2;
  auto word = declared_variable_word(call.arg(has_source ? 1 : 0));
  if (!word) return call.error(word.status().message());
  auto geo = std::make_shared<GeoVariable>();
  if (has_source) {
    const std::string& src = call.arg(0);
    if (src.size() < 2 || src[0] != '$') return call.error("invalid variable name \"" + src + "\"");
    auto t = VarTemplate::compile(src);
    if (!t) return call.error(t.status().message());
    geo->source = std::move(t.value());
  }
  GeoBlockSink sink(geo->geo, call.env(), /*allow_proxy=*/false);
  if (Status s = call.parse_block(sink); !s) return s;
  sink.finish();
  declare_variable(word.value(), std::move(geo));
  return Status::ok();
}

}  // namespace vigil::stream
