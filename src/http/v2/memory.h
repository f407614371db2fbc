#pragma once
// Internal to http/v2: the memory of the worker's nghttp2 sessions.
//
// nghttp2 allocates for every stream (the stream, each frame it queues, a
// copy of the response's fields, HPACK's strings) and frees it again when
// the stream ends: with a thousand streams a second that is most of the
// worker's malloc and free. The allocator given to each session serves its
// small blocks from the worker's free lists instead.
//
// A session's allocations of a page or more (its outbound frame buffer, 16
// KiB written by every frame it sends, and its stream map) are whole pages
// of their own. A connection with no stream open and nothing to send is
// idle: the worker gives the pages of its idle sessions back to the kernel
// (madvise), the frame buffer's always (nghttp2 writes it anew for the
// next frame), the stream map's when it is empty (all zero, as the kernel
// gives pages back), and OpenSSL's record buffers of a TLS connection, as
// nginx frees an idle HTTP/2 connection's buffers and pool. A session is
// released on the worker's next tick (at most kReleaseAfter later) rather
// than the moment it goes idle: a busy connection is idle for an instant
// between two requests, and would otherwise pay a madvise and the page
// faults after it for each.
#include <nghttp2/nghttp2.h>

#include "vigil/core/clock.h"

namespace vigil {
class EventLoop;
}

namespace vigil::http::h2 {

struct Session;
struct H2Worker;

inline constexpr Msec kReleaseAfter = 1000;

// The worker's state on `loop`, made by the first call (null: no memory);
// exit_worker (shutdown.h) frees it.
H2Worker* h2_worker(EventLoop& loop);

// The allocator for s's nghttp2 session (s.h2w set).
nghttp2_mem session_mem(Session& s);
// nghttp2 handed out `data` (a frame to send): the page block holding it
// is the frame buffer.
void note_frame(Session& s, const void* data);
// The session has no stream and nothing to send / has work again.
void session_idle(Session& s);
void session_busy(Session& s);
// The session ends (before nghttp2_session_del).
void session_ended(Session& s);

}  // namespace vigil::http::h2
