// limit_req_zone / limit_req (nginx's ngx_http_limit_req_module), see
// limit_req.h for the arithmetic.
#include "http/core/module.h"
#include "http/core/phases.h"
#include "http/access/limit_req.h"

#include <algorithm>
#include <cstdlib>
#include <memory>

#include "core/conf/values.h"
#include "http/core/conf.h"
#include "http/core/request.h"
#include "vigil/core/log.h"
#include "vigil/event/loop.h"

namespace vigil::http {
namespace {

const int kLimitReqTag = 0;  // the zones' owner key (its address)

// What limit_req_zone declares; the zone's data() points here.
struct LimitReqZone {
  VarTemplate key;
  std::uint64_t rate = 1000;  // requests per 1000 s
  ShmZone* zone = nullptr;
  LimitTable table;  // set by the zone's init, before fork
};

LogLevel lower_level(LogLevel l) {
  return l == LogLevel::kInfo ? l : static_cast<LogLevel>(static_cast<int>(l) + 1);
}

}  // namespace

std::int64_t limit_req_excess(std::int64_t excess, MsecDiff elapsed, std::uint64_t rate) {
  if (elapsed < -60000) {
    elapsed = 1;
  } else if (elapsed < 0) {
    elapsed = 0;
  }
  const std::int64_t e =
      excess - static_cast<std::int64_t>(rate) * static_cast<std::int64_t>(elapsed) / 1000 + 1000;
  return e < 0 ? 0 : e;
}

void limit_req_expire(LimitTable& t, std::uint64_t rate, Msec now, bool force) {
  for (int n = force ? 0 : 1; n < 3; ++n) {
    LimitNode* lr = t.oldest();
    if (lr == nullptr) return;
    if (n != 0) {
      const MsecDiff ms = std::abs(msec_diff(now, lr->last));
      if (ms < 60000) return;
      const std::int64_t excess = lr->excess - static_cast<std::int64_t>(rate) * ms / 1000;
      if (excess > 0) return;
    } else {
      ++t.shared().evicted;
    }
    t.remove(lr);
  }
}

LimitReqOutcome limit_req_lookup(LimitTable& t, std::uint64_t hash, std::string_view key,
                                 std::uint64_t rate, std::uint64_t burst, Msec now,
                                 std::int64_t* excess_out) {
  if (LimitNode* lr = t.find(hash, key); lr != nullptr) {
    t.touch(lr);
    const MsecDiff ms = msec_diff(now, lr->last);
    const std::int64_t excess = limit_req_excess(lr->excess, ms, rate);
    *excess_out = excess;
    if (static_cast<std::uint64_t>(excess) > burst) return LimitReqOutcome::kBusy;
    lr->excess = excess;
    if (ms > 0 || ms < -60000) lr->last = now;
    return LimitReqOutcome::kOk;
  }
  *excess_out = 0;
  LimitNode* lr = t.insert(hash, key);
  if (lr == nullptr) {
    limit_req_expire(t, rate, now, /*force=*/true);
    lr = t.insert(hash, key);
    if (lr == nullptr) return LimitReqOutcome::kNoMemory;
  }
  lr->last = now;
  lr->excess = 0;
  return LimitReqOutcome::kOk;
}

namespace {

void delay_handler(Request& r) {
  Connection& c = *r.c;
  Event& wev = *c.write;
  if (!wev.timedout) {
    // Writable before the delay is over: wait for the timer.
    if (!c.loop->handle_write_event(wev)) terminate_request(r, 0);
    return;
  }
  wev.timedout = 0;
  wev.delayed = 0;
  r.write_event_handler = write_handler;
  run_phases(r);  // limit_req's step again: it lets the request through now
}

}  // namespace

bool limit_req_pass(Request& r) {
  const LimitReqConf& loc = limit_req_conf(*r.loc);
  Connection& c = *r.c;
  const Msec now = clock::current_msec();
  Msec delay = 0;
  LimitStatus status = LimitStatus::kNone;
  for (const LimitReqRef& ref : loc.refs) {
    auto* ctx = static_cast<LimitReqZone*>(ref.zone->data());
    if (ctx == nullptr || !ctx->table.valid()) continue;
    char buf[kMaxLimitKey];
    const std::string_view key = limit_key(r, ctx->key, buf);
    if (key.empty()) continue;  // not accounted, as nginx
    const std::uint64_t hash = limit_key_hash(key);

    std::int64_t excess = 0;
    LimitReqOutcome rc;
    {
      SlabLock lock(ctx->zone->pool());
      limit_req_expire(ctx->table, ctx->rate, now, /*force=*/false);
      rc = limit_req_lookup(ctx->table, hash, key, ctx->rate, ref.burst, now, &excess);
    }
    const char* dry = loc.dry_run ? ", dry run" : "";
    if (rc == LimitReqOutcome::kNoMemory) {
      VIGIL_LOG(*c.log, kAlert, 0, "*%llu could not allocate node in zone \"%s\"",
                static_cast<unsigned long long>(c.number), ctx->zone->name().c_str());
    } else if (rc == LimitReqOutcome::kBusy && c.log->enabled(loc.log_level)) {
      c.log->write(loc.log_level, 0,
                   "*%llu limiting requests%s, excess: %lld.%03lld by zone \"%s\"",
                   static_cast<unsigned long long>(c.number), dry,
                   static_cast<long long>(excess / 1000), static_cast<long long>(excess % 1000),
                   ctx->zone->name().c_str());
    }
    if (status == LimitStatus::kNone) status = LimitStatus::kPassed;
    if (rc != LimitReqOutcome::kOk) {
      if (loc.dry_run) {
        status = LimitStatus::kRejectedDryRun;
        continue;
      }
      r.limit_req_status = LimitStatus::kRejected;
      finalize_error(r, loc.status);
      return false;
    }
    if (static_cast<std::uint64_t>(excess) > ref.delay) {
      const Msec d =
          static_cast<Msec>((static_cast<std::uint64_t>(excess) - ref.delay) * 1000 / ctx->rate);
      if (status == LimitStatus::kPassed) {
        status = loc.dry_run ? LimitStatus::kDelayedDryRun : LimitStatus::kDelayed;
      }
      if (d > delay) {
        delay = d;
        const LogLevel level = lower_level(loc.log_level);
        if (c.log->enabled(level)) {
          c.log->write(level, 0, "*%llu delaying request%s, excess: %lld.%03lld, by zone \"%s\"",
                       static_cast<unsigned long long>(c.number), dry,
                       static_cast<long long>(excess / 1000), static_cast<long long>(excess % 1000),
                       ctx->zone->name().c_str());
        }
      }
    }
  }
  r.limit_req_status = status;
  if (delay == 0 || loc.dry_run) return true;
  // Held by a timer on the write event (nginx's ngx_http_limit_req_delay):
  // reading stays blocked, the worker serves others meanwhile.
  Event& wev = *c.write;
  wev.delayed = 1;
  r.write_event_handler = delay_handler;
  c.loop->add_timer(wev, delay);
  return false;
}

// ---- directives -------------------------------------------------------------

namespace {

// limit_req_zone key zone=name:size rate=Nr/s|Nr/m [sync];
Status set_limit_req_zone(const DirectiveCall& call, LimitReqMainConf& main) {
  auto ctx = std::make_shared<LimitReqZone>();
  auto key = VarTemplate::compile(call.arg(0));
  if (!key) return call.error(key.status().message());
  ctx->key = std::move(key.value());
  std::string name;
  std::uint64_t size = 0;
  for (std::size_t i = 1; i < call.arg_count(); ++i) {
    std::string_view a = call.arg(i);
    if (a.starts_with("zone=")) {
      if (Status st = parse_zone_arg(call, a.substr(5), name, size); !st) return st;
    } else if (a.starts_with("rate=")) {
      std::string_view v = a.substr(5);
      std::uint64_t scale = 1;
      if (v.ends_with("r/s")) {
        v.remove_suffix(3);
      } else if (v.ends_with("r/m")) {
        v.remove_suffix(3);
        scale = 60;
      } else {
        return call.error("invalid rate \"" + std::string(a) + "\"");
      }
      auto n = parse_number(v);
      if (!n || *n <= 0 || *n > 1000000000) {
        return call.error("invalid rate \"" + std::string(a) + "\"");
      }
      ctx->rate = static_cast<std::uint64_t>(*n) * 1000 / scale;
      if (ctx->rate == 0) return call.error("invalid rate \"" + std::string(a) + "\"");
    } else if (a == "sync") {
      // nginx Plus synchronises zones across a cluster; there is one host here.
      VIGIL_LOG(Log::global(), kWarn, 0, "the \"sync\" parameter is ignored%s",
                call.where().c_str());
    } else {
      return call.error("invalid parameter \"" + std::string(a) + "\"");
    }
  }
  if (name.empty()) return call.error("\"limit_req_zone\" must have \"zone\" parameter");
  return bind_limit_zone(call, "limit_req_zone", "limit_req", name, size, &kLimitReqTag,
                         std::move(ctx), main.zones);
}

// limit_req zone=name [burst=N] [nodelay | delay=N];
Status set_limit_req(const DirectiveCall& call, LimitReqConf& loc) {
  LimitReqRef ref;
  std::string name;
  bool nodelay = false;
  for (std::size_t i = 0; i < call.arg_count(); ++i) {
    std::string_view a = call.arg(i);
    if (a.starts_with("zone=")) {
      name = std::string(a.substr(5));
    } else if (a.starts_with("burst=")) {
      auto n = parse_number(a.substr(6));
      if (!n || *n < 0 || *n > 1000000000) {
        return call.error("invalid burst value \"" + std::string(a) + "\"");
      }
      ref.burst = static_cast<std::uint64_t>(*n) * 1000;
    } else if (a.starts_with("delay=")) {
      auto n = parse_number(a.substr(6));
      if (!n || *n < 0 || *n > 1000000000) {
        return call.error("invalid delay value \"" + std::string(a) + "\"");
      }
      ref.delay = static_cast<std::uint64_t>(*n) * 1000;
    } else if (a == "nodelay") {
      nodelay = true;
    } else {
      return call.error("invalid parameter \"" + std::string(a) + "\"");
    }
  }
  if (name.empty()) return call.error("\"limit_req\" must have \"zone\" parameter");
  if (nodelay) ref.delay = UINT64_MAX;
  auto z = call.zones().add(name, 0, &kLimitReqTag, call.where());
  if (!z) return z.status();
  ref.zone = *z;
  ref.where = call.where();
  for (const LimitReqRef& other : loc.refs) {
    if (other.zone == ref.zone) return call.error("\"limit_req\" directive is duplicate");
  }
  loc.refs.push_back(std::move(ref));
  return Status::ok();
}

const std::vector<std::pair<std::string, LogLevel>> kLimitLogLevels = {
    {"info", LogLevel::kInfo},
    {"notice", LogLevel::kNotice},
    {"warn", LogLevel::kWarn},
    {"error", LogLevel::kError}};

}  // namespace

namespace {

bool var_limit_req_status(const Request& r, std::string_view, VarSink& out) {
  return put_limit_status(r.limit_req_status, out);
}

constexpr VarSpec kLimitReqVariables[] = {{"limit_req_status", var_limit_req_status}};

}  // namespace

const HttpModule& limit_req_module() {
  static const HttpModule* module = [] {
    auto* m = new HttpModule("http_limit_req");  // never destroyed: used until exit
    m->set_variables(kLimitReqVariables);
    Module& c = m->conf();
    auto main = c.add_conf<LimitReqMainConf>(kHttpMainConf);
    auto loc = m->add_loc_conf<LimitReqConf>(
        {}, [](const ConfInit& ctx, const LimitReqConf& parent, LimitReqConf& child) {
          if (!ctx.is_set("limit_req")) child.refs = parent.refs;
          return Status::ok();
        });
    constexpr ConfContextMask kAny = kHttpMainConf | kHttpSrvConf | kHttpLocConf;
    c.add("limit_req_zone", kHttpMainConf, Arity::between(2, 4), main.custom(set_limit_req_zone))
        .multiple = true;
    c.add("limit_req", kAny, Arity::between(1, 3), loc.custom(set_limit_req)).multiple = true;
    c.add("limit_req_status", kAny, Arity::exactly(1),
          loc.number<int>(&LimitReqConf::status, 503, 400, 599));
    c.add("limit_req_log_level", kAny, Arity::exactly(1),
          loc.one_of(&LimitReqConf::log_level, LogLevel::kError, kLimitLogLevels));
    c.add("limit_req_dry_run", kAny, Arity::on_off(), loc.flag(&LimitReqConf::dry_run, false));
    return m;
  }();
  return *module;
}

const LimitReqConf& limit_req_conf(const HttpLocConf& loc) {
  return loc_conf<LimitReqConf>(loc, limit_req_module());
}


namespace {

// Once per request (nginx's r->main->limit_req_status): after a delay, and
// after an internal redirect, the request is not counted again.
int limit_req_handler(Request& r) {
  if (r.limits_stage >= 1) return kPhaseDeclined;
  r.limits_stage = 1;
  if (limit_req_conf(*r.loc).refs.empty() || limit_req_pass(r)) return kPhaseDeclined;
  return kPhaseSuspended;  // delayed (the timer runs the phases again) or answered
}

}  // namespace

void add_limit_req_phase(PhaseEngine& engine) {
  engine.add(HttpPhase::kPreAccess, limit_req_handler);
}

}  // namespace vigil::http
