#pragma once
// The preread phase of ssl_preread (nginx's ngx_stream_ssl_preread_module
// in its preread phase): before a TCP session is proxied or answered, its
// client's first bytes are read into a buffer of preread_buffer_size and
// given to the ClientHello parser (client_hello.h) as they come. The
// session goes on when the parser has an answer: a ClientHello ($ssl_preread_*
// set), or not TLS / malformed (they stay empty). The bytes read are sent
// to the upstream first, unchanged. The buffer full without an answer ends
// the session with 400 ("preread buffer full"); preread_timeout, or the
// client closing, ends it with 200, as nginx.

namespace vigil::stream {

struct Session;

// Reads and parses, then calls `next(s)` (or ends the session).
void ssl_preread(Session& s, void (*next)(Session& s));

}  // namespace vigil::stream
