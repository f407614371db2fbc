#pragma once
// The worker's graceful stop for an HTTP/2 connection (RFC 9113 §6.8): the
// session sends GOAWAY NO_ERROR with the last stream it took, finishes the
// streams it has (a new one the client opens after it is ignored), and the
// connection closes once none is left: at once when it is idle. The
// worker's worker_shutdown_timeout closes whatever is still open.

namespace vigil {
class EventLoop;
}
namespace vigil::http {
struct HttpConnection;
}

namespace vigil::http::h2 {

void begin_shutdown(HttpConnection& hc);
// Frees the worker's HTTP/2 state (memory.h), once its connections are closed.
void exit_worker(EventLoop& loop);

}  // namespace vigil::http::h2
