#pragma once
// limit_conn in stream (nginx's ngx_stream_limit_conn_module): sessions in
// progress per key, counted in a shared zone (core/limit_table.h) so the
// limit holds across workers. A session takes its entries after the accept,
// before allow/deny and TLS, and gives them back when it ends.
//
//   stream {
//       limit_conn_zone $binary_remote_addr zone=addr:1m;
//       server { listen 9000; limit_conn addr 10; proxy_pass ...; }
//   }

#include <cstdint>
#include <memory>
#include <vector>

#include "core/conf/module.h"
#include "vigil/core/result.h"

namespace vigil {
class ShmZone;
}

namespace vigil::stream {

struct Session;

// One "limit_conn zone number;".
struct LimitConnRef {
  ShmZone* zone = nullptr;
  std::uint32_t number = 0;
};

// The most limit_conn a server may have (a session keeps what it holds in
// place, no allocation).
inline constexpr std::size_t kMaxSessionLimits = 8;

// $limit_conn_status (nginx's names): PASSED, REJECTED, REJECTED_DRY_RUN;
// kNone: not found.
enum class LimitConnStatus : std::uint8_t { kNone, kPassed, kRejected, kRejectedDryRun };

// limit_conn_zone key zone=name:size (the zone is kept alive in `keep`).
Status set_limit_conn_zone(const DirectiveCall& call, std::vector<std::shared_ptr<void>>& keep);
// limit_conn zone number
Status set_limit_conn(const DirectiveCall& call, std::vector<LimitConnRef>& refs);

// Counts the session in each of its server's zones: false when a limit
// refused it (logged at limit_conn_log_level; nothing is held then); with
// limit_conn_dry_run it goes on, only $limit_conn_status telling.
bool limit_conn_pass(Session& s);
// Gives back what the session holds (its end).
void limit_conn_release_all(Session& s);

}  // namespace vigil::stream
