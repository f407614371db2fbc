#pragma once
// The TCP proxy session (nginx's ngx_stream_proxy_module): for each accepted
// client, connect to a server of the upstream group (the next one when a
// connect fails or times out), then relay bytes both ways through two fixed
// buffers, reading from a side only while its buffer has room, so a slow
// reader slows the writer instead of growing memory. EOF on one side is passed
// on as a half-close once its buffer is flushed; the session ends when both
// directions are done, on an error, or after proxy_timeout without traffic.

#include "vigil/event/connection.h"

namespace vigil::stream {

// The listener's handler for stream servers (Listening::servers is the
// StreamSrvConf); for a "listen ... ssl" address, the one that starts with
// the TLS handshake.
void init_connection(Connection& c);
void init_tls_connection(Connection& c);

}  // namespace vigil::stream
