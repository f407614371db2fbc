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
// A module with its own conf; once the http block is finished, each cache a
// location uses gets its table's index in HttpServers::file_caches.
#include "http/static/open_file_cache_conf.h"

#include <string>

#include "core/conf/values.h"
#include "http/core/conf.h"
#include "http/core/module.h"
#include "http/core/servers.h"

namespace vigil::http {
namespace {

Status set_open_file_cache(const DirectiveCall& call, OpenFileCacheLocConf& loc) {
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
    loc.cache.reset();
    return Status::ok();
  }
  if (max == 0) return call.error("\"open_file_cache\" must have the \"max\" parameter");
  auto fc = std::make_shared<OpenFileCacheConf>();
  fc->max = static_cast<std::uint32_t>(max);
  fc->inactive = inactive;
  loc.cache = std::move(fc);
  return Status::ok();
}

// The module's last conf spec, kept in the http scope only: its init runs
// once the module's location confs are merged.
struct OpenFileCacheTables {};

// One table per open_file_cache directive that some location uses.
Status number_tables(const ConfInit& ctx, OpenFileCacheTables&) {
  HttpServers* servers = http_servers(ctx.env(), ctx.scope());
  if (servers == nullptr) return Status::error("internal error: no http servers");
  for (const HttpLocConf* loc : servers->locations) {
    const OpenFileCacheConf* fc = open_file_cache_conf(*loc).cache.get();
    if (fc == nullptr || fc->index != -1) continue;
    fc->index = static_cast<int>(servers->file_caches.size());
    servers->file_caches.push_back(fc);
  }
  return Status::ok();
}

}  // namespace

const HttpModule& open_file_cache_module() {
  static const HttpModule* module = [] {
    auto* m = new HttpModule("http_open_file_cache");  // never destroyed: used until exit
    auto loc = m->add_loc_conf<OpenFileCacheLocConf>(
        {},
        [](const ConfInit& ctx, const OpenFileCacheLocConf& parent, OpenFileCacheLocConf& child) {
          if (!ctx.is_set("open_file_cache")) child.cache = parent.cache;
          return Status::ok();
        });
    m->conf().add_conf<OpenFileCacheTables>(kHttpMainConf, number_tables);
    constexpr ConfContextMask kAny = kHttpMainConf | kHttpSrvConf | kHttpLocConf;
    Module& c = m->conf();
    c.add("open_file_cache", kAny, Arity::between(1, 2), loc.custom(set_open_file_cache));
    c.add("open_file_cache_valid", kAny, Arity::exactly(1),
          loc.sec<std::uint32_t>(&OpenFileCacheLocConf::valid, 60));
    c.add("open_file_cache_min_uses", kAny, Arity::exactly(1),
          loc.number<std::uint32_t>(&OpenFileCacheLocConf::min_uses, 1));
    c.add("open_file_cache_errors", kAny, Arity::on_off(),
          loc.flag(&OpenFileCacheLocConf::errors, false));
    return m;
  }();
  return *module;
}

const OpenFileCacheLocConf& open_file_cache_conf(const HttpLocConf& loc) {
  return loc_conf<OpenFileCacheLocConf>(loc, open_file_cache_module());
}

}  // namespace vigil::http
