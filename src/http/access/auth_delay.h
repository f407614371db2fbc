#pragma once
// auth_delay (nginx 1.17.10's core directive, in http, server and
// location): a request the access phase refuses with 401 (auth_basic,
// auth_request, satisfy any) is answered only after the location's delay,
// so that each guessed password costs the guesser that long. The wait is a
// timer on the client's write event, as limit_req's delay: the worker
// serves other connections meanwhile, and a client that closes during it
// ends the request there (499), with its timer.

namespace vigil::http {

struct Request;
class HttpModule;

const HttpModule& auth_delay_module();

// The access phase refuses r with 401: 401 when the location has no
// auth_delay, else kPhaseSuspended (phases.h), the 401 answered when the
// delay is over. 500 when the client's read event cannot be watched.
int auth_delay(Request& r);

}  // namespace vigil::http
