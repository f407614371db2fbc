#pragma once
// auth_request and auth_request_set (nginx's ngx_http_auth_request_module):
// access decided by a subrequest to a local URI (subrequest.h), usually a
// location that proxies to an authentication service. Its check runs in the
// access phase after allow/deny and auth_basic, as `satisfy` combines them
// (access.cc).

namespace vigil::http {

struct Request;
class HttpModule;

const HttpModule& auth_request_module();

// What the location's auth_request says of r:
//   kPhaseDeclined   auth_request off (or none);
//   kPhaseSuspended  its subrequest runs: the access phase comes back here
//                    when it has ended;
//   0                the subrequest answered 2xx;
//   401 / 403        it answered that (a 401 passes its WWW-Authenticate on);
//   500              any other answer ("auth request unexpected status"),
//                    or the subrequest could not be made.
// `code` is the access phase's pending refusal (satisfy any): kept while
// the subrequest runs and given back when the phase resumes.
int auth_request_check(Request& r, int& code);

}  // namespace vigil::http
