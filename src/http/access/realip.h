#pragma once
// The realip module (nginx's ngx_http_realip_module): the client address a
// trusted proxy names in a request header replaces the connection's for the
// request (realip.cc).

namespace vigil::http {

class HttpModule;
class PhaseEngine;

const HttpModule& realip_module();
// Its handlers: post-read (the server's settings) and pre-access (the
// location's), acting once per request.
void add_realip_phases(PhaseEngine& engine);

}  // namespace vigil::http
