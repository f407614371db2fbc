#pragma once
// The TCP proxy session (nginx's ngx_stream_proxy_module): for each accepted
// client, connect to a server of the upstream group (the next one when a
// connect fails or times out), then relay bytes both ways through two fixed
// buffers, reading from a side only while its buffer has room, so a slow
// reader slows the writer instead of growing memory. EOF on one side is passed
// on as a half-close once its buffer is flushed; the session ends when both
// directions are done, on an error, or after proxy_timeout without traffic.

#include <cstddef>
#include <string_view>

#include "vigil/event/connection.h"

namespace vigil::stream {

struct Session;
class VarTemplate;

// The listener's handler for stream servers (Listening::servers is the
// StreamSrvConf); for a "listen ... ssl" address, the one that starts with
// the TLS handshake.
void init_connection(Connection& c);
void init_tls_connection(Connection& c);
// A "listen ... proxy_protocol" connection whose header was not read: a
// session ends at once, logged with $status 400 (a broken header) or 200
// (timed out, closed by the worker, a failed read), as nginx's.
void end_proxy_protocol_failure(Connection& c);

// The session ends: its log lines, then both connections close (`s` is gone
// when it returns). finalize_with sets $status first.
void finalize(Session& s, const char* why);
void finalize_with(Session& s, int status, const char* why);
// An attempt at an upstream server begins / is over ($upstream_* variables).
void begin_try(Session& s, std::string_view addr);
void end_try(Session& s);
// proxy_upload_rate or proxy_download_rate for this session: the number, or
// its variables' value as a size.
std::size_t session_rate(const Session& s, std::size_t rate, const VarTemplate* var);

}  // namespace vigil::stream
