#pragma once
// auth_basic and auth_basic_user_file (nginx's ngx_http_auth_basic_module):
// HTTP Basic authentication against an htpasswd file, read per request
// (auth_basic.cc; the file's formats in htpasswd.h). Its check runs in the
// access phase with allow/deny, as `satisfy` combines them (access.cc).

#include <cstddef>
#include <string_view>

namespace vigil::http {

struct Request;
class HttpModule;

const HttpModule& auth_basic_module();

// What the location's auth_basic says of r: kPhaseDeclined (phases.h) when
// it is off, 0 when the credentials match, 401 (with WWW-Authenticate set)
// when they do not, or 500/403 when the user file cannot be read.
int auth_basic_check(Request& r);

// The user name of the request's Basic credentials ($remote_user), decoded
// into `buf` (kRemoteUserMax bytes); `found` false when there are none (or
// an Authorization field longer than that, not worth a log's while).
inline constexpr std::size_t kRemoteUserMax = 4096;
std::string_view remote_user(const Request& r, char* buf, bool& found);

}  // namespace vigil::http
