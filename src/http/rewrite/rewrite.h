#pragma once
// The rewrite module's `return` (nginx's ngx_http_rewrite_module, return
// only): a location (or a server, before any location is chosen) answers
// with a fixed status, a text or a redirect, before its static handler or
// proxy_pass runs.

#include <memory>
#include <string_view>

#include "http/core/variables.h"

namespace vigil::http {

struct Request;

// Closes the connection without an answer (nginx's special code).
inline constexpr int kStatusClose = 444;

struct ReturnConf {
  int code = 0;
  bool has_text = false;
  VarTemplate text;  // the body, or the URL of a redirect
  std::string where;
};

// Runs r.loc's `return`: 0 when the response is on its way (or the
// connection closed, 444), else the status to answer with the built-in page
// or error_page (a redirect, its Location set in headers_out; a code of 400
// or more without text; or 500 when no memory).
// `extension`: of the request's path, for the Content-Type of a text.
// The rewrite module's conf at each level: its `return`, never inherited
// (a level without one has none, as nginx).
struct RewriteConf {
  std::shared_ptr<const ReturnConf> ret;
};

class HttpModule;
struct HttpLocConf;
const HttpModule& rewrite_module();
// The `return` of a location (or server level), or null.
const ReturnConf* location_return(const HttpLocConf& loc);

int send_return(Request& r, std::string_view extension);

class PhaseEngine;
// The server-rewrite and rewrite phase handlers of `return`.
void add_return_phases(PhaseEngine& engine);

}  // namespace vigil::http
