// A logged-in mail session: both directions through the upstream layer's
// relay, on the login's two buffers, each given back while its direction
// is idle.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <string>

#include "mail/counters.h"
#include "mail/session_internal.h"
#include "upstream/relay.h"
#include "vigil/core/log.h"
#include "vigil/event/loop.h"

namespace vigil::mail::detail {

void relay_handler(Event& ev);

// A relay buffer for a direction that has none (given back while idle).
void take_buffer(Buf& b, std::unique_ptr<char[]>& mem, std::size_t n) {
  if (b.start != nullptr) return;
  mem.reset(new char[n]);  // bad_alloc: caught by guarded()
  b.reset(mem.get(), n);
}

void give_back_if_empty(Buf& b, std::unique_ptr<char[]>& mem) {
  if (b.start == nullptr || b.pos != b.last) return;
  b = Buf{};
  mem.reset();
}

void relay(Session& s) {
  Connection& c = *s.c;
  Connection& u = *s.up;
  bool progress = false;
  if (c.read->ready && !s.client_eof) take_buffer(s.to_up, s.in_mem, s.to_up_size);
  if (u.read->ready && !s.up_eof) take_buffer(s.to_client, s.up_mem, s.to_client_size);
  if (!upstream::relay(c, u, s.to_up, s.client_eof, s.up_shut, progress) ||
      !upstream::relay(u, c, s.to_client, s.up_eof, s.client_shut, progress)) {
    return finalize(s, "connection error");
  }
  give_back_if_empty(s.to_up, s.in_mem);
  give_back_if_empty(s.to_client, s.up_mem);
  // As nginx's mail proxy: either side's end, once delivered, ends the session.
  if (s.client_eof && s.to_up.pos == s.to_up.last) return finalize(s, "client closed");
  if (s.up_eof && s.to_client.pos == s.to_client.last) return finalize(s, "upstream closed");
  if (progress || !c.read->timer_set) c.loop->add_timer(*c.read, s.conf->proxy_timeout);
  Status st = c.loop->handle_read_event(*c.read, s.client_eof ? kEvClose : 0);
  if (st) st = c.loop->handle_read_event(*u.read, s.up_eof ? kEvClose : 0);
  if (st) st = c.loop->handle_write_event(*c.write);
  if (st) st = c.loop->handle_write_event(*u.write);
  if (!st) finalize(s, "event registration failed");
}

void relay_handler(Event& ev) {
  Session& s = of(ev);
  guarded(s, [&] {
    if (ev.timedout || s.c->close || ev.owner<Connection>()->close) {
      bool timedout = ev.timedout;
      ev.timedout = 0;
      if (timedout) {
        VIGIL_LOG(*s.c->log, kInfo, ETIMEDOUT, "upstream timed out while proxying, client: %s",
                  s.client_addr.c_str());
      }
      return finalize(s, timedout ? "proxy timed out" : "closed by the worker");
    }
    relay(s);
  });
}

void start_relay(Session& s) {
  Connection& c = *s.c;
  Connection& u = *s.up;
  s.state = State::kRelay;
  mail_counters()->relayed.add();
  c.loop->del_timer(*u.read);
  c.loop->del_timer(*c.read);
  // The two buffers of the login become the relay's (nginx's mail proxy
  // does the same with its client buffer): what the client sent ahead
  // stays in `in`; towards the client go what it still has to hear, then
  // the login answer, then whatever the backend already sent after it.
  const std::size_t pending_client = static_cast<std::size_t>(s.in.last - s.in.pos);
  const std::size_t pending_up = static_cast<std::size_t>(s.up_in.last - s.up_in.pos);
  const std::string_view unsent = std::string_view(s.out).substr(s.out_sent);
  const std::size_t head = unsent.size() + s.backend_final.size();
  std::memmove(s.in.start, s.in.pos, pending_client);
  s.to_up.reset(s.in.start, static_cast<std::size_t>(s.in.end - s.in.start));
  s.to_up.last += pending_client;
  const std::size_t up_cap = static_cast<std::size_t>(s.up_in.end - s.up_in.start);
  s.to_up_size = static_cast<std::size_t>(s.in.end - s.in.start);
  s.to_client_size = up_cap;
  if (head + pending_up <= up_cap) {
    std::memmove(s.up_in.start + head, s.up_in.pos, pending_up);
    s.to_client.reset(s.up_in.start, up_cap);
  } else {
    std::unique_ptr<char[]> big(new char[head + pending_up]);  // bad_alloc: caught by guarded()
    std::memcpy(big.get() + head, s.up_in.pos, pending_up);
    s.up_mem = std::move(big);
    s.to_client.reset(s.up_mem.get(), head + pending_up);
  }
  std::memcpy(s.to_client.start, unsent.data(), unsent.size());
  std::memcpy(s.to_client.start + unsent.size(), s.backend_final.data(), s.backend_final.size());
  s.to_client.last = s.to_client.start + head + pending_up;
  s.in = Buf{};
  s.up_in = Buf{};
  // Either side's end ends the session (below), so no half-close is passed
  // on to the other (nginx's mail proxy neither): a shutdown() right before
  // the close would only cost a system call. A TLS client still gets its
  // close_notify from the relay.
  s.up_shut = true;
  s.client_shut = s.c->ssl == nullptr;
  // Nothing of the login is needed any more.
  std::string().swap(s.out);
  s.out_sent = 0;
  std::string().swap(s.backend_final);
  std::string().swap(s.auth_req);
  std::string().swap(s.auth_resp);
  std::string().swap(s.pending_error);
  // No TCP_NODELAY towards the backend either (see protocol.cc).
  u.read->handler = relay_handler;
  u.write->handler = relay_handler;
  c.read->handler = relay_handler;
  c.write->handler = relay_handler;
  VIGIL_LOG(*c.log, kInfo, 0, "client logged in, client: %s, login: \"%s\", upstream: %s",
            s.client_addr.c_str(), s.login.c_str(), s.up_pc.name.c_str());
  // The relay reads only sockets marked ready. The read flags are exact
  // here (a short read cleared them, an event since set them), except for
  // a TLS client, whose library may hold decrypted bytes: try it. Writing
  // is tried on both (a full socket just says EAGAIN).
  if (c.ssl != nullptr) c.read->ready = 1;
  c.write->ready = 1;
  u.write->ready = 1;
  relay(s);
}

}  // namespace vigil::mail::detail
