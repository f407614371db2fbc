// The open_file_cache directives (nginx's ngx_http_core_module names,
// defaults and contexts):
//
//   open_file_cache off | max=N [inactive=time];   default off, inactive 60s
//   open_file_cache_valid time;                    default 60s
//   open_file_cache_min_uses number;               default 1
//   open_file_cache_errors on | off;               default off
//
// All four in http, server and location, inherited by the levels that do
// not set them; a location that inherits open_file_cache shares its table.
#include <string>

#include "core/conf/values.h"
#include "http/core/conf.h"

namespace vigil::http {
namespace {

Status set_open_file_cache(const DirectiveCall& call, HttpLocConf& loc) {
  std::int64_t max = 0;
  Msec inactive = 60000;
  bool off = false;
  for (std::size_t i = 0; i < call.arg_count(); ++i) {
    const std::string& a = call.arg(i);
    if (a.starts_with("max=")) {
      auto v = parse_number(std::string_view(a).substr(4));
      if (!v || *v <= 0 || *v > (1 << 24)) {
        return call.error("invalid \"open_file_cache\" parameter \"" + a + "\"");
      }
      max = *v;
    } else if (a.starts_with("inactive=")) {
      auto v = parse_sec(std::string_view(a).substr(9));
      if (!v || *v < 0) return call.error("invalid \"open_file_cache\" parameter \"" + a + "\"");
      inactive = static_cast<Msec>(*v) * 1000;
    } else if (a == "off") {
      off = true;
    } else {
      return call.error("invalid \"open_file_cache\" parameter \"" + a + "\"");
    }
  }
  if (off) {
    if (call.arg_count() != 1) {
      return call.error("\"off\" cannot be used with other \"open_file_cache\" parameters");
    }
    loc.open_file_cache.reset();
    return Status::ok();
  }
  if (max == 0) return call.error("\"open_file_cache\" must have the \"max\" parameter");
  auto fc = std::make_shared<OpenFileCacheConf>();
  fc->max = static_cast<std::uint32_t>(max);
  fc->inactive = inactive;
  loc.open_file_cache = std::move(fc);
  return Status::ok();
}

}  // namespace

void add_open_file_cache_directives(Module& m, ConfSlot<HttpLocConf> loc) {
  constexpr ConfContextMask kAny = kHttpMainConf | kHttpSrvConf | kHttpLocConf;
  m.add("open_file_cache", kAny, Arity::between(1, 2), loc.custom(set_open_file_cache));
  m.add("open_file_cache_valid", kAny, Arity::exactly(1),
        loc.sec<std::uint32_t>(&HttpLocConf::open_file_cache_valid, 60));
  m.add("open_file_cache_min_uses", kAny, Arity::exactly(1),
        loc.number<std::uint32_t>(&HttpLocConf::open_file_cache_min_uses, 1));
  m.add("open_file_cache_errors", kAny, Arity::on_off(),
        loc.flag(&HttpLocConf::open_file_cache_errors, false));
}

}  // namespace vigil::http
