#pragma once
// The client-facing half of an upstream request: the request's event
// handlers while the backend works, the request body (through the
// request-body API), the client's response head (through send_header; the
// body goes through output_filter from upstream_relay.cc), the tunnel's
// client half, and the end of the request on the client side. The client
// connection belongs to the transport (http/v1/). The core (upstream.cc,
// upstream_relay.cc, upstream_tunnel.cc) calls only the functions below.

#include <cstddef>

#include "http/upstream/upstream.h"

namespace vigil::http::upstream_core {

// ---- the request and its body ---------------------------------------------------------
// Sets the request's event handlers for the upstream request and starts
// reading the request body through the request-body API (request_body.h,
// one client_body_buffer_size buffer in r.body.buf). 0, or a status for the
// client (500: no memory).
int client_start(Upstream& u);
// Reads the body before connecting (*_request_buffering, or a body the
// protocol cannot stream); begin_connect follows when it is all here or the
// buffer is full.
void read_body_ahead(Upstream& u);
// Reads body bytes into r.body.buf (refilled from its start once all of it
// was sent: the body can no longer be replayed). Returns 1 when the buffer
// has data or the body is complete, 0 when waiting for the client, -1 when
// the request was ended (error answered or client gone).
int read_client_body(Upstream& u);

// ---- the response ---------------------------------------------------------------------
// The client's response head: r.headers_out from the backend's status and
// fields (hop-by-hop and hidden ones left out, proxy_redirect applied), then
// send_header (the header filters, HTTP/1's head writer). The body goes
// through output_filter (upstream_relay.cc). `upgrade`: a 101 tunnel. 0, or
// the status send_header answered (500: out of memory).
int send_client_head(Upstream& u, bool upgrade);

// X-Accel-Limit-Rate in the backend's response (unless *_ignore_headers
// names it): this response's limit_rate, in bytes per second.
void accel_limit_rate(Upstream& u);
// X-Accel-Redirect in the backend's response (unless *_ignore_headers
// names it): the backend is let go, the fields nginx keeps for the new
// response (Content-Type, Set-Cookie, Content-Disposition, Cache-Control,
// Expires, Accept-Ranges) stay with the request, and the request goes to
// the URI (made GET unless HEAD; an unsafe one is a 404) or the named
// location. True when it took the request.
bool accel_redirect(Upstream& u);

// ---- the 101 tunnel's client half -----------------------------------------------------
// Gets the client -> backend buffer (r.body.buf) with the bytes the client sent
// after its head, and starts sending the 101 head. False on failure.
bool tunnel_client_start(Upstream& u);
// The 101 head still on its way: sends it. 1: sent, 0: waiting for the
// client, -1: failed.
int tunnel_send_head(Upstream& u);

// ---- the end --------------------------------------------------------------------------
// The proxy gives up before a response started: the client gets `status`.
void answer(Upstream& u, int status);
// The response came back as an error page to intercept (error_page).
void answer_intercepted(Upstream& u, int status);
// Ends the request on the client side after the upstream is let go.
void client_finish(Upstream& u, bool error);

// The request's event handlers while the upstream request runs.
void client_read_handler(Request& r);
void client_write_handler(Request& r);

}  // namespace vigil::http::upstream_core
