#pragma once
// The realip module (nginx's ngx_http_realip_module): the client address a
// trusted proxy names in a request header replaces the connection's for the
// request (realip.cc).

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <string_view>
#include <vector>

#include "http/access/access.h"

namespace vigil::http {

// "address", "address:port" or "[IPv6]:port" (nginx's ngx_parse_addr_port):
// an IPv4 or IPv6 address, its port 0 when none is given. False for
// anything else.
bool parse_addr_port(std::string_view text, ::sockaddr_storage& ss);

// The client a list such as X-Forwarded-For names, when `addr` (the peer)
// is one of the `trusted`: its last address, or with `recursive` the last
// one past the trusted ones (nginx's ngx_http_get_forwarded_addr_internal).
// kDeclined: `addr` was not trusted or the last element is no address, and
// `addr` is unchanged; kOk: `addr` is the one found, the list was walked to
// its end; kDone: `addr` is the one found, the walk stopped at an untrusted
// address or at an element that is no address.
enum class ForwardedAddr : std::uint8_t { kDeclined, kOk, kDone };
ForwardedAddr forwarded_addr(::sockaddr_storage& addr, std::string_view list,
                             const std::vector<AccessRule>& trusted, bool recursive);

struct Request;
// forwarded_addr over the request's X-Forwarded-For fields, the last field
// first (realip's X-Forwarded-For and geo's `proxy`).
ForwardedAddr forwarded_for(const Request& r, ::sockaddr_storage& addr,
                            const std::vector<AccessRule>& trusted, bool recursive);

class HttpModule;
class PhaseEngine;

const HttpModule& realip_module();
// Its handlers: post-read (the server's settings) and pre-access (the
// location's), acting once per request.
void add_realip_phases(PhaseEngine& engine);

}  // namespace vigil::http
