// auth_request / auth_request_set (nginx's ngx_http_auth_request_module):
// a subrequest to the location's auth URI decides the access phase; its
// response head is kept and its body dropped (subrequest.h), then
// auth_request_set's values are evaluated in the subrequest (its
// $upstream_http_*, $sent_http_*) and set in the request.
#include "http/access/auth_request.h"

#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "http/core/module.h"
#include "http/core/phases.h"
#include "http/core/request.h"
#include "http/core/request_vars.h"
#include "http/core/subrequest.h"
#include "vigil/core/log.h"

namespace vigil::http {
namespace {

struct AuthRequestSet {
  std::uint32_t var = 0;  // the declared variable
  bool args = false;      // $args: the request's arguments are set instead
  VarTemplate value;
};

struct AuthRequestConf {
  std::string uri;  // empty: off
  std::vector<AuthRequestSet> vars;
};

// The request's state: one subrequest per pass through the access phase (an
// internal redirect or error_page that reaches an auth_request location
// again asks again, as nginx's ctx is cleared by the redirect).
struct AuthRequestCtx {
  int redirects = -1;  // r.redirects when the subrequest was started
  int saved_code = 0;
  int result = 0;
  bool running = false;
};

void resume_parent(Request& parent) {
  run_phases(parent);
}

const SubrequestHooks kHooks{subrequest_keep_header, subrequest_discard_body, resume_parent};

Status set_uri(const DirectiveCall& call, AuthRequestConf& conf) {
  const std::string& v = call.arg(0);
  conf.uri = v == "off" ? std::string() : v;
  return Status::ok();
}

Status set_var(const DirectiveCall& call, AuthRequestConf& conf) {
  AuthRequestSet s;
  const std::string& word = call.arg(0);
  if (word == "$args") {
    s.args = true;
  } else {
    auto name = declared_variable_word(word);
    if (!name) return call.error(name.status().message());
    s.var = declare_variable(name.value());
  }
  auto t = VarTemplate::compile(call.arg(1));
  if (!t) return call.error(t.status().message());
  s.value = std::move(t.value());
  conf.vars.push_back(std::move(s));
  return Status::ok();
}

// The subrequest's challenges, '\n'-separated, in r's memory: its own
// (auth_basic in the auth location), else its upstream's.
bool pass_challenges(Request& r, const Request& sr) {
  const HeadersOut& h = sr.headers_out;
  if (!h.www_authenticate.empty()) {
    char* mem = request_alloc(r, h.www_authenticate.size());
    if (mem == nullptr) return false;
    std::memcpy(mem, h.www_authenticate.data(), h.www_authenticate.size());
    r.headers_out.www_authenticate = std::string_view(mem, h.www_authenticate.size());
    return true;
  }
  std::size_t n = 0;
  for (std::uint32_t i = 0; i < h.nfields; ++i) {
    const HeaderField& f = h.fields[i];
    if (!f.omit && iequals(f.name, "www-authenticate")) n += f.value.size() + 1;
  }
  if (n == 0) return true;
  char* mem = request_alloc(r, n);
  if (mem == nullptr) return false;
  char* p = mem;
  for (std::uint32_t i = 0; i < h.nfields; ++i) {
    const HeaderField& f = h.fields[i];
    if (f.omit || !iequals(f.name, "www-authenticate")) continue;
    if (p != mem) *p++ = '\n';
    std::memcpy(p, f.value.data(), f.value.size());
    p += f.value.size();
  }
  r.headers_out.www_authenticate = std::string_view(mem, static_cast<std::size_t>(p - mem));
  return true;
}

// auth_request_set: each value evaluated in the subrequest, kept in r.
bool set_variables(Request& r, const Request& sr, const AuthRequestConf& conf) {
  for (const AuthRequestSet& s : conf.vars) {
    const std::size_t max = s.value.length(sr);
    char* mem = request_alloc(r, max + 1);
    if (mem == nullptr) return false;
    const std::size_t n = static_cast<std::size_t>(s.value.write(sr, mem) - mem);
    const std::string_view v(mem, n);
    if (s.args) {
      r.line.query = v;
      r.line.has_query = true;
      continue;
    }
    if (!set_user_variable(r, s.var, v)) return false;
  }
  return true;
}

// The subrequest has ended: what it means for r (nginx's rules).
int conclude(Request& r, const Request& sr, const AuthRequestConf& conf) {
  const auto number = static_cast<unsigned long long>(r.c->number);
  // Its head decides, as nginx's (which reads no body of it); a subrequest
  // that ended before any head counts by the status it ended with.
  const int status = sr.sub_header_sent ? sr.headers_out.status : sr.status > 0 ? sr.status : 500;
  if (!set_variables(r, sr, conf)) {
    VIGIL_LOG(*r.c->log, kAlert, 0, "*%llu no memory for auth_request_set", number);
    return 500;
  }
  if (status == 403) return 403;
  if (status == 401) return pass_challenges(r, sr) ? 401 : 500;
  if (status >= 200 && status < 300) return 0;
  VIGIL_LOG(*r.c->log, kError, 0, "*%llu auth request unexpected status: %d", number, status);
  return 500;
}

}  // namespace

int auth_request_check(Request& r, int& code) {
  const std::uint32_t slot = auth_request_module().index();
  auto* ctx = static_cast<AuthRequestCtx*>(r.ctx[slot]);
  const auto& conf = loc_conf<AuthRequestConf>(*r.loc, auth_request_module());
  if (ctx != nullptr && ctx->redirects == r.redirects) {
    if (ctx->running) {
      const Request* sr = r.waiting_on;
      if (sr == nullptr || sr->phase != Phase::kDone) return kPhaseSuspended;
      ctx->result = conclude(r, *sr, conf);
      ctx->running = false;
      release_subrequest(r);
    }
    code = ctx->saved_code;
    return ctx->result;
  }
  if (conf.uri.empty()) return kPhaseDeclined;
  if (ctx == nullptr) {
    void* mem = request_alloc(r, sizeof(AuthRequestCtx));
    if (mem == nullptr) return 500;
    ctx = new (mem) AuthRequestCtx;
    r.ctx[slot] = ctx;
  }
  ctx->redirects = r.redirects;
  ctx->saved_code = code;
  ctx->running = true;
  if (start_subrequest(r, conf.uri, kHooks) == nullptr) {
    ctx->running = false;
    ctx->result = 500;
    return 500;
  }
  return kPhaseSuspended;
}

const HttpModule& auth_request_module() {
  static const HttpModule* module = [] {
    auto* m = new HttpModule("http_auth_request");  // never destroyed: used until exit
    auto conf = m->add_loc_conf<AuthRequestConf>(
        {}, [](const ConfInit& ctx, const AuthRequestConf& parent, AuthRequestConf& child) {
          if (!ctx.is_set("auth_request")) child.uri = parent.uri;
          if (!ctx.is_set("auth_request_set")) child.vars = parent.vars;
          return Status::ok();
        });
    constexpr ConfContextMask kWhere = kHttpMainConf | kHttpSrvConf | kHttpLocConf;
    m->conf().add("auth_request", kWhere, Arity::exactly(1), conf.custom(set_uri));
    m->conf().add("auth_request_set", kWhere, Arity::exactly(2), conf.custom(set_var)).multiple =
        true;
    return m;
  }();
  return *module;
}

}  // namespace vigil::http
