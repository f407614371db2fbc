#include "http/core/post_action.h"

#include "http/charset/charset.h"
#include "http/core/module.h"
#include "http/core/phases.h"
#include "http/core/request.h"
#include "http/core/worker.h"
#include "http/filters/range.h"
#include "http/gzip/gzip.h"
#include "http/upstream/upstream.h"

namespace vigil::http {
namespace {

// The request's slot marks a post action that started (its value is only
// compared, never read through).
char running_mark;

Status set_target(const DirectiveCall& call, PostActionConf& conf) {
  const std::string& v = call.arg(0);
  conf.target = v == "off" ? std::string() : v;
  return Status::ok();
}

// What the response that is over still holds, given back before the post
// action's handlers make their own (nginx's post action runs in the same
// request: its file, its upstream are the response's, done).
void end_response(Request& r) {
  upstream_core::release(r);
  release_gzip(r);
  release_charset(r);
  release_range(r);
  release_file(r);
  if (r.obuf != nullptr) {
    r.hc->worker->buffers().put(r.obuf, r.obuf_size);
    r.obuf = nullptr;
    r.obuf_size = 0;
  }
  r.pending = nullptr;
  r.hbuf = Buf{};
  r.bbuf = Buf{};
  r.file_pos = r.file_end = 0;
  r.use_sendfile = false;
  r.body_changed = false;
  r.headers_out.restart_for(0);
  r.body_offset = 0;
  r.status = 0;
  r.error_page = false;
}

}  // namespace

bool in_post_action(const Request& r) {
  return r.ctx[post_action_module().index()] == &running_mark;
}

bool start_post_action(Request& r) {
  if (r.parent != nullptr || r.loc == nullptr || in_post_action(r)) return false;
  const std::string& target = loc_conf<PostActionConf>(*r.loc, post_action_module()).target;
  if (target.empty() || r.hc->stream != nullptr) return false;
  r.ctx[post_action_module().index()] = &running_mark;
  end_response(r);
  // As nginx: only the head would be asked for, and none is sent.
  r.header_only = true;
  r.phase = Phase::kWriting;
  int rc = 0;
  if (target.front() == '/') {
    rc = set_request_uri_and_args(r, target) ? internal_redirect(r) : 500;
  } else {
    rc = named_location_redirect(r, target);
  }
  if (rc != kPhaseJump) {
    // Logged where it failed; the request ends as it would have.
    finalize_request(r);
    return true;
  }
  run_phases(r);
  return true;
}

const HttpModule& post_action_module() {
  static const HttpModule* module = [] {
    auto* m = new HttpModule("http_post_action");  // never destroyed: used until exit
    auto conf = m->add_loc_conf<PostActionConf>(
        {}, [](const ConfInit& ctx, const PostActionConf& parent, PostActionConf& child) {
          if (!ctx.is_set("post_action")) child.target = parent.target;
          return Status::ok();
        });
    m->conf().add("post_action", kHttpMainConf | kHttpSrvConf | kHttpLocConf, Arity::exactly(1),
                  conf.custom(set_target));
    return m;
  }();
  return *module;
}

}  // namespace vigil::http
