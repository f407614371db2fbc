#include "stream/ssl_preread.h"

#include <cerrno>

#include "stream/client_hello.h"
#include "stream/proxy.h"
#include "stream/session.h"
#include "stream/stream_conf.h"
#include "vigil/core/log.h"
#include "vigil/event/loop.h"

namespace vigil::stream {

namespace {

void preread_handler(Event& ev);

// The parser has its answer: the session goes on with what was read.
void preread_done(Session& s) {
  Connection& c = *s.client;
  if (c.read->timer_set) c.loop->del_timer(*c.read);
  VIGIL_LOG(*c.log, kDebug, 0, "ssl preread: %s, server name \"%.*s\"",
            s.hello->result() == ClientHelloParser::Result::kDone ? "ClientHello" : "not TLS",
            static_cast<int>(s.hello->server_name().size()), s.hello->server_name().data());
  s.after_preread(s);
}

// Reads while the socket has bytes and the parser wants them.
void read_client(Session& s) {
  Connection& c = *s.client;
  Buf& b = s.preread;
  while (c.read->ready) {
    const long n = c.recv(c, b.last, static_cast<std::size_t>(b.end - b.last));
    if (n == kIoAgain) break;
    if (n == 0 || n == kIoError) {
      // nginx ends the session here with 200: nothing was wrong with it.
      return finalize(s, n == 0 ? "client closed connection while prereading"
                                : "recv() failed while prereading");
    }
    s.from_client += static_cast<std::uint64_t>(n);
    const auto r =
        s.hello->feed(reinterpret_cast<const unsigned char*>(b.last), static_cast<std::size_t>(n));
    b.last += n;
    if (r != ClientHelloParser::Result::kAgain) return preread_done(s);
    if (b.last == b.end) {
      VIGIL_LOG(*c.log, kError, 0, "*%llu preread buffer full, client: %.*s",
                static_cast<unsigned long long>(c.number), static_cast<int>(c.addr_text.size()),
                c.addr_text.data());
      return finalize_with(s, 400, "preread buffer full");
    }
  }
  if (!c.read->timer_set) c.loop->add_timer(*c.read, s.conf->preread_timeout);
  if (!c.loop->handle_read_event(*c.read)) {
    finalize_with(s, 500, "event registration failed");
  }
}

void preread_handler(Event& ev) {
  Connection& c = *ev.owner<Connection>();
  Session& s = *static_cast<Session*>(c.data);
  if (ev.timedout) {
    ev.timedout = 0;
    VIGIL_LOG(*c.log, kInfo, ETIMEDOUT, "*%llu client timed out while prereading client data",
              static_cast<unsigned long long>(c.number));
    return finalize(s, "preread timed out");
  }
  if (c.close) return finalize(s, "closed by the worker");
  if (!ev.write) read_client(s);
}

}  // namespace

void ssl_preread(Session& s, void (*next)(Session& s)) {
  Connection& c = *s.client;
  const std::size_t size = s.conf->preread_buffer_size;
  // The read buffer and, as large, the parser's memory for the names: what
  // the ClientHello holds never needs more than what was read.
  char* mem = static_cast<char*>(c.arena->alloc(2 * size, 16));
  auto* hello = mem != nullptr ? c.arena->make<ClientHelloParser>(mem + size, size) : nullptr;
  if (hello == nullptr) return finalize_with(s, 500, "out of memory");
  s.preread.reset(mem, size);
  s.hello = hello;
  s.after_preread = next;
  c.read->handler = preread_handler;
  c.write->handler = preread_handler;
  // Bytes may already be waiting (a deferred accept, what came with TLS).
  c.read->ready = 1;
  read_client(s);
}

}  // namespace vigil::stream
