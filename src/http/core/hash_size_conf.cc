// nginx's hash-table sizing directives (types_hash_max_size, map_hash_max_size
// and the like).
// nginx builds fixed-size hash tables at load and fails when a bucket
// overflows; Vigil's tables grow as they need, so there is nothing to size.
// The directives are still accepted, with nginx's value checks, so that an
// nginx configuration (Debian's stock nginx.conf sets types_hash_max_size)
// loads unchanged.
#include "http/core/conf.h"
#include "core/conf/values.h"

namespace vigil::http {

namespace {

// max_size: a number (ngx_conf_set_num_slot); bucket_size: a size (ngx_conf_set_size_slot).
Status check_number(const DirectiveCall& call) {
  auto v = parse_number(call.arg(0));
  if (!v) return call.invalid_value(0);
  return Status::ok();
}

Status check_size(const DirectiveCall& call) {
  auto v = parse_size(call.arg(0));
  if (!v || *v == 0) return call.invalid_value(0);
  return Status::ok();
}

}  // namespace

void add_hash_size_directives(Module& m, ConfSlot<HttpLocConf> loc, ConfSlot<HttpFinalConf> fin) {
  auto number = [](const DirectiveCall& call, HttpFinalConf&) { return check_number(call); };
  auto size = [](const DirectiveCall& call, HttpFinalConf&) { return check_size(call); };
  for (const char* name : {"types_hash_max_size", "server_names_hash_max_size",
                           "variables_hash_max_size", "map_hash_max_size"}) {
    m.add(name, kHttpMainConf, Arity::exactly(1), fin.custom(number));
  }
  for (const char* name : {"types_hash_bucket_size", "server_names_hash_bucket_size",
                           "variables_hash_bucket_size", "map_hash_bucket_size"}) {
    m.add(name, kHttpMainConf, Arity::exactly(1), fin.custom(size));
  }
  constexpr ConfContextMask kAny = kHttpMainConf | kHttpSrvConf | kHttpLocConf;
  m.add("proxy_headers_hash_max_size", kAny, Arity::exactly(1),
        loc.custom([](const DirectiveCall& call, HttpLocConf&) { return check_number(call); }));
  m.add("proxy_headers_hash_bucket_size", kAny, Arity::exactly(1),
        loc.custom([](const DirectiveCall& call, HttpLocConf&) { return check_size(call); }));
}

}  // namespace vigil::http
