// The bytes of an upstream request (nginx's ngx_http_upstream_send_request,
// _process_header and ngx_event_pipe without the temporary files): the
// request chain the protocol built goes out as the client's body arrives;
// the response head is read into one buffer and handed to the protocol's
// process_header; the body goes through a ring of at most buffers_num
// buffers, each read passed to the protocol's input_filter. When the ring is
// full the backend is not read; when it is empty the client is not written:
// each side waits for the other.
#include <cstring>

#include "core/rate_limit.h"
#include "http/core/filters.h"
#include "http/core/worker.h"
#include "http/upstream/client_side.h"
#include "http/upstream/upstream.h"
#include "vigil/core/log.h"
#include "vigil/event/loop.h"

namespace vigil::http::upstream_core {
namespace {

// Bytes moved through one relay pass before the other connections get a turn.
constexpr std::size_t kRelayBudget = std::size_t{2} << 20;

bool ring_alloc(Upstream& u, std::uint32_t i) {
  Buf& b = u.ring[i];
  if (b.start != nullptr) return true;
  const std::size_t size = i == 0 ? u.conf->buffer_size : u.conf->buffers_size;
  char* mem = u.r->hc->worker->buffers().get(size);
  if (mem == nullptr) return false;
  b.reset(mem, size);
  return true;
}

// Empties ring buffer i for reads: buffer 0 from after the response head
// when it is kept there (body_base), else from its start, and the head's
// fields are then gone.
void rewind_ring_buffer(Upstream& u, std::uint32_t i) {
  Buf& b = u.ring[i];
  char* base = b.start;
  if (i == 0) {
    if (u.body_base != nullptr) {
      base = u.body_base;
    } else {
      u.nfields = 0;
    }
  }
  b.pos = b.last = base;
  b.last_buf = false;
}

// The head is complete (u.resp, u.fields): what to do with this response.
void on_head(Upstream& u) {
  Request& r = *u.r;
  Buf& b = u.ring[0];
  if (UpstreamTry* t = current_try(u); t != nullptr) t->response_length = b.size();
  // The head stays in buffer 0 when that leaves at least half of it for the body.
  const auto room = static_cast<std::size_t>(b.end - b.pos);
  u.body_base = 2 * room >= static_cast<std::size_t>(b.end - b.start) ? b.pos : nullptr;
  if (r.nupstream > 0) {
    UpstreamTry& t = r.upstream_tries[r.nupstream - 1];
    t.status = u.resp.status;
    t.header_time = static_cast<Msec>(msec_diff(clock::current_msec(), u.try_msec));
    t.has_header = true;
  }
  if (u.resp.status == 101) {
    if (!u.upgrade_sent || !u.resp.has_upgrade) {
      log_error(u, static_cast<int>(LogLevel::kError), 0,
                "upstream sent \"101 Switching Protocols\" without an Upgrade asked for");
      next_upstream(u, kNextInvalidHeader, 502);
      return;
    }
    start_tunnel(u);
    return;
  }
  const unsigned bit = next_upstream_bit(u.resp.status);
  if (bit != 0 && may_retry(u, bit)) {
    // 403 and 404 are answers, not failures of the server (nginx).
    retry_after_response(u, bit != kNextHttp403 && bit != kNextHttp404);
    return;
  }
  if (u.conf->intercept_errors && u.resp.status >= 300 &&
      r.loc->find_error_page(u.resp.status) != nullptr) {
    const int status = u.resp.status;
    close_upstream(u, false);
    answer_intercepted(u, status);
    return;
  }
  accel_limit_rate(u);
  if (accel_redirect(u)) return;

  if (u.resp.body == BodyKind::kNone ||
      (u.resp.body == BodyKind::kLength && u.resp.content_length == 0)) {
    u.resp_done = true;
  }
  if (!u.request_sent) {
    // The backend answered before taking the whole request: it will not
    // read the rest, and a client body not read to its end closes the
    // client connection (the head says so).
    u.upstream_reusable = false;
    if (!r.body.done) r.lingering = true;
  }
  if (!u.protocol->input_filter_init(u) || send_client_head(u, false) != 0) {
    finish(u, true);
    return;
  }
  u.nring = u.conf->buffering ? u.conf->buffers_num : 1;
  if (u.nring > kMaxRing) u.nring = kMaxRing;
  u.stage = Stage::kRelay;
  u.relay_msec = clock::current_msec();
  // Body bytes that came with the head are accounted for like later ones.
  if (!u.protocol->input_filter(u, b, b.pos, static_cast<std::size_t>(b.last - b.pos))) {
    log_error(u, static_cast<int>(LogLevel::kError), 0, "upstream sent invalid chunked response");
    finish(u, true);
    return;
  }
  relay(u);
}

// The writer has sent everything passed to it: the sealed buffers are
// empty, and free for reads again.
void unseal(Upstream& u) {
  for (std::uint32_t i = u.ring_head;; i = (i + 1) % u.nring) {
    rewind_ring_buffer(u, i);
    if (i == u.sealed_end) break;
  }
  u.ring_head = u.sealed_end == u.ring_tail ? u.ring_tail : (u.sealed_end + 1) % u.nring;
  u.sealed = false;
}

// Hands what the ring holds to the output filter chain, with the end of the
// body when it is here (never for a body cut short), as one chain: the
// chunked filter makes it one chunk. With no body bytes the head goes out
// alone. The buffers stay sealed until the writer has sent them.
// kNothingToPass when there was nothing to hand over (no bytes, no end, the
// head sent), else what output_filter returned.
constexpr int kNothingToPass = 2;  // beside kBodyOk, kBodyAgain, kBodyError
int pass_to_client(Upstream& u) {
  std::size_t k = 0;
  for (std::uint32_t i = u.ring_head;; i = (i + 1) % u.nring) {
    if (!u.ring[i].empty()) u.ring_chain[k++].buf = &u.ring[i];
    if (i == u.ring_tail) break;
  }
  if (k > 0) {
    u.sealed = true;
    u.sealed_end = u.ring_tail;
  }
  if (u.resp_done && !u.last_passed) {
    u.last_passed = true;
    if (k > 0) {
      u.ring_chain[k - 1].buf->last_buf = true;
    } else {
      u.end_mark = Buf{};
      u.end_mark.last_buf = true;
      u.ring_chain[k++].buf = &u.end_mark;
    }
  }
  if (k == 0 && u.r->hbuf.empty()) return kNothingToPass;
  for (std::size_t i = 0; i < k; ++i) {
    u.ring_chain[i].next = i + 1 < k ? &u.ring_chain[i + 1] : nullptr;
  }
  return output_filter(*u.r, k > 0 ? &u.ring_chain[0] : nullptr);
}

// What may be read from the backend now under proxy_limit_rate (-1: no
// limit). Nothing: the read event is delayed with a timer for when the next
// byte is due (upstream_handler tells it from a read timeout).
off_t read_allowance(Upstream& u) {
  const std::uint64_t rate = u.conf->limit_rate;
  if (rate == 0) return -1;
  const off_t allowed = limit_rate_allowance(rate, 0, static_cast<off_t>(u.relay_read),
                                             msec_diff(clock::current_msec(), u.relay_msec));
  if (allowed > 0) return allowed;
  u.u->read->delayed = 1;
  u.r->c->loop->add_timer(*u.u->read, limit_rate_delay(rate, allowed));
  return 0;
}

// The tail buffer can take a read: not with the writer, and not full.
bool tail_open(const Upstream& u) {
  const Buf& t = u.ring[u.ring_tail];
  return !(u.sealed && u.ring_tail == u.sealed_end) && t.last < t.end;
}

}  // namespace

void send_request(Upstream& u) {
  Connection& c = *u.u;
  EventLoop& loop = *u.r->c->loop;
  Buf& body = u.r->body.buf;
  for (;;) {
    if (u.pending == nullptr) {
      std::size_t k = 0;
      if (!u.head.empty()) u.out[k++].buf = &u.head;
      if (u.body_out) {
        if (!u.r->body.done && !body.empty() && body.pos > body.start) {
          // What the backend's window held back (gRPC's flow control)
          // moves to the buffer's start and what else has come is read
          // after it (below), so the next frame fills the window as far as
          // the body allows, as nginx's does.
          const std::size_t rest = body.size();
          std::memmove(body.start, body.pos, rest);
          body.pos = body.start;
          body.last = body.start + rest;
          u.body_replayable = false;
        }
        // With the head too: whatever of the body is here already (read
        // with it, or waiting in the socket or the TLS layer) goes in the
        // head's write, as nginx reads what has arrived before it sends.
        if (!u.r->body.done && (body.empty() || body.last < body.end)) {
          const int rc = read_client_body(u);
          if (rc < 0) return;
          // The client's read event brings us back; a protocol with bytes of
          // its own (control frames) is asked for them first.
          if (rc == 0 && k == 0 && u.protocol->control_output == nullptr) return;
        }
        k = u.protocol->body_output(u, u.out, k);
      }
      if (k == 0 && u.body_blocked) {
        // The backend's flow-control window is closed: its WINDOW_UPDATE
        // comes with a read (the protocol then calls want_send); the send
        // timeout runs meanwhile.
        loop.add_timer(*c.write, u.conf->send_timeout);
        if (!loop.handle_read_event(*c.read)) next_upstream(u, kNextError, 502);
        return;
      }
      if (k == 0) {
        if (u.body_out && !u.r->body.done) {
          if (body.empty() && u.protocol->control_output != nullptr) return;  // as above
          continue;  // read more
        }
        // All sent: now the response (which may have started already).
        u.request_sent = true;
        loop.del_timer(*c.write);
        if (u.stage == Stage::kSending) {
          u.stage = Stage::kHead;
          loop.add_timer(*c.read, u.conf->read_timeout);
          read_response_head(u);
        }
        return;
      }
      for (std::size_t i = 0; i < k; ++i) u.out[i].next = i + 1 < k ? &u.out[i + 1] : nullptr;
      u.pending = &u.out[0];
    }
    const off_t before = c.sent;
    Chain* rest = c.send_chain(c, u.pending, 0);
    if (c.sent != before) {
      u.sent_any = true;
      if (UpstreamTry* t = current_try(u); t != nullptr) {
        t->bytes_sent += static_cast<std::uint64_t>(c.sent - before);
      }
    }
    if (rest == kChainError) {
      log_error(u, static_cast<int>(LogLevel::kError), 0, "upstream closed the connection");
      u.pending = nullptr;
      next_upstream(u, kNextError, 502);
      return;
    }
    u.pending = rest;
    if (rest != nullptr) {
      if (!c.write->ready) {
        loop.add_timer(*c.write, u.conf->send_timeout);
        if (!loop.handle_write_event(*c.write)) next_upstream(u, kNextError, 502);
        return;
      }
      continue;
    }
    // This piece went out: an emptied body buffer is refilled from its start.
    if (!u.r->body.done && body.empty() && body.start != nullptr) {
      body.pos = body.last = body.start;
      u.body_replayable = false;
    }
  }
}

void want_send(Upstream& u) {
  if (u.u == nullptr || u.u->write->posted) return;
  u.r->c->loop->post(*u.u->write);
}

bool send_control(Upstream& u) {
  if (u.protocol->control_output == nullptr || u.u == nullptr) return true;
  Connection& c = *u.u;
  EventLoop& loop = *u.r->c->loop;
  for (;;) {
    if (u.ctl_pending == nullptr) {
      Buf* b = u.protocol->control_output(u);
      if (b == nullptr) {
        loop.del_timer(*c.write);
        return true;
      }
      u.ctl_out.buf = b;
      u.ctl_out.next = nullptr;
      u.ctl_pending = &u.ctl_out;
    }
    const off_t before = c.sent;
    Chain* rest = c.send_chain(c, u.ctl_pending, 0);
    if (c.sent != before) {
      if (UpstreamTry* t = current_try(u); t != nullptr) {
        t->bytes_sent += static_cast<std::uint64_t>(c.sent - before);
      }
    }
    if (rest == kChainError) {
      u.ctl_pending = nullptr;
      u.upstream_reusable = false;
      return false;
    }
    u.ctl_pending = rest;
    if (rest != nullptr && !c.write->ready) {
      loop.add_timer(*c.write, u.conf->send_timeout);
      return static_cast<bool>(loop.handle_write_event(*c.write));
    }
  }
}

void release_ring(Upstream& u) {
  BufferCache& cache = u.r->hc->worker->buffers();
  for (std::uint32_t i = 0; i < kMaxRing; ++i) {
    Buf& b = u.ring[i];
    if (b.start == nullptr) continue;
    cache.put(b.start, static_cast<std::size_t>(b.end - b.start));
    b = Buf{};
  }
}

void read_response_head(Upstream& u) {
  Connection& c = *u.u;
  EventLoop& loop = *u.r->c->loop;
  if (!ring_alloc(u, 0)) {
    finish(u, true);
    return;
  }
  Buf& b = u.ring[0];
  for (;;) {
    if (b.pos < b.last) {
      switch (u.protocol->process_header(u, b)) {
        case HeadResult::kAgain:
          break;
        case HeadResult::kDone:
          loop.del_timer(*c.read);
          on_head(u);
          return;
        case HeadResult::kInvalid:
          next_upstream(u, kNextInvalidHeader, 502);
          return;
      }
    }
    if (b.last == b.end) {
      log_error(u, static_cast<int>(LogLevel::kError), 0, "upstream sent too big header");
      next_upstream(u, kNextInvalidHeader, 502);
      return;
    }
    long n = kIoAgain;
    if (c.read->ready) n = c.recv(c, b.last, static_cast<std::size_t>(b.end - b.last));
    if (n == kIoAgain) {
      if (u.request_sent && !c.read->timer_set) loop.add_timer(*c.read, u.conf->read_timeout);
      if (!loop.handle_read_event(*c.read)) next_upstream(u, kNextError, 502);
      return;
    }
    if (n == 0) {
      log_error(u, static_cast<int>(LogLevel::kError), 0, "upstream prematurely closed connection");
      next_upstream(u, kNextError, 502);
      return;
    }
    if (n < 0) {
      next_upstream(u, kNextError, 502);
      return;
    }
    b.last += n;
    u.resp_any = true;
    if (UpstreamTry* t = current_try(u); t != nullptr) t->bytes_received += static_cast<std::uint64_t>(n);
  }
}

void relay(Upstream& u) {
  Request& r = *u.r;
  Connection& c = *r.c;
  EventLoop& loop = *c.loop;
  std::size_t moved = 0;
  for (;;) {
    bool progress = false;
    const off_t sent = c.sent;
    // To the client: the writer goes on with what it holds (when the socket
    // can take it), and once it holds nothing it gets what the ring has.
    if (r.pending != nullptr && c.write->ready && !c.write->delayed) {
      if (output_filter(r, nullptr) == kBodyError) {
        finish(u, true);
        return;
      }
    }
    if (r.pending == nullptr) {
      if (u.sealed) unseal(u);
      const int rc = pass_to_client(u);
      if (rc == kBodyError) {
        finish(u, true);
        return;
      }
      if (rc == kBodyOk && u.sealed) unseal(u);
      if (rc != kNothingToPass) progress = true;
    }
    if (c.sent != sent) moved += static_cast<std::size_t>(c.sent - sent);
    // From the backend, while a buffer has room (filling the ring while the
    // writer is busy makes its next write one large writev).
    while (!u.resp_done && !u.upstream_eof && u.u != nullptr && u.u->read->ready &&
           !u.u->read->delayed) {
      const off_t allowed = read_allowance(u);
      if (allowed == 0) break;
      if (!tail_open(u)) {
        const std::uint32_t next = (u.ring_tail + 1) % u.nring;
        if (next == u.ring_head || !ring_alloc(u, next)) break;  // the ring is full
        u.ring_tail = next;
        rewind_ring_buffer(u, next);
      }
      Buf& t = u.ring[u.ring_tail];
      char* at = t.last;
      auto room = static_cast<std::size_t>(t.end - t.last);
      if (allowed > 0 && static_cast<std::size_t>(allowed) < room) {
        room = static_cast<std::size_t>(allowed);
      }
      const long n = u.u->recv(*u.u, at, room);
      if (n > 0) {
        t.last += n;
        u.relay_read += static_cast<std::uint64_t>(n);
        if (UpstreamTry* tr = current_try(u); tr != nullptr) {
          tr->bytes_received += static_cast<std::uint64_t>(n);
          tr->response_length += static_cast<std::uint64_t>(n);
        }
        moved += static_cast<std::size_t>(n);
        progress = true;
        if (!u.protocol->input_filter(u, t, at, static_cast<std::size_t>(n))) {
          log_error(u, static_cast<int>(LogLevel::kError), 0,
                    "upstream sent invalid chunked response");
          finish(u, true);
          return;
        }
      } else if (n == 0 || n == kIoError) {
        u.upstream_eof = true;
        progress = true;
        if (n == 0 && u.resp.body == BodyKind::kClose) {
          u.resp_done = true;
        } else {
          u.premature = true;
          log_error(u, static_cast<int>(LogLevel::kError), 0,
                    "upstream prematurely closed connection");
        }
      } else {
        break;  // kIoAgain
      }
    }
    if (!progress) break;
    if (moved >= kRelayBudget) {
      loop.posted_next().post(*c.write);
      return;
    }
  }

  if (r.pending == nullptr && (u.last_passed || u.premature)) {
    // All sent: the loop ends with the writer idle only when the ring had
    // nothing left to pass. A body cut short is never presented as
    // complete: the client connection closes (the length or the chunked
    // coding it was promised tells it).
    finish(u, u.premature);
    return;
  }
  // The writer armed the client's write event (send_timeout, limit_rate's
  // delay) when it holds bytes; the backend is read when a buffer has room.
  if (u.u != nullptr && !u.resp_done && !u.upstream_eof) {
    const bool room = tail_open(u) || (u.ring_tail + 1) % u.nring != u.ring_head;
    // While *_limit_rate delays reading, its timer is the event's (read_allowance).
    if (!u.u->read->delayed) {
      if (room && !u.u->read->ready) {
        loop.add_timer(*u.u->read, u.conf->read_timeout);
      } else {
        loop.del_timer(*u.u->read);  // paused by the client: not the backend's fault
      }
    }
    if (!loop.handle_read_event(*u.u->read)) finish(u, true);
  }
}

}  // namespace vigil::http::upstream_core
