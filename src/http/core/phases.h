#pragma once
// The phase engine (nginx's ngx_http_core_run_phases and its phase_engine):
// once a request's head is read and its server chosen, it runs through
// nginx's phases in order. Modules register handlers for the phases they
// take part in (http/core/modules.cc lists the modules); the engine lays them
// out once per configuration as a flat array of steps, and a request keeps
// only the index of the step it is at (Request::phase_step).
//
//   post-read -> server-rewrite -> find-config -> rewrite -> post-rewrite
//     -> pre-access -> access -> post-access -> try-files -> content -> log
//
// find-config is the engine's own step (the location for r.uri); content
// runs the location's content handler when it has one (proxy_pass,
// stub_status, ...), else the content phase's handlers (static files). The
// log phase runs when the request ends (finalize_request), whatever ended it.
//
// A handler returns one of the codes below, or an HTTP status (>= 100) that
// ends the request with that status (finalize_error, error_page applies).
// A handler that waits (a limit_req delay, a body being read) returns
// kPhaseSuspended and later calls run_phases(r), which enters the same step
// again: such a handler must know it ran (its module's per-request state).
// An internal redirect (try_files' fallback) sets r.uri and calls
// internal_redirect(), which restarts the request at server-rewrite, at most
// kMaxRedirects times per request (nginx's 10-cycle limit, then a 500).

#include <cstdint>
#include <string_view>
#include <vector>

namespace vigil::http {

struct Request;

enum class HttpPhase : std::uint8_t {
  kPostRead,
  kServerRewrite,
  kFindConfig,
  kRewrite,
  kPostRewrite,
  kPreAccess,
  kAccess,
  kPostAccess,
  kTryFiles,
  kContent,
  kLog,
};
inline constexpr std::size_t kPhaseCount = static_cast<std::size_t>(HttpPhase::kLog) + 1;

// What a phase handler returns (HTTP statuses are positive).
inline constexpr int kPhaseDone = 0;         // the response is on its way, or the request ended
inline constexpr int kPhaseDeclined = -1;    // nothing to do here: the next handler
inline constexpr int kPhaseNext = -2;        // this phase is over: the first handler of the next
inline constexpr int kPhaseSuspended = -3;   // waiting; run_phases(r) continues at this step
inline constexpr int kPhaseJump = -4;        // r.phase_step was set (internal_redirect)

// Internal redirects (try_files, error_page, later rewrite) one request may make.
inline constexpr int kMaxRedirects = 10;

using PhaseHandler = int (*)(Request& r);

class PhaseEngine {
 public:
  struct Step {
    HttpPhase phase;
    PhaseHandler handler;
    std::uint16_t next;  // the first step of the next phase
  };

  // At configuration time, in module order (handlers of one phase run in
  // the order they were added).
  void add(HttpPhase phase, PhaseHandler handler);
  // Lays the steps out; the engine is read-only afterwards, shared by every
  // worker (it lives in the configuration's HttpServers).
  void build();

  const Step& step(std::uint16_t i) const { return steps_[i]; }
  std::uint16_t size() const { return static_cast<std::uint16_t>(steps_.size()); }
  // The first step of `phase` (or of the first non-empty phase after it).
  std::uint16_t start(HttpPhase phase) const { return start_[static_cast<std::size_t>(phase)]; }
  // The log phase's handlers, run by finalize_request.
  const std::vector<PhaseHandler>& log_handlers() const { return log_; }

 private:
  std::vector<PhaseHandler> added_[kPhaseCount];
  std::vector<Step> steps_;
  std::vector<PhaseHandler> log_;
  std::uint16_t start_[kPhaseCount + 1] = {};
};

// Runs r from r.phase_step until a handler answers, suspends or fails.
void run_phases(Request& r);
// The request's URI (r.uri, and its arguments) was replaced: match the
// locations again from server-rewrite. Returns kPhaseJump, or 500 (logged)
// past kMaxRedirects.
int internal_redirect(Request& r);
// An internal redirect to the server's "location @name" (nginx's
// ngx_http_named_location): r.uri stays, the request takes that location
// and goes on at its rewrite phase. Returns kPhaseJump, or 500 (logged)
// when there is no such location or past kMaxRedirects.
int named_location_redirect(Request& r, std::string_view name);
// Every module's phase handlers, for a configuration's engine (modules.cc).
void register_phase_handlers(PhaseEngine& engine);

}  // namespace vigil::http
