// allow / deny in stream (see access.h).
#include "stream/access.h"

#include "stream/session.h"
#include "stream/stream_conf.h"
#include "vigil/core/log.h"
#include "vigil/event/listening.h"

namespace vigil::stream {

Status set_access_rule(const DirectiveCall& call, std::vector<AccessRule>& rules) {
  AccessRule rule;
  rule.deny = call.name() == "deny";
  std::string error;
  std::string warning;
  if (!parse_access_rule(call.arg(0), rule, error, warning)) return call.error(error);
  if (!warning.empty()) {
    VIGIL_LOG(Log::global(), kWarn, 0, "%s%s", warning.c_str(), call.where().c_str());
  }
  rules.push_back(rule);
  return Status::ok();
}

bool access_allows(Session& s) {
  Connection& c = *s.client;
  const AccessRule* rule = first_matching_rule(s.conf->access_rules, c.peer_addr);
  if (rule == nullptr || !rule->deny) return true;
  VIGIL_LOG(*c.log, kError, 0, "*%llu access forbidden by rule, client: %.*s, server: %s",
            static_cast<unsigned long long>(c.number), static_cast<int>(c.addr_text.size()),
            c.addr_text.data(), c.listening->addr_text.c_str());
  return false;
}

}  // namespace vigil::stream
