// The HTTP modules' phase handlers, in the order they run within a phase
// (nginx's ngx_http_modules with each module's postconfiguration). Adding a
// module that takes part in the phases is one line here; one that only
// answers a location sets HttpLocConf::content from its directive instead.
#include "http/access/access.h"
#include "http/access/auth_basic.h"
#include "http/access/auth_delay.h"
#include "http/access/auth_request.h"
#include "http/access/limit_conn.h"
#include "http/access/limit_req.h"
#include "http/access/realip.h"
#include "http/charset/charset.h"
#include "http/core/filters.h"
#include "http/core/module.h"
#include "http/core/phases.h"
#include "http/core/post_action.h"
#include "http/core/request.h"
#include "http/core/servers.h"
#include "http/empty_gif/empty_gif.h"
#include "http/filters/add_header.h"
#include "http/filters/expires.h"
#include "http/filters/range.h"
#include "http/geo/geo.h"
#include "http/gzip/gzip.h"
#include "http/grpc/grpc_conf.h"
#include "http/map/map.h"
#include "http/proxy/proxy_conf.h"
#include "http/rewrite/rewrite.h"
#include "http/split_clients/split_clients.h"
#include "http/static/autoindex.h"
#include "http/static/disable_symlinks.h"
#include "http/static/open_file_cache_conf.h"
#include "http/static/try_files.h"

namespace vigil::http {

std::span<const HttpModule* const> http_modules() {
  // Modules with confs of their own, registered with the configuration after
  // "http" (server/modules.cc), in this order.
  static const HttpModule* const kModules[] = {
      &map_module(),        &geo_module(),         &split_clients_module(),
      &realip_module(),     &rewrite_module(),     &limit_req_module(),
      &limit_conn_module(), &access_module(),      &auth_basic_module(),
      &auth_request_module(), &auth_delay_module(),
      &try_files_module(),  &autoindex_module(),   &empty_gif_module(),
      &add_header_module(), &expires_module(),     &range_module(),
      &disable_symlinks_module(),
      &open_file_cache_module(), &proxy_module(),  &grpc_module(),  &charset_module(),
      &gzip_module(),
      &brotli_module(),     &zstd_module(),       &post_action_module(),
      &filters_module(),
  };
  return kModules;
}

// The filters, in the order they run (send_header and output_filter,
// filters.h). Header filters: the preconditions first (a 304 or 412 is
// decided on the whole representation), then expires and add_header, each
// only when some location of the configuration uses it (add_header's
// Last-Modified is the date If-Range compares), then charset (before gunzip:
// a coded body is never recoded), then gunzip and gzip (after
// expires, whose fields gzip_proxied reads; gunzip first, as in nginx, so a
// response it decodes is not coded again), then Range (a coded body has no
// length, so no ranges: nginx's order). Body filters, before HTTP/1's final
// writer: a module that changes the body (charset, then gzip: recoded, then
// compressed) adds its filter before chunked, which frames what the others
// made, when its directive is used; the range filter's body side (the parts
// of a multipart answer) comes first.
bool register_filters(FilterChains& chains, const HttpServers& servers) {
  bool ok = chains.header.add(not_modified_header_filter);
  if (ok && uses_expires(servers)) ok = chains.header.add(expires_header_filter);
  if (ok && uses_add_header(servers)) ok = chains.header.add(add_header_filter);
  const bool gunzip = uses_gunzip(servers);
  const bool gzip = uses_gzip(servers);
  const bool charset = uses_charset(servers);
  if (ok && charset) ok = chains.header.add(charset_header_filter);
  if (ok && gunzip) ok = chains.header.add(gunzip_header_filter);
  if (ok && gzip) ok = chains.header.add(gzip_header_filter);
  ok = ok && chains.header.add(range_header_filter);
  ok = ok && chains.body.add(range_body_filter);
  if (ok && charset) ok = chains.body.add(charset_body_filter);
  if (ok && (gzip || gunzip)) ok = chains.body.add(gzip_body_filter);
  return ok && chains.body.add(chunked_body_filter);
}

namespace {

// filters_module's conf spec, kept in the http scope only.
struct FilterChainsBuilt {};

// Every module listed before filters_module has merged its confs by now, so
// a module can tell from them whether the configuration uses its filter.
Status build_filter_chains(const ConfInit& ctx, FilterChainsBuilt&) {
  HttpServers* servers = http_servers(ctx.env(), ctx.scope());
  if (servers == nullptr) return Status::error("internal error: no http servers");
  if (!register_filters(servers->filters, *servers)) {
    return Status::error("too many HTTP filters");
  }
  for (HttpSrvConf* srv : servers->servers) srv->filters = &servers->filters;
  return Status::ok();
}

}  // namespace

const HttpModule& filters_module() {
  static const HttpModule* module = [] {
    auto* m = new HttpModule("http_filters");  // never destroyed: used until exit
    m->conf().add_conf<FilterChainsBuilt>(kHttpMainConf, build_filter_chains);
    return m;
  }();
  return *module;
}

void register_phase_handlers(PhaseEngine& engine) {
  add_realip_phases(engine);   // post-read, pre-access
  add_rewrite_phases(engine);  // server-rewrite, rewrite, post-rewrite
  engine.add(HttpPhase::kFindConfig, find_config_handler);    // the location
  add_limit_req_phase(engine);                                // pre-access
  add_limit_conn_phase(engine);                               // pre-access
  add_access_phase(engine);                                   // access
  add_try_files_phase(engine);                                // try-files
  engine.add(HttpPhase::kContent, location_content_handler);  // proxy_pass, stub_status...
  add_static_phase(engine);                                   // content: files
}

}  // namespace vigil::http
