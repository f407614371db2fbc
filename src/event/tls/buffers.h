#pragma once
// The loop's list of connections that keep their record buffers (buffers.cc;
// tls_idle in tls.h is its entry point).

#include "vigil/event/connection.h"

namespace vigil {

class EventLoop;

// Takes the connection off the list; tls_close calls it before SSL_free.
void tls_forget_warm(Connection& c);
// Frees the loop's list: part of the worker loop's TLS exit hook.
void tls_exit_warm(EventLoop& loop);

}  // namespace vigil
