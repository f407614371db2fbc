#pragma once
// Datagram listeners ("listen ... udp", nginx's ngx_event_udp.c). A UDP
// socket has no accept: its read handler (event_recvmsg) receives each
// datagram and looks the sender's address up in the listener's table of
// sessions. A new sender gets a connection of its own, as an accepted TCP
// client would: fd is the listener's (shared: close_connection leaves it
// open and registered), peer_addr the sender, c.buffer its first datagram,
// and Listening::handler is called. A known sender's datagram is handed to
// its connection: c.buffer points at it, c.read is made ready and its
// handler runs at once; whatever the handler did not read is dropped when
// it returns (the next datagram takes the shared buffer).
//
// A session connection never registers events: its fd is the listener's.
// Its recv returns the datagram at hand (kIoAgain when none; a datagram is
// never split: what does not fit `size` is cut off), its send sends one
// datagram to the client (sendto). Closing it takes it out of the table
// (udp_forget, called by close_connection); udp_detach takes it out while it
// lives on, so the sender's next datagram starts a new session (nginx's
// ngx_delete_udp_connection, for proxy_requests).

#include <cstddef>

#include "vigil/event/connection.h"
#include "vigil/event/event.h"

namespace vigil {

// The read handler of a SOCK_DGRAM listening connection.
void event_recvmsg(Event& ev);

// The I/O of a session connection (set by event_recvmsg).
long udp_shared_recv(Connection& c, char* buf, std::size_t size);
long udp_send(Connection& c, const char* buf, std::size_t size);

// True for a session connection of a UDP listener.
bool is_udp_session(const Connection& c);

// Takes a session connection out of its listener's table (no-op when it is
// not there): the sender's next datagram makes a new session.
void udp_detach(Connection& c);
// close_connection's part: as udp_detach.
void udp_forget(Connection& c);

// Before a UDP listening connection closes: every session of it is asked to
// end (its `close` set, its read handler run), and the table is freed.
void udp_close_sessions(Connection& lc);

}  // namespace vigil
