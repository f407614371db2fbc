// proxy_redirect (nginx's ngx_http_proxy_redirect and its rewrite handlers):
// the directive's rules, and the Location and Refresh fields of a response
// head rewritten by them once the response is accepted for the client.
//
// A rule is tried on the field's value (a Refresh's from after its "url="):
//   default            the proxy_pass URL ("http://host:port/uri", or with a
//                      final "/" when it has no URI) at the start becomes the
//                      location's name (or "/"); nothing for a proxy_pass
//                      with variables, whose URL is known per request
//   prefix repl        a value starting with prefix (variables evaluated,
//                      compared with case) has it replaced by repl
//   ~re repl, ~*re     a value matching re is replaced whole by repl, which
//                      reads the groups ($1...) of the match
// The first rule that matches decides. A level without proxy_redirect
// inherits its parent's rules; none anywhere (and not "off") means default.
#include <cstring>

#include "http/core/request_vars.h"
#include "http/proxy/header_rewrite.h"
#include "http/proxy/proxy.h"
#include "vigil/core/log.h"

namespace vigil::http::proxy {
namespace {

// `t` evaluated into the request's memory; false when none is left.
bool evaluate(Request& r, const VarTemplate& t, std::string_view& out) {
  if (t.is_literal()) {
    out = t.literal_text();
    return true;
  }
  const std::size_t n = t.length(r);
  char* mem = request_alloc(r, n + 1);
  if (mem == nullptr) return false;
  out = std::string_view(mem, static_cast<std::size_t>(t.write(r, mem) - mem));
  return true;
}

// The default rule's URL for this conf: "http[s]://" target, then the URI,
// or "/" when proxy_pass has none.
bool default_pattern(Request& r, const ProxyConf& p, std::string_view& out) {
  const std::string_view scheme = p.https ? "https://" : "http://";
  const std::string_view uri = p.has_uri ? std::string_view(p.uri) : std::string_view("/");
  const std::size_t n = scheme.size() + p.target.size() + uri.size();
  char* mem = request_alloc(r, n);
  if (mem == nullptr) return false;
  std::memcpy(mem, scheme.data(), scheme.size());
  std::memcpy(mem + scheme.size(), p.target.data(), p.target.size());
  std::memcpy(mem + scheme.size() + p.target.size(), uri.data(), uri.size());
  out = std::string_view(mem, n);
  return true;
}

enum class Rewrite { kNone, kDone, kError };

// The rules on `value` from offset `from`; kDone with the new value in `out`.
Rewrite apply_rules(Request& r, const ProxyConf& p, std::string_view value, std::size_t from,
                    std::string_view& out) {
  static const RedirectRule kDefault{.is_default = true};
  const RedirectRule* rules = p.redirects.data();
  std::size_t count = p.redirects.size();
  if (count == 0) {
    if (p.redirect_off) return Rewrite::kNone;
    rules = &kDefault;
    count = 1;
  }
  const std::string_view tail = value.substr(from);
  for (std::size_t i = 0; i < count; ++i) {
    const RedirectRule& rule = rules[i];
    std::string_view pattern;
    std::string_view replacement;
    std::size_t keep = 0;  // bytes of `tail` kept after the replacement
    if (rule.regex != nullptr) {
      const int rc = match_with_captures(r, *rule.regex, tail);
      if (rc < 0) return Rewrite::kError;
      if (rc == 0) continue;
      if (!evaluate(r, rule.replacement, replacement)) return Rewrite::kError;
    } else {
      if (rule.is_default) {
        if (p.variables || !p.enabled) continue;
        if (!default_pattern(r, p, pattern)) return Rewrite::kError;
        replacement = p.has_uri ? std::string_view(r.loc->name) : std::string_view("/");
      } else {
        if (!evaluate(r, rule.pattern, pattern)) return Rewrite::kError;
        if (!evaluate(r, rule.replacement, replacement)) return Rewrite::kError;
      }
      if (!tail.starts_with(pattern)) continue;
      keep = tail.size() - pattern.size();
    }
    const std::size_t n = from + replacement.size() + keep;
    char* mem = request_alloc(r, n);
    if (mem == nullptr) return Rewrite::kError;
    std::memcpy(mem, value.data(), from);
    std::memcpy(mem + from, replacement.data(), replacement.size());
    std::memcpy(mem + from + replacement.size(), tail.data() + tail.size() - keep, keep);
    out = std::string_view(mem, n);
    return Rewrite::kDone;
  }
  return Rewrite::kNone;
}

}  // namespace

bool rewrite_redirects(ProxyState& ps) {
  const ProxyConf& p = ps.pconf();
  ps.location = {};
  ps.location_field = UINT32_MAX;
  if (p.redirect_off && p.redirects.empty()) return true;
  Request& r = *ps.r;
  for (std::uint32_t i = 0; i < ps.nfields; ++i) {
    HeaderField& f = ps.fields[i];
    const bool location = iequals(f.name, "location");
    std::size_t from = 0;
    if (!location) {
      if (!iequals(f.name, "refresh")) continue;
      from = refresh_url_offset(f.value);
      if (from == std::string_view::npos) continue;
    } else if (ps.location_field != UINT32_MAX) {
      continue;  // the first Location is the one sent as the server's own
    }
    std::string_view out;
    const Rewrite rc = apply_rules(r, p, f.value, from, out);
    if (rc == Rewrite::kError) {
      VIGIL_LOG(*r.c->log, kAlert, 0, "*%llu out of memory rewriting \"%.*s\"",
                static_cast<unsigned long long>(r.c->number), static_cast<int>(f.name.size()),
                f.name.data());
      return false;
    }
    if (rc == Rewrite::kNone) continue;
    if (location && !out.empty()) {
      ps.location = out;
      ps.location_field = i;
    } else {
      f.value = out;
    }
  }
  return true;
}

// proxy_redirect default | off | redirect replacement
Status set_redirect(const DirectiveCall& call, ProxyConf& p) {
  if (p.redirect_off) return call.error("\"proxy_redirect\" directive is duplicate");
  if (call.arg_count() == 1) {
    const std::string& a = call.arg(0);
    if (a == "off" || a == "false") {
      if (!p.redirects.empty()) return call.error("\"proxy_redirect\" directive is duplicate");
      p.redirect_off = true;
      return Status::ok();
    }
    if (a != "default") return call.error("invalid parameter \"" + a + "\"");
    if (p.enabled && p.variables) {
      return call.error(
          "\"proxy_redirect default\" cannot be used with \"proxy_pass\" directive with "
          "variables");
    }
    p.redirects.push_back(RedirectRule{.is_default = true});
    return Status::ok();
  }
  RedirectRule rule;
  const std::string& pattern = call.arg(0);
  if (!pattern.empty() && pattern[0] == '~') {
    const bool caseless = pattern.size() > 1 && pattern[1] == '*';
    auto re = compile_http_regex(std::string_view(pattern).substr(caseless ? 2 : 1), caseless);
    if (!re) return call.error(re.status().message());
    rule.regex = std::make_shared<const HttpRegex>(std::move(re.value()));
  } else {
    auto t = VarTemplate::compile(pattern);
    if (!t) return call.error(t.status().message());
    rule.pattern = std::move(t.value());
  }
  auto t = VarTemplate::compile(call.arg(1));
  if (!t) return call.error(t.status().message());
  rule.replacement = std::move(t.value());
  p.redirects.push_back(std::move(rule));
  return Status::ok();
}

}  // namespace vigil::http::proxy
