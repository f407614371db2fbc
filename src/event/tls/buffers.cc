// Record buffers kept between the requests of busy keep-alive connections
// (tls_idle in tls.h). The contexts set SSL_MODE_RELEASE_BUFFERS: OpenSSL
// frees a connection's read and write buffers as soon as they are empty, so
// an idle connection holds none. A connection that comes back for more gets
// the mode cleared on its SSL object and joins the loop's list of at most
// kTlsWarmMax connections that keep their buffers, most recently idle first;
// the one pushed out at the end gets the mode back and its buffers freed
// (or, when they hold bytes, freed by OpenSSL once they are empty).
#include <new>

#include "event/tls/buffers.h"
#include "event/tls/tls.h"
#include "vigil/event/loop.h"

namespace vigil {
namespace {

struct WarmList {
  TlsConnection* head = nullptr;  // most recently idle
  TlsConnection* tail = nullptr;
  std::size_t count = 0;
};

const char kWarmKey = 0;  // the address is the key of our per-loop state

WarmList* warm_list(EventLoop& loop, bool make) {
  return make ? loop.context_or_make<WarmList>(&kWarmKey)
              : static_cast<WarmList*>(loop.context(&kWarmKey));
}

void unlink(WarmList& w, TlsConnection& t) {
  (t.warm_prev != nullptr ? t.warm_prev->warm_next : w.head) = t.warm_next;
  (t.warm_next != nullptr ? t.warm_next->warm_prev : w.tail) = t.warm_prev;
  t.warm_prev = t.warm_next = nullptr;
}

void push_front(WarmList& w, TlsConnection& t) {
  t.warm_prev = nullptr;
  t.warm_next = w.head;
  (w.head != nullptr ? w.head->warm_prev : w.tail) = &t;
  w.head = &t;
}

// Back to releasing: the buffers go now if they are empty, else when they are.
void cool(WarmList& w, TlsConnection& t) {
  unlink(w, t);
  t.warm = 0;
  --w.count;
  if (t.ssl == nullptr) return;
  SSL_set_mode(t.ssl, SSL_MODE_RELEASE_BUFFERS);
  (void)SSL_free_buffers(t.ssl);  // 0: bytes still in them, nothing to do
}

}  // namespace

void tls_idle(Connection& c) {
  TlsConnection* t = c.ssl;
  if (t == nullptr || t->ssl == nullptr || !t->handshaked || c.loop == nullptr) return;
  if (!t->idled) {
    // The first wait: a connection that made one request may stay idle for
    // good (its buffers were released when they emptied).
    t->idled = 1;
    return;
  }
  WarmList* w = warm_list(*c.loop, true);
  if (w == nullptr) return;  // no memory: buffers are released as before
  if (t->warm) {
    unlink(*w, *t);
    push_front(*w, *t);
    return;
  }
  SSL_clear_mode(t->ssl, SSL_MODE_RELEASE_BUFFERS);
  t->warm = 1;
  push_front(*w, *t);
  ++w->count;
  if (w->count > kTlsWarmMax) cool(*w, *w->tail);
}

// Called by tls_close (before SSL_free) and the loop's exit hook.
void tls_forget_warm(Connection& c) {
  TlsConnection* t = c.ssl;
  if (t == nullptr || !t->warm || c.loop == nullptr) return;
  WarmList* w = warm_list(*c.loop, false);
  if (w == nullptr) return;
  unlink(*w, *t);
  t->warm = 0;
  --w->count;
}

void tls_exit_warm(EventLoop& loop) {
  WarmList* w = warm_list(loop, false);
  if (w == nullptr) return;
  // Connections still linked are being closed with the loop: unlink them
  // so none points into the list after it is gone.
  while (w->head != nullptr) {
    TlsConnection* t = w->head;
    unlink(*w, *t);
    t->warm = 0;
  }
  loop.drop_context<WarmList>(&kWarmKey);
}

}  // namespace vigil
