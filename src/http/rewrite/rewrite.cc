// The rewrite module's directives and the program each level runs
// (rewrite.h). Evaluated values live in the request's memory
// (request_vars.h); nothing is allocated from the heap per request.
#include "http/rewrite/rewrite.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "codec/tokens.h"
#include "core/conf/module.h"
#include "core/conf/scope.h"
#include "http/core/conf.h"
#include "http/core/module.h"
#include "http/core/phases.h"
#include "http/core/request.h"
#include "http/filters/limit_rate.h"
#include "http/static/disable_symlinks.h"
#include "http/static/open_file_cache.h"
#include "http/static/open_file_cache_conf.h"
#include "vigil/core/log.h"

namespace vigil::http {
namespace {

bool is_url(std::string_view s) {
  return s.starts_with("http://") || s.starts_with("https://") || s.starts_with("$scheme");
}

// ---- directives ---------------------------------------------------------------------

Status set_rewrite(const DirectiveCall& call, RewriteConf& conf) {
  RewriteOp op;
  op.kind = RewriteOp::kRewrite;
  op.where = call.where();
  auto re = compile_http_regex(call.arg(0), /*caseless=*/false);
  if (!re) return call.error(re.status().message());
  op.re = std::make_shared<const HttpRegex>(std::move(re.value()));
  // The part from the first '?' on is the new arguments: compiled apart,
  // because a capture there is encoded as an argument.
  const std::string& replacement = call.arg(1);
  const std::size_t q = replacement.find('?');
  auto t = VarTemplate::compile(std::string_view(replacement).substr(0, q));
  if (!t) return call.error(t.status().message());
  op.replacement = std::move(t.value());
  if (q != std::string::npos) {
    auto a = VarTemplate::compile(std::string_view(replacement).substr(q));
    if (!a) return call.error(a.status().message());
    op.replacement_args = std::move(a.value());
  }
  op.url = is_url(replacement);
  if (call.arg_count() == 3) {
    const std::string& f = call.arg(2);
    if (f == "last") {
      op.flag = RewriteFlag::kLast;
    } else if (f == "break") {
      op.flag = RewriteFlag::kBreak;
    } else if (f == "redirect") {
      op.flag = RewriteFlag::kRedirect;
    } else if (f == "permanent") {
      op.flag = RewriteFlag::kPermanent;
    } else {
      return call.error("invalid parameter \"" + f + "\"");
    }
  }
  conf.ops.push_back(std::move(op));
  return Status::ok();
}

Status set_return(const DirectiveCall& call, RewriteConf& conf) {
  auto ret = parse_return(call);
  if (!ret) return ret.status();
  RewriteOp op;
  op.kind = RewriteOp::kReturn;
  op.where = call.where();
  op.ret = ret.value();
  if (conf.ret == nullptr) conf.ret = op.ret;
  conf.ops.push_back(std::move(op));
  return Status::ok();
}

Status set_break(const DirectiveCall& call, RewriteConf& conf) {
  RewriteOp op;
  op.kind = RewriteOp::kBreak;
  op.where = call.where();
  conf.ops.push_back(std::move(op));
  return Status::ok();
}

Status set_set(const DirectiveCall& call, RewriteConf& conf) {
  // The built-in variables `set` may change, as nginx's (its "changeable"
  // ones): $limit_rate and $args.
  const bool limit_rate = iequals(call.arg(0), "$limit_rate");
  if (limit_rate || iequals(call.arg(0), "$args")) {
    RewriteOp op;
    op.kind = limit_rate ? RewriteOp::kSetLimitRate : RewriteOp::kSetArgs;
    op.where = call.where();
    auto t = VarTemplate::compile(call.arg(1));
    if (!t) return call.error(t.status().message());
    op.value = std::move(t.value());
    conf.ops.push_back(std::move(op));
    return Status::ok();
  }
  auto name = declared_variable_word(call.arg(0));
  if (!name) return call.error(name.status().message());
  RewriteOp op;
  op.kind = RewriteOp::kSet;
  op.where = call.where();
  op.var = declare_variable(name.value());
  auto t = VarTemplate::compile(call.arg(1));
  if (!t) return call.error(t.status().message());
  op.value = std::move(t.value());
  conf.ops.push_back(std::move(op));
  return Status::ok();
}

// The condition's words without the parentheses around them:
// "($a" "=" "b)", "(" "$a" ")", "(-f" "$x)".
Result<IfCondition> parse_condition(const DirectiveCall& call) {
  std::vector<std::string> w;
  for (std::size_t i = 0; i < call.arg_count(); ++i) w.push_back(call.arg(i));
  if (w.empty() || w.front().empty() || w.front()[0] != '(') {
    return Status::error("invalid condition \"" + (w.empty() ? std::string() : w.front()) + "\"");
  }
  w.front().erase(0, 1);
  if (w.front().empty()) w.erase(w.begin());
  // The parser drops a ')' that follows a closing quote; otherwise it ends
  // the last word, or is a word of its own.
  if (!w.empty() && w.back() == ")") {
    w.pop_back();
  } else if (!w.empty() && !w.back().empty() && w.back().back() == ')') {
    w.back().pop_back();
  }
  if (w.empty()) return Status::error("invalid condition \"" + call.arg(0) + "\"");

  IfCondition c;
  const auto compile = [&](const std::string& text, VarTemplate& out) -> Status {
    auto t = VarTemplate::compile(text);
    if (!t) return t.status();
    out = std::move(t.value());
    return Status::ok();
  };
  if (w.size() == 1) {
    if (w[0].empty() || w[0][0] != '$') return Status::error("invalid condition \"" + w[0] + "\"");
    c.kind = IfCondition::kValue;
    if (Status s = compile(w[0], c.left); !s) return s;
    return c;
  }
  if (w.size() == 2) {
    std::string_view op = w[0];
    if (op.starts_with("!")) {
      c.negate = true;
      op.remove_prefix(1);
    }
    if (op == "-f") {
      c.kind = IfCondition::kFile;
    } else if (op == "-d") {
      c.kind = IfCondition::kDir;
    } else if (op == "-e") {
      c.kind = IfCondition::kExists;
    } else if (op == "-x") {
      c.kind = IfCondition::kExec;
    } else {
      return Status::error("invalid condition \"" + w[0] + "\"");
    }
    if (Status s = compile(w[1], c.left); !s) return s;
    return c;
  }
  if (w.size() != 3) return Status::error("invalid condition \"" + w[0] + "\"");
  if (w[0].empty() || w[0][0] != '$') return Status::error("invalid condition \"" + w[0] + "\"");
  if (Status s = compile(w[0], c.left); !s) return s;
  const std::string& op = w[1];
  if (op == "=" || op == "!=") {
    c.kind = op == "=" ? IfCondition::kEqual : IfCondition::kNotEqual;
    if (Status s = compile(w[2], c.right); !s) return s;
    return c;
  }
  if (op == "~" || op == "~*" || op == "!~" || op == "!~*") {
    c.kind = op[0] == '!' ? IfCondition::kNoMatch : IfCondition::kMatch;
    auto re = compile_http_regex(w[2], op.back() == '*');
    if (!re) return re.status();
    c.re = std::make_shared<const HttpRegex>(std::move(re.value()));
    return c;
  }
  return Status::error("unexpected \"" + op + "\" in condition");
}

Status set_if(const DirectiveCall& call) {
  const ConfScope& scope = call.scope();
  const HttpModule& m = rewrite_module();
  const std::size_t at =
      call.env().modules != nullptr ? call.env().modules->index_of(m.conf()) : ModuleRegistry::npos;
  auto* conf = at == ModuleRegistry::npos ? nullptr
                                          : static_cast<RewriteConf*>(scope.conf(at, m.loc_spec()));
  if (conf == nullptr) return call.error("internal error: no rewrite conf for \"if\"");
  if (is_noname_scope(call.env(), scope)) return call.error("\"if\" directive is not allowed here");
  auto c = parse_condition(call);
  if (!c) return call.error(c.status().message());
  RewriteOp op;
  op.kind = RewriteOp::kIf;
  op.where = call.where();
  op.cond = std::make_shared<const IfCondition>(std::move(c.value()));
  // The loader has just opened the block's scope as the last child.
  op.if_scope = scope.children().back().get();
  conf->ops.push_back(std::move(op));
  return Status::ok();
}

// ---- the program ------------------------------------------------------------------

// Stops the level's program without an answer (break, rewrite last/break).
constexpr int kStop = -100;
// A `return` answered (its kPhaseDone, which is 0, means "go on" here).
constexpr int kAnswered = -101;

const RewriteConf& rewrite_conf(const HttpLocConf& loc) {
  return loc_conf<RewriteConf>(loc, rewrite_module());
}

// The request's memory holding t's value for r; null when none is left.
const char* evaluate(Request& r, const VarTemplate& t, std::size_t& len) {
  const std::size_t n = t.length(r);
  char* mem = request_alloc(r, n + 1);
  if (mem == nullptr) return nullptr;
  len = static_cast<std::size_t>(t.write(r, mem) - mem);
  mem[len] = '\0';
  return mem;
}

// The file tests (-f -d -e -x) look at the file as nginx's do: through the
// location's open_file_cache when it has one, else by stat(2), or under a
// disable_symlinks rule by opening the file as that rule says, so that a
// refused link is not found. False when the file is not there.
bool test_file(Request& r, const char* name, OpenFileInfo& info) {
  const HttpLocConf* loc = r.loc;
  if (loc == nullptr || (open_file_cache_conf(*loc).cache == nullptr &&
                         disable_symlinks_conf(*loc).mode == DisableSymlinks::kOff)) {
    struct stat st;
    if (::stat(name, &st) == -1) return false;
    info.is_dir = S_ISDIR(st.st_mode);
    info.is_file = S_ISREG(st.st_mode);
    info.is_exec = (st.st_mode & S_IXUSR) != 0;
    return true;
  }
  FileRef ref;
  open_file(r, *loc, name, info, ref);
  drop(r, ref);
  return info.err == 0;
}

int test_condition(Request& r, const IfCondition& c, bool& result) {
  std::size_t len = 0;
  const char* left = evaluate(r, c.left, len);
  if (left == nullptr) return 500;
  const std::string_view v(left, len);
  switch (c.kind) {
    case IfCondition::kValue:
      result = !(v.empty() || v == "0");
      return 0;
    case IfCondition::kEqual:
    case IfCondition::kNotEqual: {
      std::size_t rlen = 0;
      const char* right = evaluate(r, c.right, rlen);
      if (right == nullptr) return 500;
      result = (v == std::string_view(right, rlen)) == (c.kind == IfCondition::kEqual);
      return 0;
    }
    case IfCondition::kMatch:
    case IfCondition::kNoMatch: {
      const int rc = match_with_captures(r, *c.re, v);
      if (rc < 0) return 500;
      result = (rc > 0) == (c.kind == IfCondition::kMatch);
      return 0;
    }
    case IfCondition::kFile:
    case IfCondition::kDir:
    case IfCondition::kExists:
    case IfCondition::kExec: {
      OpenFileInfo info;
      const bool found = test_file(r, left, info);
      bool yes = false;
      if (c.kind == IfCondition::kFile) yes = found && info.is_file;
      if (c.kind == IfCondition::kDir) yes = found && info.is_dir;
      if (c.kind == IfCondition::kExists) yes = found;
      if (c.kind == IfCondition::kExec) yes = found && info.is_exec;
      result = yes != c.negate;
      return 0;
    }
  }
  return 500;
}

// rewrite: on a match, a redirect (a status) or a new URI (kStop, or 0 to go
// on); `uri_changed` tells the post-rewrite phase to choose the location again.
int run_rewrite(Request& r, const RewriteConf& conf, const RewriteOp& op, bool& uri_changed) {
  const int rc = match_with_captures(r, *op.re, r.uri);
  if (rc < 0) return 500;
  if (rc == 0) {
    if (conf.log) {
      VIGIL_LOG(*r.c->log, kNotice, 0, "*%llu \"%s\" does not match \"%.*s\"",
                static_cast<unsigned long long>(r.c->number), op.re->re.pattern().c_str(),
                static_cast<int>(r.uri.size()), r.uri.data());
    }
    return 0;
  }
  if (conf.log) {
    VIGIL_LOG(*r.c->log, kNotice, 0, "*%llu \"%s\" matches \"%.*s\"",
              static_cast<unsigned long long>(r.c->number), op.re->re.pattern().c_str(),
              static_cast<int>(r.uri.size()), r.uri.data());
  }
  // As nginx's script engine: when the client's path was percent-encoded
  // (or had a '+'), a capture in the new arguments is encoded as an
  // argument; a redirect's target has its variables decoded (a URL passed
  // in an argument), its captures encoded where decoding would not restore
  // them. Literal text is kept as written.
  const bool redirect =
      op.url || op.flag == RewriteFlag::kRedirect || op.flag == RewriteFlag::kPermanent;
  const std::string_view path = r.line.path;
  const bool quoted = path.find_first_of("%+") != std::string_view::npos;
  const VarEscape head_coding = !redirect ? VarEscape::kNone
                                : quoted  ? VarEscape::kRedirectQuoted
                                          : VarEscape::kRedirect;
  const VarEscape args_coding = quoted ? VarEscape::kUriArgs : VarEscape::kNone;
  const std::size_t room =
      op.replacement.length(r, head_coding) + op.replacement_args.length(r, args_coding);
  char* value = request_alloc(r, room + 1);
  if (value == nullptr) return 500;
  char* end = op.replacement.write(r, value, head_coding);
  end = op.replacement_args.write(r, end, args_coding);
  std::string_view repl(value, static_cast<std::size_t>(end - value));
  // A final '?' keeps the request's arguments off the new URI.
  bool keep_args = true;
  if (repl.ends_with("?")) {
    repl.remove_suffix(1);
    keep_args = false;
  }
  const std::string_view args = r.line.has_query ? r.line.query : std::string_view();
  const bool has_q = repl.find('?') != std::string_view::npos;
  const bool add_args = keep_args && !args.empty();
  // The new target with the request's arguments after its own.
  const std::size_t total = repl.size() + (add_args ? 1 + args.size() : 0);
  char* target = request_alloc(r, total + 1);
  if (target == nullptr) return 500;
  std::memcpy(target, repl.data(), repl.size());
  std::size_t n = repl.size();
  if (add_args) {
    target[n++] = has_q ? '&' : '?';
    std::memcpy(target + n, args.data(), args.size());
    n += args.size();
  }
  const std::string_view full(target, n);

  if (op.url || op.flag == RewriteFlag::kRedirect || op.flag == RewriteFlag::kPermanent) {
    if (!set_redirect_location(r, full)) return 500;
    return op.flag == RewriteFlag::kPermanent ? 301 : 302;
  }
  if (repl.empty() || repl.substr(0, repl.find('?')).empty()) {
    VIGIL_LOG(*r.c->log, kError, 0, "*%llu the rewritten URI has a zero length",
              static_cast<unsigned long long>(r.c->number));
    return 500;
  }
  if (!set_request_uri_and_args(r, full)) {
    VIGIL_LOG(*r.c->log, kError, 0, "*%llu the rewritten URI is too long",
              static_cast<unsigned long long>(r.c->number));
    return 500;
  }
  if (!keep_args && !has_q) {
    r.line.query = {};
    r.line.has_query = false;
  }
  r.uri_redirected = true;  // not the client's URI any more (proxy_pass sends this one)
  r.internal = true;
  if (conf.log) {
    VIGIL_LOG(*r.c->log, kNotice, 0, "*%llu rewritten data: \"%.*s\", args: \"%.*s\"",
              static_cast<unsigned long long>(r.c->number), static_cast<int>(r.uri.size()),
              r.uri.data(), static_cast<int>(r.line.query.size()), r.line.query.data());
  }
  if (op.flag == RewriteFlag::kBreak) {
    uri_changed = false;
    return kStop;
  }
  uri_changed = true;
  return op.flag == RewriteFlag::kLast ? kStop : 0;
}

const HttpLocConf* if_block_conf(const HttpLocConf& level, const ConfScope* scope) {
  for (const auto& b : level.if_blocks) {
    if (b.scope == scope) return b.loc;
  }
  return nullptr;
}

// Runs `level`'s program (and the blocks of its true conditions). Returns 0
// when it ran to its end, kStop, a status, or a phase code of `return`.
int run_program(Request& r, const HttpLocConf& level, bool& uri_changed) {
  const RewriteConf& conf = rewrite_conf(level);
  for (const RewriteOp& op : conf.ops) {
    switch (op.kind) {
      case RewriteOp::kReturn: {
        const int rc = run_return(r, *op.ret);
        // Waiting for the request body: the phase comes back to it.
        if (rc == kPhaseSuspended) r.ctx[rewrite_module().index()] = const_cast<ReturnConf*>(op.ret.get());
        return rc == kPhaseDone ? kAnswered : rc;
      }
      case RewriteOp::kBreak:
        return kStop;
      case RewriteOp::kSet: {
        std::size_t len = 0;
        const char* v = evaluate(r, op.value, len);
        if (v == nullptr || !set_user_variable(r, op.var, std::string_view(v, len))) return 500;
        break;
      }
      case RewriteOp::kSetLimitRate: {
        std::size_t len = 0;
        const char* v = evaluate(r, op.value, len);
        if (v == nullptr) return 500;
        (void)set_limit_rate(r, std::string_view(v, len));  // an invalid size is logged, not set
        break;
      }
      case RewriteOp::kSetArgs: {
        // The request's arguments from now on ($args, $arg_*, what a proxy
        // sends); the URI is no longer the client's as it came (nginx's
        // valid_unparsed_uri cleared): upstreams send r.uri escaped, then
        // the arguments.
        std::size_t len = 0;
        const char* v = evaluate(r, op.value, len);
        if (v == nullptr) return 500;
        r.line.query = std::string_view(v, len);
        r.line.has_query = true;
        r.uri_redirected = true;
        break;
      }
      case RewriteOp::kRewrite: {
        const int rc = run_rewrite(r, conf, op, uri_changed);
        if (rc != 0) return rc;
        break;
      }
      case RewriteOp::kIf: {
        bool yes = false;
        if (const int rc = test_condition(r, *op.cond, yes); rc != 0) return rc;
        if (!yes) break;
        const HttpLocConf* block = if_block_conf(level, op.if_scope);
        if (block == nullptr) return 500;
        // The block's conf is the request's from now on (nginx's "if" in a
        // location: its content handler and settings apply).
        if (r.loc->content != nullptr) r.if_content = r.loc->content;
        r.loc = block;
        use_error_log(*r.c, *block);
        const int rc = run_program(r, *block, uri_changed);
        if (rc != 0) return rc;
        break;
      }
    }
  }
  return 0;
}

int run_level(Request& r, const HttpLocConf& level) {
  // A `return` that waited for the request body goes on where it was.
  void*& pending = r.ctx[rewrite_module().index()];
  if (pending != nullptr) {
    const int rc = run_return(r, *static_cast<const ReturnConf*>(pending));
    if (rc != kPhaseSuspended) pending = nullptr;
    return rc;
  }
  if (rewrite_conf(level).ops.empty()) return kPhaseDeclined;
  bool uri_changed = false;
  const int rc = run_program(r, level, uri_changed);
  if (uri_changed) r.uri_changed = true;
  if (rc == 0 || rc == kStop) return kPhaseDeclined;
  return rc == kAnswered ? kPhaseDone : rc;
}

int server_rewrite_handler(Request& r) {
  r.loc = r.srv->loc;
  const int rc = run_level(r, *r.srv->loc);
  // A server-level rewrite needs no second search: find-config comes next.
  r.uri_changed = false;
  return rc;
}

int rewrite_handler(Request& r) { return run_level(r, *r.loc); }

// nginx's post-rewrite phase: a URI the location's rewrites changed is
// matched against the locations again (counted with internal redirects).
int post_rewrite_handler(Request& r) {
  if (!r.uri_changed) return kPhaseNext;
  r.uri_changed = false;
  if (++r.redirects > kMaxRedirects) {
    VIGIL_LOG(*r.c->log, kError, 0,
              "*%llu rewrite or internal redirection cycle while processing \"%.*s\"",
              static_cast<unsigned long long>(r.c->number), static_cast<int>(r.uri.size()),
              r.uri.data());
    return 500;
  }
  r.phase_step = r.srv->phases->start(HttpPhase::kFindConfig);
  return kPhaseJump;
}

}  // namespace

const HttpModule& rewrite_module() {
  static const HttpModule* module = [] {
    auto* m = new HttpModule("http_rewrite");  // never destroyed: used until exit
    auto loc = m->add_loc_conf<RewriteConf>();  // the flags inherit; the program does not
    constexpr ConfContextMask kLevels = kHttpSrvConf | kHttpLocConf;
    constexpr ConfContextMask kHttpAny = kHttpMainConf | kLevels;
    m->conf().add("return", kLevels, Arity::between(1, 2), loc.custom(set_return)).multiple = true;
    m->conf().add("rewrite", kLevels, Arity::between(2, 3), loc.custom(set_rewrite)).multiple =
        true;
    m->conf().add("set", kLevels, Arity::exactly(2), loc.custom(set_set)).multiple = true;
    m->conf().add("break", kLevels, Arity::none(), loc.custom(set_break)).multiple = true;
    set_if_block_handler(set_if);
    m->conf().add("rewrite_log", kHttpAny, Arity::on_off(), loc.flag(&RewriteConf::log, false));
    return m;
  }();
  return *module;
}

const ReturnConf* location_return(const HttpLocConf& loc) { return rewrite_conf(loc).ret.get(); }

void add_rewrite_phases(PhaseEngine& engine) {
  engine.add(HttpPhase::kServerRewrite, server_rewrite_handler);
  engine.add(HttpPhase::kRewrite, rewrite_handler);
  engine.add(HttpPhase::kPostRewrite, post_rewrite_handler);
}

}  // namespace vigil::http
