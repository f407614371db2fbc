#pragma once
// proxy_pass with variables (nginx's ngx_stream_proxy_eval and the part of
// ngx_stream_proxy_handler that follows it): the value names an `upstream`
// group, else it is an address with its port ("unix:/path", "a.b.c.d:port",
// "[v6]:port") or a host name and port, which the server's `resolver` turns
// into addresses; either becomes a group of the session's own (each
// address tried once, as nginx's round-robin peers of a resolved name).
//
// nginx's statuses: a value that is no address ("no host", "no port in
// upstream", "invalid unix domain socket") and a name without a `resolver`
// ("no resolver defined to resolve NAME") are 500; a name that does not
// resolve ("NAME could not be resolved (3: Host not found)") is 502.

#include <string_view>

namespace vigil::stream {

struct Session;

// Returned while the name is being resolved: `then` runs later.
inline constexpr int kTargetResolving = -1;

// Sets s.group from the evaluated proxy_pass. 0: set; kTargetResolving:
// `then(s, status)` runs once the resolver answered (0 with s.group set,
// else the $status to end with); else the $status to end with.
int choose_target(Session& s, void (*then)(Session& s, int status));
// The session ends while its name is being resolved: the query is forgotten.
void cancel_target(Session& s);

// The host of proxy_ssl_name or proxy_pass: the text up to its port's colon
// ("[v6]:port" keeps its brackets), as nginx takes it for both.
std::string_view target_host(std::string_view text);

}  // namespace vigil::stream
