#pragma once
// Copying bytes between two connections, one direction at a time: the relay
// of a stream proxy session and of an HTTP tunnel after "101 Switching
// Protocols" (nginx's ngx_stream_proxy_process / ngx_http_upstream_process_
// upgraded). Each direction has its own buffer; a side's EOF is passed on
// as a half-close once everything it sent is delivered.

#include <sys/types.h>

#include <cstdint>

#include "vigil/event/connection.h"

namespace vigil::upstream {

// Moves bytes src -> buf -> dst as far as the sockets allow (their `ready`
// flags; the caller re-arms the events). Sets `src_eof` at src's EOF and
// `dst_shut` once that EOF was passed on (close_notify first on TLS, then a
// write shutdown); adds the bytes read to `*counter` when given; sets
// `progress` when anything moved. `read_limit`, when not negative, is how
// many bytes src may be read this time (a rate limit's allowance; 0: none).
// False on an I/O error.
bool relay(Connection& src, Connection& dst, Buf& buf, bool& src_eof, bool& dst_shut,
           bool& progress, std::uint64_t* counter = nullptr, off_t read_limit = -1);

}  // namespace vigil::upstream
