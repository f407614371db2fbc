// limit_conn_zone / limit_conn (nginx's ngx_http_limit_conn_module): the
// number of requests in progress per key, in a shared zone, so that the limit
// holds whichever worker accepted the connection. An entry exists while its
// count is above 0 (the request's release takes it back to 0 and frees it),
// so there is nothing idle to expire or evict; a full zone refuses the
// request with limit_conn_status, as nginx.
#include "http/core/module.h"
#include "http/core/phases.h"
#include "http/access/limit_conn.h"

#include <memory>

#include "core/conf/values.h"
#include "http/core/conf.h"
#include "http/access/limit_zone.h"
#include "http/core/request.h"
#include "vigil/core/log.h"

namespace vigil::http {
namespace {

const int kLimitConnTag = 0;

struct LimitConnZone {
  VarTemplate key;
  ShmZone* zone = nullptr;
  LimitTable table;
};

}  // namespace

void limit_conn_release_all(Request& r) {
  for (std::uint8_t i = 0; i < r.nlimit_conn; ++i) {
    auto* ctx = static_cast<LimitConnZone*>(r.limit_conn_zone[i]->data());
    SlabLock lock(ctx->zone->pool());
    limit_conn_release(ctx->table, static_cast<LimitNode*>(r.limit_conn_node[i]));
  }
  r.nlimit_conn = 0;
}

bool limit_conn_pass(Request& r) {
  const LimitConnConf& loc = limit_conn_conf(*r.loc);
  Connection& c = *r.c;
  for (const LimitConnRef& ref : loc.refs) {
    auto* ctx = static_cast<LimitConnZone*>(ref.zone->data());
    if (ctx == nullptr || !ctx->table.valid()) continue;
    char buf[kMaxLimitKey];
    const std::string_view key = limit_key(r, ctx->key, buf);
    if (key.empty()) continue;
    const std::uint64_t hash = limit_key_hash(key);
    LimitNode* node = nullptr;
    bool ok;
    bool full = false;
    {
      SlabLock lock(ctx->zone->pool());
      ok = limit_conn_acquire(ctx->table, hash, key, ref.number, &node);
      full = !ok && ctx->table.find(hash, key) == nullptr;
    }
    const char* dry = loc.dry_run ? ", dry run" : "";
    if (!ok) {
      if (full) {
        VIGIL_LOG(*c.log, kAlert, 0, "*%llu could not allocate node in zone \"%s\"",
                  static_cast<unsigned long long>(c.number), ctx->zone->name().c_str());
      } else if (c.log->enabled(loc.log_level)) {
        c.log->write(loc.log_level, 0, "*%llu limiting connections%s by zone \"%s\"",
                     static_cast<unsigned long long>(c.number), dry, ctx->zone->name().c_str());
      }
      if (loc.dry_run) {
        r.limit_conn_status = LimitStatus::kRejectedDryRun;
        continue;
      }
      r.limit_conn_status = LimitStatus::kRejected;
      limit_conn_release_all(r);
      finalize_error(r, loc.status);
      return false;
    }
    if (r.limit_conn_status == LimitStatus::kNone) r.limit_conn_status = LimitStatus::kPassed;
    r.limit_conn_zone[r.nlimit_conn] = ref.zone;
    r.limit_conn_node[r.nlimit_conn] = node;
    ++r.nlimit_conn;
  }
  return true;
}

namespace {

Status set_limit_conn_zone(const DirectiveCall& call, LimitConnMainConf& main) {
  auto ctx = std::make_shared<LimitConnZone>();
  auto key = VarTemplate::compile(call.arg(0));
  if (!key) return call.error(key.status().message());
  ctx->key = std::move(key.value());
  std::string_view a = call.arg(1);
  if (!a.starts_with("zone=")) return call.error("invalid parameter \"" + std::string(a) + "\"");
  std::string name;
  std::uint64_t size = 0;
  if (Status st = parse_zone_arg(call, a.substr(5), name, size); !st) return st;
  return bind_limit_zone(call, "limit_conn_zone", "limit_conn_zone", name, size, &kLimitConnTag,
                         std::move(ctx), main.zones);
}

// limit_conn zone number;
Status set_limit_conn(const DirectiveCall& call, LimitConnConf& loc) {
  auto n = parse_number(call.arg(1));
  if (!n || *n <= 0 || *n > 65535) {
    return call.error("invalid number of connections \"" + call.arg(1) + "\"");
  }
  auto z = call.zones().add(call.arg(0), 0, &kLimitConnTag, call.where());
  if (!z) return z.status();
  for (const LimitConnRef& other : loc.refs) {
    if (other.zone == *z) return call.error("\"limit_conn\" directive is duplicate");
  }
  if (loc.refs.size() >= kMaxLimitConn) {
    return call.error("too many \"limit_conn\" directives in one location (at most " +
                      std::to_string(kMaxLimitConn) + ")");
  }
  loc.refs.push_back({*z, static_cast<std::uint32_t>(*n)});
  return Status::ok();
}

}  // namespace

namespace {

bool var_limit_conn_status(const Request& r, std::string_view, VarSink& out) {
  return put_limit_status(r.limit_conn_status, out);
}

constexpr VarSpec kLimitConnVariables[] = {{"limit_conn_status", var_limit_conn_status}};

}  // namespace

const HttpModule& limit_conn_module() {
  static const HttpModule* module = [] {
    auto* m = new HttpModule("http_limit_conn");  // never destroyed: used until exit
    m->set_variables(kLimitConnVariables);
    Module& c = m->conf();
    auto main = c.add_conf<LimitConnMainConf>(kHttpMainConf);
    auto loc = m->add_loc_conf<LimitConnConf>(
        {}, [](const ConfInit& ctx, const LimitConnConf& parent, LimitConnConf& child) {
          if (!ctx.is_set("limit_conn")) child.refs = parent.refs;
          return Status::ok();
        });
    constexpr ConfContextMask kAny = kHttpMainConf | kHttpSrvConf | kHttpLocConf;
    c.add("limit_conn_zone", kHttpMainConf, Arity::exactly(2), main.custom(set_limit_conn_zone))
        .multiple = true;
    c.add("limit_conn", kAny, Arity::exactly(2), loc.custom(set_limit_conn)).multiple = true;
    c.add("limit_conn_status", kAny, Arity::exactly(1),
          loc.number<int>(&LimitConnConf::status, 503, 400, 599));
    c.add("limit_conn_log_level", kAny, Arity::exactly(1),
          loc.one_of(&LimitConnConf::log_level, LogLevel::kError,
                     {{"info", LogLevel::kInfo},
                      {"notice", LogLevel::kNotice},
                      {"warn", LogLevel::kWarn},
                      {"error", LogLevel::kError}}));
    c.add("limit_conn_dry_run", kAny, Arity::on_off(), loc.flag(&LimitConnConf::dry_run, false));
    return m;
  }();
  return *module;
}

const LimitConnConf& limit_conn_conf(const HttpLocConf& loc) {
  return loc_conf<LimitConnConf>(loc, limit_conn_module());
}


namespace {

// Once per request, as limit_req; the entries are held until the request
// ends (free_request), a proxied one's while it waits on its upstream too.
int limit_conn_handler(Request& r) {
  if (r.limits_stage >= 2) return kPhaseDeclined;
  r.limits_stage = 2;
  if (limit_conn_conf(*r.loc).refs.empty() || limit_conn_pass(r)) return kPhaseDeclined;
  return kPhaseDone;  // answered with limit_conn_status
}

}  // namespace

void add_limit_conn_phase(PhaseEngine& engine) {
  engine.add(HttpPhase::kPreAccess, limit_conn_handler);
}

}  // namespace vigil::http
