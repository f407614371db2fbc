#pragma once
// The stream proxy for datagrams (a "listen ... udp" server; nginx's
// ngx_stream_proxy_module on SOCK_DGRAM). A session is one client address
// (event/udp.h); it has its own connected UDP socket to the server the
// balancer picked, so the server's replies find their way back. Each client
// datagram is sent on as one datagram, each reply returned as one: boundaries
// are kept both ways, a datagram larger than proxy_buffer_size is cut.
//
// The session ends, with $status 200:
//   - once proxy_responses replies per client datagram came back (0: at once
//     after sending), and, with proxy_requests N, after N client datagrams
//     (from the Nth on, the client's next datagram starts a new session);
//   - after proxy_timeout without a datagram either way, when the replies
//     expected came back or none were counted (proxy_responses unset);
//     otherwise with 502 ("upstream timed out").
// An ICMP error from the server (ECONNREFUSED on its socket) counts as its
// reply and marks it failed for the balancer (max_fails); the session does
// not move to another server, as nginx's does not.
// proxy_upload_rate / proxy_download_rate delay whole datagrams; a client
// datagram that comes while its direction waits is dropped.

#include <string_view>

namespace vigil::stream {

struct Session;

// After the balancer is set up (start_proxy): connect and relay.
void udp_connect_upstream(Session& s);
// `return` on a UDP session: the text as one datagram, then the end.
void udp_return(Session& s, std::string_view text);

}  // namespace vigil::stream
