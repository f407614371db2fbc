// allow / deny (nginx's ngx_http_access_module), in http, server and
// location, in order: the first rule that matches the client decides; a
// level with no rule of its own inherits its parent's list whole (as nginx).
// A denied request is answered 403 and logged "access forbidden by rule" at
// "error". Checked for every handler of the location (static files, proxy,
// stub_status, metrics), before try_files, and again in a location that a
// try_files redirect leads to.
//
// `satisfy` (nginx keeps it in its core module; here, with the rules it
// combines) decides how allow/deny and auth_basic (auth_basic.cc) make one
// answer: access_handler below.
//
// An IPv6 client whose address is IPv4-mapped (::ffff:a.b.c.d, a dual-stack
// socket) is matched against the IPv4 rules, as nginx does.
#include "http/core/module.h"
#include "http/core/phases.h"
#include "http/access/access.h"
#include "http/access/auth_delay.h"
#include "http/access/auth_basic.h"
#include "http/access/auth_request.h"

#include "http/core/conf.h"
#include "http/core/request.h"
#include "vigil/core/log.h"

namespace vigil::http {
namespace {

Status set_rule(const DirectiveCall& call, AccessConf& conf) {
  AccessRule rule;
  rule.deny = call.name() == "deny";
  std::string error;
  std::string warning;
  if (!parse_access_rule(call.arg(0), rule, error, warning)) return call.error(error);
  if (!warning.empty()) {
    VIGIL_LOG(Log::global(), kWarn, 0, "%s%s", warning.c_str(), call.where().c_str());
  }
  conf.rules.push_back(rule);
  return Status::ok();
}

}  // namespace

namespace {

void log_forbidden(Request& r) {
  VIGIL_LOG(*r.c->log, kError, 0, "*%llu access forbidden by rule, client: %.*s",
            static_cast<unsigned long long>(r.c->number),
            static_cast<int>(r.c->addr_text.size()), r.c->addr_text.data());
}

}  // namespace

int access_phase(Request& r, bool log) {
  const auto& rules = loc_conf<AccessConf>(*r.loc, access_module()).rules;
  if (rules.empty()) return kPhaseDeclined;
  const AccessRule* rule = first_matching_rule(rules, r.c->peer_addr);
  if (rule == nullptr) return kPhaseDeclined;
  if (!rule->deny) return 0;
  if (log) log_forbidden(r);
  return 403;
}

const HttpModule& access_module() {
  static const HttpModule* module = [] {
    auto* m = new HttpModule("http_access");  // never destroyed: used until exit
    auto conf = m->add_loc_conf<AccessConf>(
        {}, [](const ConfInit& ctx, const AccessConf& parent, AccessConf& child) {
          if (!ctx.is_set("allow") && !ctx.is_set("deny")) child.rules = parent.rules;
          return Status::ok();
        });
    constexpr ConfContextMask kWhere = kHttpMainConf | kHttpSrvConf | kHttpLocConf;
    m->conf().add("allow", kWhere, Arity::exactly(1), conf.custom(set_rule)).multiple = true;
    m->conf().add("deny", kWhere, Arity::exactly(1), conf.custom(set_rule)).multiple = true;
    m->conf().add("satisfy", kWhere, Arity::exactly(1),
                  conf.one_of(&AccessConf::satisfy_any, false, {{"all", false}, {"any", true}}));
    return m;
  }();
  return *module;
}


namespace {

// allow/deny and auth_basic, before auth_request: 0 or kPhaseDeclined to go
// on to auth_request with `code` the refusal so far (satisfy any), kPhaseNext
// when the client is in (satisfy any), or a status that ends the phase.
int local_checks(Request& r, bool any, int& code) {
  int rc = access_phase(r, !any);
  if (!any) {
    if (rc >= 100) return rc;
    rc = auth_basic_check(r);
    return rc >= 100 ? rc : kPhaseDeclined;
  }
  if (rc == 0) return kPhaseNext;
  code = rc == 403 ? 403 : 0;
  rc = auth_basic_check(r);
  if (rc == 0) return kPhaseNext;
  if (rc == 401 || rc == 403) {
    if (code != 401) code = rc;
  } else if (rc >= 100) {
    return rc;
  }
  return kPhaseDeclined;
}

// allow/deny first, then auth_basic, then auth_request (nginx runs its access
// handlers in that order). "satisfy all": the first that refuses answers.
// "satisfy any": the first that lets the client in ends the phase; when none
// does, a 401 wins over a 403 (the client can still authenticate), and a
// check that declined (no rules, no match, auth_basic off) refuses nothing.
// auth_request's subrequest suspends the phase; it runs again when the
// subrequest has ended, and auth_request then gives back its answer and the
// refusal the local checks had made before it (they are not run twice).
int access_checks(Request& r) {
  const bool any = loc_conf<AccessConf>(*r.loc, access_module()).satisfy_any;
  int code = 0;
  if (r.waiting_on == nullptr) {
    const int rc = local_checks(r, any, code);
    if (rc != kPhaseDeclined) return rc;
  }
  const int rc = auth_request_check(r, code);
  if (rc == kPhaseSuspended) return rc;
  if (!any) return rc >= 100 ? rc : kPhaseDeclined;
  if (rc == 0) return kPhaseNext;
  if (rc == 401 || rc == 403) {
    if (code != 401) code = rc;
  } else if (rc >= 100) {
    return rc;
  }
  if (code == 0) return kPhaseNext;
  if (code == 403) log_forbidden(r);
  return code;
}

// A 401 waits auth_delay before it is answered (nginx delays it wherever
// the access phase ends with it).
int access_handler(Request& r) {
  const int rc = access_checks(r);
  return rc == 401 ? auth_delay(r) : rc;
}

}  // namespace

void add_access_phase(PhaseEngine& engine) { engine.add(HttpPhase::kAccess, access_handler); }

}  // namespace vigil::http
