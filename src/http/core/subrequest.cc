// Subrequests (subrequest.h): made from the parent, run through the phases,
// their end posted back to the parent.
#include "http/core/subrequest.h"

#include <memory>

#include "http/core/filters.h"
#include "http/core/phases.h"
#include "http/core/request.h"
#include "http/core/worker.h"
#include "vigil/core/log.h"
#include "vigil/event/loop.h"

namespace vigil::http {
namespace {

// The parent's sub_done: the subrequest it waited for has ended.
void sub_done_handler(Event& ev) {
  Request& parent = *ev.owner<Request>();
  // The parent is released with its subrequest and its posting taken off
  // the queue (free_request); the generation check keeps a stale event from
  // ever reaching a Request that was reused for another connection.
  if (parent.c == nullptr || parent.c->generation != parent.sub_generation ||
      parent.waiting_on == nullptr) {
    return;
  }
  use_error_log(*parent.c, *parent.loc);
  parent.waiting_on->sub_hooks->done(parent);
}

}  // namespace

Request* start_subrequest(Request& parent, std::string_view uri, const SubrequestHooks& hooks) {
  Connection& c = *parent.c;
  const auto number = static_cast<unsigned long long>(c.number);
  if (parent.sub_depth >= kMaxSubrequestDepth) {
    VIGIL_LOG(*c.log, kError, 0, "*%llu subrequests cycle while processing \"%.*s\"", number,
              static_cast<int>(uri.size()), uri.data());
    return nullptr;
  }
  Request* sr = parent.hc->worker->get_request();
  if (sr == nullptr) {
    VIGIL_LOG(*c.log, kAlert, 0, "*%llu out of memory for a subrequest", number);
    return nullptr;
  }
  std::destroy_at(sr);
  std::construct_at(sr);
  sr->hc = parent.hc;
  sr->c = parent.c;
  sr->srv = parent.srv;
  sr->loc = parent.loc;
  sr->parent = &parent;
  sr->sub_hooks = &hooks;
  sr->sub_depth = static_cast<std::uint8_t>(parent.sub_depth + 1);
  // The client's request line and fields, as views (the parent outlives it);
  // a GET without arguments and without a body.
  sr->line = parent.line;
  sr->line.method = Method::kGet;
  sr->line.method_name = "GET";
  sr->line.query = {};
  sr->line.has_query = false;
  sr->check = parent.check;
  sr->check.chunked = false;
  sr->check.content_length = -1;
  sr->check.expect_continue = false;
  sr->user_agent = parent.user_agent;
  sr->referer = parent.referer;
  sr->fields = parent.fields;
  sr->nfields = parent.nfields;
  sr->body.discarded = true;
  sr->limits_stage = 2;  // limit_req and limit_conn count the client's request once
  sr->phase = Phase::kWriting;
  sr->start_msec = clock::current_msec();
  sr->sent_start = c.sent;
  sr->internal = true;        // an `internal` location answers it
  sr->uri_redirected = true;  // the proxy sends its URI, not the client's
  if (!set_request_uri(*sr, uri)) {
    VIGIL_LOG(*c.log, kAlert, 0, "*%llu no memory for the subrequest's URI", number);
    parent.hc->worker->put_request(sr);  // holds nothing yet
    return nullptr;
  }
  parent.waiting_on = sr;
  parent.sub_done.data = &parent;
  parent.sub_done.handler = sub_done_handler;
  parent.sub_done.log = c.log;
  parent.sub_generation = c.generation;
  sr->phase_step = sr->srv->phases->start(HttpPhase::kServerRewrite);
  run_phases(*sr);
  return sr;
}

void subrequest_ended(Request& sr) {
  Request& parent = *sr.parent;
  sr.c->loop->post(parent.sub_done);
}

void release_subrequest(Request& parent) {
  Request* sr = parent.waiting_on;
  PostedQueue::remove(parent.sub_done);
  if (sr == nullptr) return;
  parent.waiting_on = nullptr;
  release_request(*sr);  // a nested one first, then its memory and upstream
  if (parent.c != nullptr) use_error_log(*parent.c, *parent.loc);
}

int subrequest_keep_header(Request& sr) {
  sr.sub_header_sent = true;
  sr.header_only = true;  // no body is made for it (nginx's sr->header_only)
  return 0;
}

int subrequest_discard_body(Request&, Chain* in) {
  for (Chain* cl = in; cl != nullptr; cl = cl->next) {
    Buf& b = *cl->buf;
    b.pos = b.last;
    if (b.in_file) b.file_pos = b.file_last;
  }
  return kBodyOk;
}

}  // namespace vigil::http
