#pragma once
// What http's limit_req and limit_conn add to the shared limit table
// (core/limit_table.h): the key evaluated for a request, and the status
// variables.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/conf/module.h"
#include "core/conf/values.h"
#include "core/limit_table.h"
#include "http/core/request.h"
#include "http/core/variables.h"
#include "vigil/core/clock.h"
#include "vigil/core/result.h"

namespace vigil::http {

// The shared table is core's (core/limit_table.h), stream's limit_conn
// uses it too.
using ::vigil::kMaxLimitKey;
using ::vigil::limit_key_hash;
using ::vigil::LimitNode;
using ::vigil::LimitShared;
using ::vigil::LimitTable;

struct Request;
class VarTemplate;
// A zone's key evaluated for `r` into `buf` (kMaxLimitKey bytes). Empty when
// the value is empty (not accounted, as nginx) or longer than the buffer
// (logged at [error], as nginx).
std::string_view limit_key(Request& r, const VarTemplate& key, char* buf);

// $limit_req_status and $limit_conn_status: "PASSED", "DELAYED",
// "REJECTED", "DELAYED_DRY_RUN", "REJECTED_DRY_RUN"; not found for kNone.
bool put_limit_status(LimitStatus status, VarSink& out);

}  // namespace vigil::http
