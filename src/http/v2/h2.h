#pragma once
// HTTP/2 (RFC 9113, HPACK RFC 7541) on a client connection: the transport
// under the same requests, phases, filters and modules as HTTP/1.
//
// The frames and HPACK are libnghttp2's (a codec with no I/O of its own);
// Vigil's loop does the I/O. One Session per connection, made when ALPN
// chose "h2" on a TLS port with http2, or when a plain port with http2
// starts with the connection preface (prior knowledge, RFC 9113 §3.3).
//
// Each stream is a Request like any other, on a connection of its own (the
// stream's Connection, as nginx's fake connection): its head, written out
// as a request line and field lines, goes through HTTP/1's parser and
// checks, then the phases; its response head is formatted by HTTP/1's head
// writer without the connection-specific fields and sent as HEADERS; its
// body leaves through the filter chain into this writer, which hands DATA
// to nghttp2 only as the peer's flow-control windows open (a slow reader
// holds the producer's buffers, never a copy of the response). A request
// body arrives in DATA frames into the stream's preread buffer (whose size
// is the stream's window) and is read through the request-body API; the
// window reopens as the reader consumes it.
//
// The functions below are what HTTP/1's code calls for a request whose
// r.hc->stream is set (request.cc, filters.cc, http/v1/*), and the
// connection-level entry points.

#include <cstddef>
#include <string_view>

#include "http/core/request_body.h"

namespace vigil {
struct Chain;
class Connection;
}  // namespace vigil

namespace vigil::http {

struct HttpConnection;
struct Request;

namespace h2 {

// The client connection preface's first line (RFC 9113 §3.4).
inline constexpr std::string_view kPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

// Whether the first bytes a plain connection sent may be the preface (all
// of them so far match it).
bool starts_preface(std::string_view bytes);

// Whether the TLS handshake of c chose "h2" by ALPN.
bool negotiated(const Connection& c);

// Makes hc an HTTP/2 connection; what hc.buffer holds is its first input.
// The connection is closed on failure.
void start(HttpConnection& hc);

// close_connection's part for a connection with a session: every stream's
// request ends, the session is freed, then close_connection closes hc.
void close_session(HttpConnection& hc);

// ---- the request's side (r.hc->stream set) ------------------------------------------
// The head writer: r.headers_out as a HEADERS frame. False: out of memory.
bool write_header(Request& r);
// The final writer of the body filter chain (filters.h's contract).
int write_filter(Request& r, Chain* in);
// 100 Continue as an interim HEADERS.
bool send_continue(Request& r);
// The request-body API (request_body.h) over the stream's DATA frames.
int start_request_body(Request& r, std::size_t size, RequestBodyHandler handler);
int read_request_body(Request& r);
int discard_request_body(Request& r);
// The status a malformed request (RFC 9113 §8.1.1) is answered with, as
// the stream's head checks found it; 0 for a well-formed one.
int malformed_status(const Request& r);
// The client reset the stream or the connection is gone.
bool client_gone(const Request& r);
// The request on hc (a stream's) has ended and been released: the stream
// ends, with RST_STREAM when its response did not (`error`, or not all of it
// was passed on).
void request_done(HttpConnection& hc, bool error);

}  // namespace h2
}  // namespace vigil::http
