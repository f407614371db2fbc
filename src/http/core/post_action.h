#pragma once
// post_action (nginx's ngx_http_post_action): once the response of a
// request is over (sent, or failed), the request goes on to the location's
// post_action URI (an internal redirect) or named location, whose answer
// is thrown away; its access log line is the request's.

#include <string>

namespace vigil::http {

struct Request;

struct PostActionConf {
  std::string target;  // empty: off; "/uri" or a named location
};

// Starts the post action of the main request `r` whose response is over:
// true when it runs now (it finalizes the request again when it ends);
// false when there is none (off, already run, or an HTTP/2 stream).
bool start_post_action(Request& r);
// Whether r is running its post action: the HTTP/1 writer discards what
// it is given.
bool in_post_action(const Request& r);

class HttpModule;
const HttpModule& post_action_module();

}  // namespace vigil::http
