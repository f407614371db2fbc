// The HTTP modules' phase handlers, in the order they run within a phase
// (nginx's ngx_http_modules with each module's postconfiguration). Adding a
// module that takes part in the phases is one line here; one that only
// answers a location sets HttpLocConf::content from its directive instead.
#include "http/access/access.h"
#include "http/access/limit_conn.h"
#include "http/access/limit_req.h"
#include "http/core/filters.h"
#include "http/core/module.h"
#include "http/core/phases.h"
#include "http/core/request.h"
#include "http/empty_gif/empty_gif.h"
#include "http/filters/add_header.h"
#include "http/proxy/proxy_conf.h"
#include "http/rewrite/return.h"
#include "http/static/disable_symlinks.h"
#include "http/static/open_file_cache_conf.h"
#include "http/static/try_files.h"

namespace vigil::http {

std::span<const HttpModule* const> http_modules() {
  // Modules with confs of their own, registered with the configuration after
  // "http" (server/modules.cc), in this order.
  static const HttpModule* const kModules[] = {
      &rewrite_module(),    &limit_req_module(),        &limit_conn_module(),
      &access_module(),     &try_files_module(),        &empty_gif_module(),
      &add_header_module(), &disable_symlinks_module(), &open_file_cache_module(),
      &proxy_module(),
  };
  return kModules;
}

// The header filters, in the order they run (send_header, filters.h): the
// preconditions first (a 304 or 412 is decided on the whole
// representation), then Range, then the fields add_header adds to whatever
// status came out.
std::span<const HeaderFilter> header_filters() {
  static constexpr HeaderFilter kFilters[] = {
      not_modified_header_filter,
      range_header_filter,
      add_header_filter,
  };
  return kFilters;
}

// The body filters, in the order they run (output_filter, filters.h), before
// HTTP/1's final writer: a module that changes the body (gzip) adds its
// filter here, before chunked, which frames what the others made.
void register_body_filters(BodyFilterChain& chain) {
  chain.add(chunked_body_filter);
}

void register_phase_handlers(PhaseEngine& engine) {
  add_return_phases(engine);                                  // server-rewrite, rewrite
  engine.add(HttpPhase::kFindConfig, find_config_handler);    // the location
  add_limit_req_phase(engine);                                // pre-access
  add_limit_conn_phase(engine);                               // pre-access
  add_access_phase(engine);                                   // access
  add_try_files_phase(engine);                                // try-files
  engine.add(HttpPhase::kContent, location_content_handler);  // proxy_pass, stub_status...
  add_static_phase(engine);                                   // content: files
}

}  // namespace vigil::http
