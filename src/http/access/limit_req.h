#pragma once
// limit_req (nginx's ngx_http_limit_req_module): a leaky bucket per key in a
// shared zone. The state of a key is its `excess` — requests above the rate,
// in 1/1000 of a request — and the time of the last accounted request, in
// milliseconds. A request at `now` makes
//
//   excess' = max(0, excess - rate * (now - last) / 1000 + 1000)
//
// (rate in requests per 1000 s, i.e. "10r/s" is 10000). excess' > burst
// rejects it (state unchanged); else it is accounted, and delayed by
// (excess' - delay) * 1000 / rate ms when excess' > delay (nodelay: never).
//
// Idle entries expire: before each lookup the least recently used entry is
// dropped (and a second one) when it has been idle for 60 s and its bucket has
// drained; when the slab is full the least recently used entry is dropped
// whatever its age and the allocation retried, and if that still fails the
// request gets limit_req_status with "could not allocate node in zone".

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "http/access/limit_zone.h"
#include "vigil/core/clock.h"
#include "vigil/core/log.h"

namespace vigil {
class ShmZone;
}

namespace vigil::http {

struct Request;
struct HttpLocConf;
class HttpModule;

// One "limit_req zone=name [burst=N] [nodelay | delay=N];".
struct LimitReqRef {
  ShmZone* zone = nullptr;
  std::uint64_t burst = 0;  // in 1/1000 requests, as the zone's excess
  std::uint64_t delay = 0;  // excess served without delay (1/1000 requests)
  std::string where;
};

// The module's conf at each level. A level with no limit_req of its own
// inherits all of its parent's (nginx's rule); the others inherit singly.
struct LimitReqConf {
  std::vector<LimitReqRef> refs;
  int status = 503;
  LogLevel log_level = LogLevel::kError;
  bool dry_run = false;
};

// The http level's: the limit_req_zone contexts (ShmZone::data() points at them).
struct LimitReqMainConf {
  std::vector<std::shared_ptr<void>> zones;
};

const HttpModule& limit_req_module();
const LimitReqConf& limit_req_conf(const HttpLocConf& loc);

// The new excess after one more request `elapsed` ms after the last one
// (before the burst check). Negative elapsed (a clock step back) counts as 0,
// a step back of more than 60 s as 1 ms, as nginx.
std::int64_t limit_req_excess(std::int64_t excess, MsecDiff elapsed, std::uint64_t rate);

enum class LimitReqOutcome : std::uint8_t { kOk, kBusy, kNoMemory };

// Looks `key` up (creating its entry), checks the burst and accounts the
// request. Caller holds the zone's lock. `excess_out` gets the new excess.
LimitReqOutcome limit_req_lookup(LimitTable& t, std::uint64_t hash, std::string_view key,
                                 std::uint64_t rate, std::uint64_t burst, Msec now,
                                 std::int64_t* excess_out);

// Drops idle, drained entries from the LRU tail (at most 2); `force` first
// drops the least recently used one whatever its state. Caller holds the lock.
void limit_req_expire(LimitTable& t, std::uint64_t rate, Msec now, bool force);

// The pre-access step of a request: true when the request goes on now;
// false when it was rejected (answered) or delayed (a timer on the write
// event continues it with run_phases).
bool limit_req_pass(Request& r);

class PhaseEngine;
// limit_req's pre-access phase handler.
void add_limit_req_phase(PhaseEngine& engine);

}  // namespace vigil::http
