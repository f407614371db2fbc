#pragma once
// Receiving the PROXY protocol on a listener ("listen ... proxy_protocol"):
// before anything else on an accepted connection (before TLS, before the
// protocol's first read) the header is read, exactly to its last byte, and
// kept in c.proxy_protocol for the variables and realip of http, stream
// and mail. Parsing is core/proxy_protocol.h's.
//
// The reader peeks at the socket and consumes only bytes that belong to the
// header, so whatever follows it stays in the kernel for the protocol (or for
// OpenSSL). A header split over several segments is waited for, within the
// timeout. Under io_uring such a connection never enters the ring (the
// accept gives it readiness I/O): the header must not be received into a
// ring buffer with what follows it.

#include <netinet/in.h>

#include <string_view>

#include "core/proxy_protocol.h"
#include "vigil/core/clock.h"
#include "vigil/core/result.h"

namespace vigil {

class Connection;

// What the header said, in the connection's arena.
struct ProxyProtocolInfo {
  ProxyProtocolHeader header;  // header.tlvs points into the arena
  std::string_view src_addr;   // "192.0.2.1"; empty without addresses
  std::string_view dst_addr;
  int src_port = 0;
  int dst_port = 0;
  std::string_view src_port_text;  // "123"; empty without addresses
  std::string_view dst_port_text;
};

// Called once: ok with c.proxy_protocol set, or !ok after the failure was
// logged (the caller closes the connection). c's read and write handlers
// and the read timer are the reader's until then.
using ProxyProtocolDone = void (*)(Connection& c, bool ok);

// Starts reading the header of the accepted connection c within `timeout`
// (ms). An error only when nothing could be started (the caller closes c);
// `done` may have run before it returns.
Status proxy_protocol_read(Connection& c, Msec timeout, ProxyProtocolDone done);

}  // namespace vigil
