// The phase engine (phases.h): the steps laid out once per configuration,
// and the loop that walks a request through them.
#include "http/core/phases.h"

#include "http/core/request.h"
#include "http/core/servers.h"
#include "vigil/core/log.h"

namespace vigil::http {

void PhaseEngine::add(HttpPhase phase, PhaseHandler handler) {
  added_[static_cast<std::size_t>(phase)].push_back(handler);
}

void PhaseEngine::build() {
  steps_.clear();
  log_ = added_[static_cast<std::size_t>(HttpPhase::kLog)];
  for (std::size_t p = 0; p < kPhaseCount; ++p) {
    start_[p] = static_cast<std::uint16_t>(steps_.size());
    if (static_cast<HttpPhase>(p) == HttpPhase::kLog) continue;  // run by finalize_request
    for (PhaseHandler h : added_[p]) steps_.push_back({static_cast<HttpPhase>(p), h, 0});
  }
  start_[kPhaseCount] = static_cast<std::uint16_t>(steps_.size());
  for (std::size_t p = 0; p < kPhaseCount; ++p) {
    for (std::uint16_t i = start_[p]; i < start_[p + 1]; ++i) steps_[i].next = start_[p + 1];
  }
}

void run_phases(Request& r) {
  const PhaseEngine& engine = *r.srv->phases;
  while (r.phase_step < engine.size()) {
    const PhaseEngine::Step& s = engine.step(r.phase_step);
    if (s.phase == HttpPhase::kAccess && r.parent != nullptr) {
      // A subrequest's access is its parent's (nginx skips the phase too).
      r.phase_step = s.next;
      continue;
    }
    const int rc = s.handler(r);
    switch (rc) {
      case kPhaseDeclined:
        ++r.phase_step;
        continue;
      case kPhaseNext:
        r.phase_step = s.next;
        continue;
      case kPhaseJump:
        continue;
      case kPhaseDone:
      case kPhaseSuspended:
        return;
      default:
        break;
    }
    // A status: the request ends with it. A body still unread is left to
    // the lingering close.
    if (rc >= 100) {
      if (!r.body.discarded && (r.check.chunked || r.check.content_length > 0)) {
        r.lingering = true;
      }
      finalize_error(r, rc);
    } else {
      VIGIL_LOG(*r.c->log, kAlert, 0, "*%llu phase handler returned %d",
                static_cast<unsigned long long>(r.c->number), rc);
      finalize_error(r, 500);
    }
    return;
  }
  // Every content handler answers or declines to the static one, which
  // always answers: running off the end is a bug.
  VIGIL_LOG(*r.c->log, kAlert, 0, "*%llu no phase handler answered",
            static_cast<unsigned long long>(r.c->number));
  finalize_error(r, 500);
}

int internal_redirect(Request& r) {
  if (++r.redirects > kMaxRedirects) {
    VIGIL_LOG(*r.c->log, kError, 0,
              "*%llu rewrite or internal redirection cycle while internally redirecting to "
              "\"%.*s\"",
              static_cast<unsigned long long>(r.c->number), static_cast<int>(r.uri.size()),
              r.uri.data());
    return 500;
  }
  r.uri_redirected = true;
  r.internal = true;
  r.phase_step = r.srv->phases->start(HttpPhase::kServerRewrite);
  return kPhaseJump;
}

int named_location_redirect(Request& r, std::string_view name) {
  const HttpLocConf* loc = find_named_location(*r.srv, name);
  if (loc == nullptr) {
    VIGIL_LOG(*r.c->log, kError, 0, "*%llu could not find named location \"%.*s\"",
              static_cast<unsigned long long>(r.c->number), static_cast<int>(name.size()),
              name.data());
    return 500;
  }
  if (++r.redirects > kMaxRedirects) {
    VIGIL_LOG(*r.c->log, kError, 0,
              "*%llu rewrite or internal redirection cycle while redirect to named location "
              "\"%.*s\"",
              static_cast<unsigned long long>(r.c->number), static_cast<int>(name.size()),
              name.data());
    return 500;
  }
  // r.uri is unchanged: a proxy_pass without a URI still sends the client's.
  r.uri_changed = false;
  r.internal = true;
  r.loc = conf_for_method(loc, r.line.method);
  r.if_content = nullptr;
  use_error_log(*r.c, *r.loc);
  r.phase_step = r.srv->phases->start(HttpPhase::kRewrite);
  return kPhaseJump;
}

}  // namespace vigil::http
