#pragma once
// The rewrite module (nginx's ngx_http_rewrite_module): `rewrite`, `return`,
// `set`, `if`, `break`, `rewrite_log` (uninitialized_variable_warn is the
// core's: variables.cc writes the warning).
//
// Each level's rewrite directives are kept, in the order they are written,
// as a small program (RewriteConf::ops), run by the server-rewrite phase for
// the server level, before a location is chosen, and by the rewrite phase
// for the location. An `if` block is a location of its own (an if-scope: a
// child scope of the location's context whose arguments start with "("),
// merged from the enclosing level like a nested location; when its
// condition holds the request takes that conf (r.loc), runs the block's own
// program, then the rest of the enclosing one. A URI changed by `rewrite`
// without `break` makes the post-rewrite phase choose the location again
// (nginx's 10-cycle limit applies, phases.h).

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "http/core/request_vars.h"
#include "http/core/variables.h"

namespace vigil {
class ConfScope;
class DirectiveCall;
}

namespace vigil::http {

struct Request;
struct HttpLocConf;
class HttpModule;
class PhaseEngine;

// Closes the connection without an answer (nginx's special code).
inline constexpr int kStatusClose = 444;

struct ReturnConf {
  int code = 0;
  bool has_text = false;
  VarTemplate text;  // the body, or the URL of a redirect
  std::string where;
};

// An `if` condition.
struct IfCondition {
  enum Kind : std::uint8_t {
    kValue,     // if ($v): neither empty nor "0"
    kEqual,     // =
    kNotEqual,  // !=
    kMatch,     // ~, ~* (the groups are kept)
    kNoMatch,   // !~, !~*
    kFile,      // -f, !-f
    kDir,       // -d, !-d
    kExists,    // -e, !-e
    kExec,      // -x, !-x
  };
  Kind kind = kValue;
  bool negate = false;  // "!-f" and the like
  VarTemplate left;     // the variable, or the path of a file test
  VarTemplate right;    // the string of = and !=
  std::shared_ptr<const HttpRegex> re;
};

// rewrite's last argument.
enum class RewriteFlag : std::uint8_t { kNone, kLast, kBreak, kRedirect, kPermanent };

struct RewriteOp {
  enum Kind : std::uint8_t { kReturn, kRewrite, kSet, kSetLimitRate, kSetArgs, kBreak, kIf };
  Kind kind = kReturn;
  std::string where;
  std::shared_ptr<const ReturnConf> ret;  // kReturn
  // kRewrite: the expression, the replacement, the flag; `url`: the
  // replacement starts with http://, https:// or $scheme (a redirect).
  std::shared_ptr<const HttpRegex> re;
  VarTemplate replacement;       // up to the first '?'
  VarTemplate replacement_args;  // from it on (empty: none)
  RewriteFlag flag = RewriteFlag::kNone;
  bool url = false;
  std::uint32_t var = 0;  // kSet: the declared variable
  VarTemplate value;      // kSet
  // kIf: the condition and the block's scope (its conf is found among the
  // enclosing level's HttpLocConf::if_blocks).
  std::shared_ptr<const IfCondition> cond;
  const ConfScope* if_scope = nullptr;
};

// The rewrite module's conf at each level. The program is never inherited
// (a level runs only its own, as nginx); rewrite_log is.
struct RewriteConf {
  std::vector<RewriteOp> ops;
  // The level's first `return`, for error_page's direct path (request.cc).
  std::shared_ptr<const ReturnConf> ret;
  bool log = false;  // rewrite_log: each rewrite's match at [notice]
};

const HttpModule& rewrite_module();
// The `return` of a location (or server level), or null.
const ReturnConf* location_return(const HttpLocConf& loc);

// Runs r.loc's `return`: 0 when the response is on its way (or the
// connection closed, 444), else the status to answer with the built-in page
// or error_page (a redirect, its Location set in headers_out; a code of 400
// or more without text; or 500 when no memory).
// `extension`: of the request's path, for the Content-Type of a text.
int send_return(Request& r, std::string_view extension);
int send_return(Request& r, const ReturnConf& ret, std::string_view extension);
// Parses `return code [text]` / `return URL` (return.cc).
Result<std::shared_ptr<const ReturnConf>> parse_return(const DirectiveCall& call);
// Makes `url` (escaped where a URI may not hold a byte raw) the Location
// of r's response. False when no memory.
bool set_redirect_location(Request& r, std::string_view url);
// The body of a return 444 / anything else after reading the body (return.cc).
int run_return(Request& r, const ReturnConf& ret);

// The server-rewrite, rewrite and post-rewrite phase handlers.
void add_rewrite_phases(PhaseEngine& engine);

}  // namespace vigil::http
