// split_clients (nginx's ngx_http_split_clients_module), for A/B tests:
//
//   split_clients "${remote_addr}AAA" $variant { 0.5% .one; 2.0% .two; * ""; }
//
// The source is hashed with MurmurHash2; the 32-bit hash space is cut into
// parts in order, each the given share of it ("*": the rest), and the
// variable is the value of the part the hash falls in (empty past the last
// part when the shares do not add up to 100%). Computed when a request
// first reads it, kept for the request.
#include "http/split_clients/split_clients.h"

#include <memory>
#include <string>
#include <vector>

#include "core/conf/module.h"
#include "core/conf/parser.h"
#include "core/split_clients.h"
#include "http/core/conf.h"
#include "http/core/module.h"
#include "http/core/request.h"
#include "http/core/request_vars.h"
#include "http/core/variables.h"

namespace vigil::http {

namespace {

class SplitVariable final : public ComputedVariable {
 public:
  VarTemplate source;
  std::vector<SplitPart> parts;

  bool compute(Request& r, std::string_view& out) const override {
    const std::size_t n = source.length(r);
    char* mem = request_alloc(r, n + 1);
    if (mem == nullptr) return false;
    const std::size_t len = static_cast<std::size_t>(source.write(r, mem) - mem);
    const std::uint32_t hash = murmur_hash2(reinterpret_cast<const unsigned char*>(mem), len);
    out = split_value(parts, hash);
    return true;
  }
};

Status set_split_clients(const DirectiveCall& call) {
  auto name = declared_variable_word(call.arg(1));
  if (!name) return call.error(name.status().message());
  auto split = std::make_shared<SplitVariable>();
  auto src = VarTemplate::compile(call.arg(0));
  if (!src) return call.error(src.status().message());
  split->source = std::move(src.value());
  SplitClientsSink sink(split->parts);
  if (Status s = call.parse_block(sink); !s) return s;
  set_computed_variable(declare_variable(name.value()), std::move(split));
  return Status::ok();
}

}  // namespace

const HttpModule& split_clients_module() {
  static const HttpModule* module = [] {
    auto* m = new HttpModule("http_split_clients");  // never destroyed: used until exit
    m->conf()
        .add_block("split_clients", kHttpMainConf, Arity::exactly(2), 0,
                   DirectiveBody::handler(set_split_clients))
        .multiple = true;
    return m;
  }();
  return *module;
}

}  // namespace vigil::http
