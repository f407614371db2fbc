#pragma once
// limit_conn (nginx's ngx_http_limit_conn_module): requests in progress per
// key, counted in a shared zone (limit_zone.h) so the limit is global across
// workers. See limit_conn.cc.

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "http/access/limit_zone.h"
#include "vigil/core/log.h"

namespace vigil {
class ShmZone;
}

namespace vigil::http {

struct Request;
struct HttpLocConf;
class HttpModule;

// One "limit_conn zone number;".
struct LimitConnRef {
  ShmZone* zone = nullptr;
  std::uint32_t number = 0;
};

// The module's conf at each level (inherited as limit_req's).
struct LimitConnConf {
  std::vector<LimitConnRef> refs;
  int status = 503;
  LogLevel log_level = LogLevel::kError;
  bool dry_run = false;
};

// The http level's: the limit_conn_zone contexts.
struct LimitConnMainConf {
  std::vector<std::shared_ptr<void>> zones;
};

const HttpModule& limit_conn_module();
const LimitConnConf& limit_conn_conf(const HttpLocConf& loc);

using ::vigil::limit_conn_acquire;  // core/limit_table.h
using ::vigil::limit_conn_release;

// The pre-access step: true when the request goes on, false when it was
// answered with limit_conn_status.
bool limit_conn_pass(Request& r);

class PhaseEngine;
// limit_conn's pre-access phase handler.
void add_limit_conn_phase(PhaseEngine& engine);
// Gives back what the request holds (release_request).
void limit_conn_release_all(Request& r);

}  // namespace vigil::http
