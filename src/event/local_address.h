#pragma once
// The local address of a connection as text, for $server_addr in http and
// stream.

#include <cstddef>

#include "vigil/event/connection.h"

namespace vigil {

// The address the client reached ("127.0.0.1", "::1", "unix:/path"): the
// listener's, or the socket's own when the listener is a wildcard (nginx's
// ngx_connection_local_sockaddr), written to `text` (`cap` bytes, NUL
// terminated) with its length in `len`. False when there is none or it does
// not fit.
bool connection_local_text(const Connection& c, char* text, std::size_t cap, std::size_t& len);

}  // namespace vigil
