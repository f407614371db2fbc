// Set-Cookie from the backend, rewritten for the client (nginx's
// proxy_cookie_domain, proxy_cookie_path and proxy_cookie_flags): the
// directives' parsing, and the rewrite made once per response head, into
// one worker buffer the response keeps (ProxyState::cookie_mem).
//
// A `domain` or `path` attribute value that matches a rule has its value
// replaced in place (the first matching rule of the list); a cookie named
// by a proxy_cookie_flags rule is written again with its Secure, HttpOnly
// and SameSite attributes as the rule says: one the rule sets replaces the
// cookie's own (in place), one the rule removes (nosecure...) is dropped,
// the others are kept; the flags the cookie lacked follow at the end.
#include <cstring>

#include "http/core/request_vars.h"
#include "http/core/worker.h"
#include "http/proxy/header_rewrite.h"
#include "http/proxy/proxy.h"
#include "vigil/core/log.h"

namespace vigil::http::proxy {
namespace {

constexpr std::size_t kMaxEvaluated = 256;  // a pattern or name longer than this never matches

bool is_space(char c) { return c == ' ' || c == '\t'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// `t` evaluated into `buf` (kMaxEvaluated bytes); false when it does not fit.
bool evaluate(const Request& r, const VarTemplate& t, char* buf, std::string_view& out) {
  if (t.is_literal()) {
    out = t.literal_text();
    return true;
  }
  if (t.length(r) > kMaxEvaluated) return false;
  out = std::string_view(buf, static_cast<std::size_t>(t.write(r, buf) - buf));
  return true;
}

std::string_view strip_dot(std::string_view s) {
  if (!s.empty() && s.front() == '.') s.remove_prefix(1);
  return s;
}

// The flags a proxy_cookie_flags rule sets for a cookie.
enum class Op : std::uint8_t { kKeep, kSet, kRemove };
struct FlagOps {
  Op secure = Op::kKeep;
  Op httponly = Op::kKeep;
  Op samesite = Op::kKeep;
  std::string_view samesite_value;  // "Strict", "Lax", "None"
};

// One flag word into `ops`; false when it is not one.
bool apply_flag(std::string_view f, FlagOps& ops) {
  if (iequals(f, "secure")) {
    ops.secure = Op::kSet;
  } else if (iequals(f, "nosecure")) {
    ops.secure = Op::kRemove;
  } else if (iequals(f, "httponly")) {
    ops.httponly = Op::kSet;
  } else if (iequals(f, "nohttponly")) {
    ops.httponly = Op::kRemove;
  } else if (iequals(f, "samesite=strict")) {
    ops.samesite = Op::kSet;
    ops.samesite_value = "Strict";
  } else if (iequals(f, "samesite=lax")) {
    ops.samesite = Op::kSet;
    ops.samesite_value = "Lax";
  } else if (iequals(f, "samesite=none")) {
    ops.samesite = Op::kSet;
    ops.samesite_value = "None";
  } else if (iequals(f, "nosamesite")) {
    ops.samesite = Op::kRemove;
  } else {
    return false;
  }
  return true;
}

// The value of an attribute "name=value" when its name is `name`.
bool attribute(std::string_view attr, std::string_view name, std::string_view& value) {
  const std::size_t eq = attr.find('=');
  if (eq == std::string_view::npos || !iequals(trim(attr.substr(0, eq)), name)) return false;
  value = attr.substr(eq + 1);
  return true;
}

class Writer {
 public:
  explicit Writer(char* p) : start_(p), p_(p) {}
  void put(std::string_view s) {
    std::memcpy(p_, s.data(), s.size());
    p_ += s.size();
  }
  std::string_view text() const { return {start_, static_cast<std::size_t>(p_ - start_)}; }
  char* end() const { return p_; }

 private:
  char* start_;
  char* p_;
};

// proxy_cookie_domain and proxy_cookie_path on `cookie`, written at `w`;
// false when no rule matched (nothing written). A domain is compared
// without its leading dot and without regard to case, a path as a prefix; a
// regular expression matches the whole value (a domain's without regard to
// case, as nginx), which the replacement then replaces.
bool rewrite_values(Request& r, const ProxyConf& p, std::string_view cookie, Writer& w,
                    bool& failed) {
  char pattern_buf[kMaxEvaluated];
  char repl_buf[kMaxEvaluated];
  bool changed = false;
  std::size_t copied = 0;  // cookie bytes before this point are written
  std::size_t at = cookie.find(';');
  CookieAttribute attr;
  for (; at != std::string_view::npos && next_cookie_attribute(cookie, at, attr); at = attr.end) {
    const bool domain = iequals(attr.name, "domain");
    const bool path = !domain && iequals(attr.name, "path");
    if ((!domain && !path) || attr.value_begin == attr.end) continue;
    const std::string_view v = attr.value;
    const std::size_t v_at = attr.value_begin;
    const auto& rules = domain ? p.cookie_domains : p.cookie_paths;
    for (const CookieRewrite& rule : rules) {
      std::string_view rep;
      std::string_view rest;
      bool whole = false;
      if (rule.regex != nullptr) {
        const int rc = match_with_captures(r, *rule.regex, v);
        if (rc < 0) {
          failed = true;
          return false;
        }
        if (rc == 0) continue;
        whole = true;
      } else {
        std::string_view pat;
        if (!evaluate(r, rule.pattern, pattern_buf, pat)) continue;
        if (domain) {
          if (!iequals(strip_dot(v), strip_dot(pat))) continue;
        } else {
          if (!v.starts_with(pat)) continue;
          rest = v.substr(pat.size());
        }
      }
      if (!evaluate(r, rule.replacement, repl_buf, rep)) continue;
      w.put(cookie.substr(copied, v_at - copied));
      if (whole) {
        w.put(rep);
      } else if (domain) {
        if (!v.empty() && v.front() == '.') w.put(".");
        w.put(strip_dot(rep));
      } else {
        w.put(rep);
        w.put(rest);
      }
      copied = v_at + v.size();
      changed = true;
      break;
    }
  }
  if (changed) w.put(cookie.substr(copied));
  return changed;
}

// The proxy_cookie_flags rule for the cookie named `name`: its flags in `ops`.
int find_flags(Request& r, const ProxyConf& p, std::string_view name, FlagOps& ops) {
  char buf[kMaxEvaluated];
  for (const CookieFlags& rule : p.cookie_flags) {
    if (rule.name_regex != nullptr) {
      const int rc = match_with_captures(r, *rule.name_regex, name);
      if (rc < 0) return -1;
      if (rc == 0) continue;
    } else {
      std::string_view n;
      if (!evaluate(r, rule.name, buf, n) || n != name) continue;
    }
    for (const VarTemplate& f : rule.flags) {
      std::string_view word;
      if (!evaluate(r, f, buf, word) || word.empty()) continue;
      apply_flag(word, ops);  // a word from a variable that is no flag is ignored
    }
    return 1;
  }
  return 0;
}

// `cookie` written again with the flags `ops`, at `w`.
void rewrite_flags(std::string_view cookie, const FlagOps& ops, Writer& w) {
  std::size_t end = cookie.find(';');
  w.put(trim(cookie.substr(0, end)));
  bool secure = false;
  bool httponly = false;
  bool samesite = false;
  while (end != std::string_view::npos) {
    const std::size_t begin = end + 1;
    end = cookie.find(';', begin);
    const std::string_view attr =
        trim(cookie.substr(begin, end == std::string_view::npos ? end : end - begin));
    if (attr.empty()) continue;
    std::string_view value;
    const std::string_view name = trim(attr.substr(0, attr.find('=')));
    if (iequals(name, "secure") && ops.secure != Op::kKeep) {
      if (ops.secure == Op::kSet && !secure) w.put("; Secure");
      secure = true;
      continue;
    }
    if (iequals(name, "httponly") && ops.httponly != Op::kKeep) {
      if (ops.httponly == Op::kSet && !httponly) w.put("; HttpOnly");
      httponly = true;
      continue;
    }
    if (attribute(attr, "samesite", value) && ops.samesite != Op::kKeep) {
      if (ops.samesite == Op::kSet && !samesite) {
        w.put("; SameSite=");
        w.put(ops.samesite_value);
      }
      samesite = true;
      continue;
    }
    w.put("; ");
    w.put(attr);
  }
  if (ops.secure == Op::kSet && !secure) w.put("; Secure");
  if (ops.httponly == Op::kSet && !httponly) w.put("; HttpOnly");
  if (ops.samesite == Op::kSet && !samesite) {
    w.put("; SameSite=");
    w.put(ops.samesite_value);
  }
}

// The longest value `rules`' replacements can give: a literal's length, or
// what evaluate() takes at most (a regex's groups are known only once it
// matched).
std::size_t longest_replacement(const std::vector<CookieRewrite>& rules) {
  std::size_t n = 0;
  for (const CookieRewrite& rule : rules) {
    const std::size_t len =
        rule.replacement.is_literal() ? rule.replacement.literal_text().size() : kMaxEvaluated;
    if (len > n) n = len;
  }
  return n;
}

}  // namespace

bool rewrite_cookies(ProxyState& ps) {
  const ProxyConf& p = ps.pconf();
  if (p.cookie_domains.empty() && p.cookie_paths.empty() && p.cookie_flags.empty()) return true;
  Request& r = *ps.r;
  // Room for each Set-Cookie twice: the values replaced (each attribute at
  // most once, by at most the longest replacement), then the flags (every
  // attribute written again with "; " before it, and the flags it lacked).
  constexpr std::size_t kFlags = sizeof "; Secure; HttpOnly; SameSite=Strict";
  const std::size_t domain_len = longest_replacement(p.cookie_domains);
  const std::size_t path_len = longest_replacement(p.cookie_paths);
  const std::size_t longest = domain_len > path_len ? domain_len : path_len;
  std::size_t need = 0;
  for (std::uint32_t i = 0; i < ps.nfields; ++i) {
    const HeaderField& f = ps.fields[i];
    if (!iequals(f.name, "set-cookie")) continue;
    std::size_t attrs = 0;
    for (char ch : f.value) attrs += ch == ';' ? 1 : 0;
    const std::size_t values = f.value.size() + attrs * (longest + 1);
    need += values + 2 * values + kFlags;
  }
  if (need == 0) return true;
  if (r.hc->worker->buffers().reserve(ps.cookie_mem, ps.cookie_mem_size, need) == nullptr) {
    VIGIL_LOG(*r.c->log, kAlert, 0, "*%llu out of memory rewriting Set-Cookie",
              static_cast<unsigned long long>(r.c->number));
    return false;
  }
  char* at = ps.cookie_mem;
  for (std::uint32_t i = 0; i < ps.nfields; ++i) {
    HeaderField& f = ps.fields[i];
    if (!iequals(f.name, "set-cookie")) continue;
    std::string_view cookie = f.value;
    Writer values(at);
    bool failed = false;
    const bool rewritten = rewrite_values(r, p, cookie, values, failed);
    if (failed) return false;
    if (rewritten) {
      cookie = values.text();
      at = values.end();
    }
    const std::size_t eq = cookie.find('=');
    const std::size_t semi = cookie.find(';');
    FlagOps ops;
    int found = 0;
    if (eq != std::string_view::npos && (semi == std::string_view::npos || eq < semi)) {
      found = find_flags(r, p, trim(cookie.substr(0, eq)), ops);
      if (found < 0) return false;
    }
    if (found > 0) {
      Writer flags(at);
      rewrite_flags(cookie, ops, flags);
      cookie = flags.text();
      at = flags.end();
    }
    f.value = cookie;
  }
  return true;
}

// ---- the directives ----------------------------------------------------------------------

namespace {

Status compile(const DirectiveCall& call, std::size_t i, VarTemplate& out) {
  auto t = VarTemplate::compile(call.arg(i));
  if (!t) return call.error(t.status().message());
  out = std::move(t.value());
  return Status::ok();
}

// proxy_cookie_domain off | domain replacement
// proxy_cookie_path off | path replacement
Status set_rewrite(const DirectiveCall& call, std::vector<CookieRewrite>& list, bool domain) {
  if (call.arg(0) == "off") {
    if (call.arg_count() != 1) return call.invalid_value(1);
    list.clear();
    return Status::ok();
  }
  if (call.arg_count() != 2) return call.error("invalid number of arguments in \"" + call.name() + "\" directive");
  CookieRewrite rule;
  const std::string& pattern = call.arg(0);
  if (!pattern.empty() && pattern[0] == '~') {
    // A domain is matched without regard to case whatever the form (nginx).
    const bool star = pattern.size() > 1 && pattern[1] == '*';
    auto re = compile_http_regex(std::string_view(pattern).substr(star ? 2 : 1), star || domain);
    if (!re) return call.error(re.status().message());
    rule.regex = std::make_shared<const HttpRegex>(std::move(re.value()));
  } else if (Status st = compile(call, 0, rule.pattern); !st) {
    return st;
  }
  if (Status st = compile(call, 1, rule.replacement); !st) return st;
  list.push_back(std::move(rule));
  return Status::ok();
}

}  // namespace

Status set_cookie_domain(const DirectiveCall& call, ProxyConf& p) {
  return set_rewrite(call, p.cookie_domains, true);
}

Status set_cookie_path(const DirectiveCall& call, ProxyConf& p) {
  return set_rewrite(call, p.cookie_paths, false);
}

// proxy_cookie_flags off | cookie [flag ...]
Status set_cookie_flags(const DirectiveCall& call, ProxyConf& p) {
  if (call.arg(0) == "off") {
    if (call.arg_count() != 1) return call.invalid_value(1);
    p.cookie_flags.clear();
    return Status::ok();
  }
  CookieFlags rule;
  if (call.arg(0)[0] == '~') {
    // Cookie names are matched without regard to case (nginx).
    const std::string_view re_text =
        std::string_view(call.arg(0)).substr(call.arg(0).size() > 1 && call.arg(0)[1] == '*' ? 2 : 1);
    auto re = compile_http_regex(re_text, /*caseless=*/true);
    if (!re) return call.error(re.status().message());
    rule.name_regex = std::make_shared<const HttpRegex>(std::move(re.value()));
  } else if (Status st = compile(call, 0, rule.name); !st) {
    return st;
  }
  for (std::size_t i = 1; i < call.arg_count(); ++i) {
    VarTemplate t;
    if (Status st = compile(call, i, t); !st) return st;
    FlagOps ops;
    if (t.is_literal() && !apply_flag(call.arg(i), ops)) {
      return call.error("invalid parameter \"" + call.arg(i) + "\"");
    }
    rule.flags.push_back(std::move(t));
  }
  p.cookie_flags.push_back(std::move(rule));
  return Status::ok();
}

}  // namespace vigil::http::proxy
