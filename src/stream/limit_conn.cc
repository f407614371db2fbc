// limit_conn in stream (see limit_conn.h). An entry exists while its count
// is above 0, so there is nothing idle to expire; a full zone refuses the
// session as a limit does.
#include "stream/limit_conn.h"

#include <string>
#include <string_view>

#include "core/conf/values.h"
#include "core/limit_table.h"
#include "core/shm_zone.h"
#include "core/slab.h"
#include "stream/session.h"
#include "stream/stream_conf.h"
#include "stream/variables.h"
#include "vigil/core/log.h"
#include "vigil/event/listening.h"

namespace vigil::stream {
namespace {

// The zone's tag: a stream limit_conn_zone is no other module's zone.
const int kStreamLimitConnTag = 0;

struct LimitConnZone {
  VarTemplate key;
  ShmZone* zone = nullptr;
  LimitTable table;
};

// nginx refuses a stream key longer than this.
constexpr std::size_t kMaxStreamKey = 255;

}  // namespace

Status set_limit_conn_zone(const DirectiveCall& call, std::vector<std::shared_ptr<void>>& keep) {
  auto ctx = std::make_shared<LimitConnZone>();
  auto key = VarTemplate::compile(call.arg(0));
  if (!key) return call.error(key.status().message());
  ctx->key = std::move(key.value());
  std::string_view a = call.arg(1);
  if (!a.starts_with("zone=")) return call.error("invalid parameter \"" + std::string(a) + "\"");
  std::string name;
  std::uint64_t size = 0;
  if (Status st = parse_zone_arg(call, a.substr(5), name, size); !st) return st;
  return bind_limit_zone(call, "limit_conn_zone", "limit_conn_zone", name, size,
                         &kStreamLimitConnTag, std::move(ctx), keep);
}

Status set_limit_conn(const DirectiveCall& call, std::vector<LimitConnRef>& refs) {
  auto n = parse_number(call.arg(1));
  if (!n || *n <= 0 || *n > 65535) {
    return call.error("invalid number of connections \"" + call.arg(1) + "\"");
  }
  auto z = call.zones().add(call.arg(0), 0, &kStreamLimitConnTag, call.where());
  if (!z) return z.status();
  for (const LimitConnRef& other : refs) {
    if (other.zone == *z) return call.error("\"limit_conn\" directive is duplicate");
  }
  if (refs.size() >= kMaxSessionLimits) {
    return call.error("too many \"limit_conn\" directives in one server (at most " +
                      std::to_string(kMaxSessionLimits) + ")");
  }
  refs.push_back({*z, static_cast<std::uint32_t>(*n)});
  return Status::ok();
}

void limit_conn_release_all(Session& s) {
  for (std::uint8_t i = 0; i < s.nlimit_conn; ++i) {
    auto* ctx = static_cast<LimitConnZone*>(s.limit_conn_zone[i]->data());
    SlabLock lock(ctx->zone->pool());
    limit_conn_release(ctx->table, s.limit_conn_node[i]);
  }
  s.nlimit_conn = 0;
}

bool limit_conn_pass(Session& s) {
  const StreamSrvConf& conf = *s.conf;
  Connection& c = *s.client;
  for (const LimitConnRef& ref : conf.limit_conns) {
    auto* ctx = static_cast<LimitConnZone*>(ref.zone->data());
    if (ctx == nullptr || !ctx->table.valid()) continue;
    // The key, on the stack: no allocation per session.
    const std::size_t len = ctx->key.length(s);
    if (len == 0) continue;
    char buf[kMaxStreamKey];
    if (len > sizeof buf) {
      VIGIL_LOG(*c.log, kError, 0, "*%llu the value of the \"%s\" key is more than %zu bytes",
                static_cast<unsigned long long>(c.number), ctx->key.source().c_str(),
                kMaxStreamKey);
      continue;
    }
    const std::string_view key(buf, static_cast<std::size_t>(ctx->key.write(s, buf) - buf));
    if (key.empty()) continue;
    s.limit_conn_status = LimitConnStatus::kPassed;
    const std::uint64_t hash = limit_key_hash(key);
    LimitNode* node = nullptr;
    bool ok;
    bool full = false;
    {
      SlabLock lock(ctx->zone->pool());
      ok = limit_conn_acquire(ctx->table, hash, key, ref.number, &node);
      full = !ok && ctx->table.find(hash, key) == nullptr;
    }
    if (ok) {
      s.limit_conn_zone[s.nlimit_conn] = ref.zone;
      s.limit_conn_node[s.nlimit_conn] = node;
      ++s.nlimit_conn;
      continue;
    }
    if (full) {
      VIGIL_LOG(*c.log, kAlert, 0, "*%llu could not allocate node in zone \"%s\"",
                static_cast<unsigned long long>(c.number), ctx->zone->name().c_str());
    } else if (c.log->enabled(conf.limit_conn_log_level)) {
      c.log->write(conf.limit_conn_log_level, 0,
                   "*%llu limiting connections%s by zone \"%s\", client: %.*s, server: %s",
                   static_cast<unsigned long long>(c.number),
                   conf.limit_conn_dry_run ? ", dry run," : "", ctx->zone->name().c_str(),
                   static_cast<int>(c.addr_text.size()), c.addr_text.data(),
                   c.listening->addr_text.c_str());
    }
    // As nginx: what was taken is given back, and the first refusal ends
    // the check, a dry run's too.
    limit_conn_release_all(s);
    if (conf.limit_conn_dry_run) {
      s.limit_conn_status = LimitConnStatus::kRejectedDryRun;
      return true;
    }
    s.limit_conn_status = LimitConnStatus::kRejected;
    return false;
  }
  return true;
}

}  // namespace vigil::stream
