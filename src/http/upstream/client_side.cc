// The client-facing half of an upstream request (client_side.h): everything
// that touches the client connection while a backend works. Kept together so
// the filter chain / transport interface can replace it as one file.
#include "http/upstream/client_side.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "codec/head_writer.h"
#include "event/tls/tls.h"
#include "http/core/worker.h"
#include "http/filters/add_header.h"
#include "vigil/core/log.h"
#include "vigil/event/loop.h"

namespace vigil::http::upstream_core {
namespace {

// Moves body bytes from the client's header buffer (what arrived with the
// head) into u.body.
void take_buffered(Upstream& u, Buf& hb) {
  Buf& b = u.body;
  const std::size_t room = static_cast<std::size_t>(b.end - b.last);
  const std::size_t have = static_cast<std::size_t>(hb.last - hb.pos);
  if (!u.body_chunked_in) {
    std::size_t n = have < room ? have : room;
    if (static_cast<std::int64_t>(n) > u.body_rest) n = static_cast<std::size_t>(u.body_rest);
    std::memcpy(b.last, hb.pos, n);
    b.last += n;
    hb.pos += n;
    u.body_rest -= static_cast<std::int64_t>(n);
    if (u.body_rest == 0) u.body_in_done = true;
    return;
  }
}

// Decodes chunked input [p, p + n) into u.body at b.last (the data never
// overtakes the input, so p may lie inside the body buffer itself). Returns
// the bytes consumed, or -1 with `status` set (400, 413).
long decode_chunked(Upstream& u, const char* p, std::size_t n, int& status) {
  Buf& b = u.body;
  std::size_t pos = 0;
  while (pos < n && !u.body_in_done) {
    std::size_t used = 0;
    std::string_view data;
    ChunkStatus st = u.body_chunked.parse(std::string_view(p + pos, n - pos), used, data);
    pos += used;
    switch (st) {
      case ChunkStatus::kData:
        std::memmove(b.last, data.data(), data.size());
        b.last += data.size();
        continue;
      case ChunkStatus::kAgain:
        break;
      case ChunkStatus::kDone:
        u.body_in_done = true;
        break;
      case ChunkStatus::kTooLarge:
        status = 413;
        return -1;
      case ChunkStatus::kBadRequest:
        status = 400;
        return -1;
    }
    if (st == ChunkStatus::kAgain) break;
  }
  return static_cast<long>(pos);
}

// The body cannot be read: answer (or close) and let go of the backend.
void body_failed(Upstream& u, int status) {
  Request& r = *u.r;
  u.r->lingering = true;
  if (u.u != nullptr || u.stage != Stage::kBody) {
    u.stage = Stage::kDone;
    u.body_in_done = true;
    finish(u, true);
    return;
  }
  u.stage = Stage::kDone;
  r.c->read->handler = block_reading;
  r.c->write->handler = write_handler;
  finalize_error(r, status);
}

// Reads the body ahead (*_request_buffering) until it is all here or the
// buffer is full.
void body_phase(Upstream& u) {
  const int rc = read_request_body(u);
  if (rc < 0) return;
  if (u.body_in_done || u.body.last == u.body.end) {
    u.r->c->loop->del_timer(*u.r->c->read);
    begin_connect(u);
  }
}

void check_broken(Upstream& u, Event& rev) {
  Connection& c = *u.r->c;
  if (!rev.ready && !rev.eof) return;
  // Under TLS the next request may be inside OpenSSL already, where the
  // socket shows nothing: it is pipelined input, and readiness must stay.
  char ch;
  const ssize_t n = tls_has_pending(c) ? 1 : ::recv(c.fd, &ch, 1, MSG_PEEK);
  if (n > 0) {
    // Pipelined input: it waits for the next request. A level-triggered
    // backend would report it again and again.
    if (!(c.loop->capabilities() & kCapClear) && rev.active) (void)c.loop->backend().del(rev, 0);
    return;
  }
  if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
    rev.ready = 0;
    return;
  }
  rev.eof = 1;
  log_error(u, static_cast<int>(LogLevel::kInfo), n == -1 ? errno : 0,
            "client prematurely closed connection");
  end_attempt(u, 0);
  u.stage = Stage::kDone;
  terminate_request(*u.r, 499);
}

// Fields nginx hides from the client unless *_pass_header lets them by.
bool hidden(const UpstreamConf& p, std::string_view name) {
  bool hide = iequals(name, "date") || iequals(name, "server") || iequals(name, "x-pad") ||
              (name.size() > 8 && iequals(name.substr(0, 8), "x-accel-"));
  for (const auto& h : p.hide_headers) {
    if (iequals(h, name)) hide = true;
  }
  if (hide) {
    for (const auto& h : p.pass_headers) {
      if (iequals(h, name)) return false;
    }
  }
  return hide;
}

}  // namespace

int client_start(Upstream& u) {
  Request& r = *u.r;
  const UpstreamConf& conf = *u.conf;
  Connection& c = *r.c;
  HttpWorker& w = *r.hc->worker;
  c.read->handler = client_read_handler;
  c.write->handler = client_write_handler;

  const bool has_body = r.body_chunked || r.body_rest > 0;
  if (has_body && !conf.pass_request_body) {
    r.lingering = true;  // the body is not read: the connection closes after the response
  }
  if (!has_body || !conf.pass_request_body) return 0;
  const std::size_t size = r.loc->client_body_buffer_size;
  char* b = w.buffers().get(size);
  if (b == nullptr) return 500;
  u.body.reset(b, size);
  u.body_cap = static_cast<std::uint32_t>(size);
  u.body_in = true;
  u.body_in_done = false;
  u.body_chunked_in = r.body_chunked;
  u.body_rest = r.body_rest;
  if (r.body_chunked) {
    ChunkedLimits limits;
    if (r.loc->client_max_body_size > 0) limits.max_body = r.loc->client_max_body_size;
    u.body_chunked = ChunkedParser(limits);
  }
  return 0;
}

int read_request_body(Upstream& u) {
  Request& r = *u.r;
  Connection& c = *r.c;
  HttpConnection& hc = *r.hc;
  EventLoop& loop = *c.loop;
  Buf& b = u.body;
  if (u.body_in_done) return 1;
  if (b.pos == b.last && b.last != b.start) {
    b.pos = b.last = b.start;
    u.body_replayable = false;
  }
  Buf& hb = hc.buffer;
  for (;;) {
    if (u.body_in_done || b.last == b.end) return 1;
    if (hb.start != nullptr && hb.pos < hb.last) {
      if (u.body_chunked_in) {
        const std::size_t room = static_cast<std::size_t>(b.end - b.last);
        std::size_t have = static_cast<std::size_t>(hb.last - hb.pos);
        if (have > room) have = room;
        int status = 0;
        long used = decode_chunked(u, hb.pos, have, status);
        if (used < 0) {
          VIGIL_LOG(*c.log, kInfo, 0, "*%llu client sent invalid chunked body: %s",
                    static_cast<unsigned long long>(c.number), u.body_chunked.error());
          body_failed(u, status);
          return -1;
        }
        hb.pos += used;
      } else {
        take_buffered(u, hb);
      }
      continue;
    }
    // The client may wait for "100 Continue" before it sends the body. The
    // backend is not asked: we read the body.
    if (!send_continue(r)) {
      body_failed(u, 400);
      return -1;
    }
    long n = kIoAgain;
    char* at = b.last;
    std::size_t room = static_cast<std::size_t>(b.end - b.last);
    if (!u.body_chunked_in && static_cast<std::int64_t>(room) > u.body_rest) {
      room = static_cast<std::size_t>(u.body_rest);
    }
    if (c.read->ready) n = c.recv(c, at, room);
    if (n == kIoAgain) {
      loop.add_timer(*c.read, r.loc->client_body_timeout);
      if (!loop.handle_read_event(*c.read)) {
        body_failed(u, 500);
        return -1;
      }
      return b.pos < b.last ? 1 : 0;
    }
    if (n <= 0) {
      if (n == 0) {
        VIGIL_LOG(*c.log, kInfo, 0, "*%llu client prematurely closed connection",
                  static_cast<unsigned long long>(c.number));
      }
      body_failed(u, 400);
      return -1;
    }
    loop.del_timer(*c.read);
    if (!u.body_chunked_in) {
      b.last += n;
      u.body_rest -= n;
      if (u.body_rest == 0) u.body_in_done = true;
      continue;
    }
    int status = 0;
    long used = decode_chunked(u, at, static_cast<std::size_t>(n), status);
    if (used < 0) {
      VIGIL_LOG(*c.log, kInfo, 0, "*%llu client sent invalid chunked body: %s",
                static_cast<unsigned long long>(c.number), u.body_chunked.error());
      body_failed(u, status);
      return -1;
    }
    if (used < n) {
      // Bytes after the chunked body (a pipelined request) landed in the
      // body buffer: keep them when the header buffer can take them, else
      // the connection closes after this response.
      const std::size_t extra = static_cast<std::size_t>(n - used);
      if (hb.start != nullptr && hb.pos == hb.last &&
          extra <= static_cast<std::size_t>(hb.end - hb.last)) {
        std::memmove(hb.last, at + used, extra);
        hb.last += extra;
      } else {
        r.lingering = true;
      }
    }
  }
}

void read_body_ahead(Upstream& u) {
  u.stage = Stage::kBody;
  body_phase(u);
}

bool build_client_head(Upstream& u, bool upgrade) {
  Request& r = *u.r;
  const UpstreamConf& p = *u.conf;
  const HttpLocConf& loc = *r.loc;
  const std::string_view prefix = u.redirect_from;
  const std::string_view replacement = u.redirect_to;

  r.status = u.resp.status;  // before the lengths: add_header may use $status
  std::size_t need = 256 + u.resp.reason.size() + replacement.size() +
                     add_headers_length(r, add_header_list(*r.loc), u.resp.status);
  for (std::uint32_t i = 0; i < u.nfields; ++i) {
    need += u.fields[i].name.size() + u.fields[i].value.size() + 4;
  }
  char* mem = head_memory(r, need);
  if (mem == nullptr) return false;
  if ((u.resp.body == BodyKind::kClose && !u.encode_chunked) || upgrade ||
      status_closes(u.resp.status)) {
    r.keepalive = false;
  } else {
    r.keepalive = r.check.keep_alive && !r.lingering && !r.c->close && loc.keepalive_timeout > 0 &&
                  r.c->requests < loc.keepalive_requests;
  }

  HeadWriter o{mem};
  o.put("HTTP/1.1 ");
  o.put_uint(static_cast<std::uint64_t>(u.resp.status));
  *o.p++ = ' ';
  o.put(u.resp.reason.empty() ? reason_phrase(u.resp.status) : u.resp.reason);
  o.put("\r\n");
  bool pass_server = false, pass_date = false;
  for (const auto& h : p.pass_headers) {
    pass_server = pass_server || h == "server";
    pass_date = pass_date || h == "date";
  }
  if (!pass_server) o.put(server_field(loc));
  if (!pass_date) {
    o.put("Date: ");
    o.put(clock::imf_fixdate());
    o.put("\r\n");
  }
  for (std::uint32_t i = 0; i < u.nfields; ++i) {
    const HeaderField& f = u.fields[i];
    if (upgrade && f.id == HeaderId::kUpgrade) {
      o.put("Upgrade: ");
      o.put(f.value);
      o.put("\r\n");
      continue;
    }
    if (hop_by_hop(f.name) || hidden(p, f.name) || named_by_connection(u.fields, u.nfields, f.name))
      continue;
    o.put(f.name);
    o.put(": ");
    if (!prefix.empty() && iequals(f.name, "location") && f.value.starts_with(prefix)) {
      o.put(replacement);
      o.put(f.value.substr(prefix.size()));
    } else {
      o.put(f.value);
    }
    o.put("\r\n");
  }
  o.p = write_add_headers(r, add_header_list(*r.loc), u.resp.status, o.p);
  if (u.client_chunked) o.put("Transfer-Encoding: chunked\r\n");
  if (upgrade) {
    o.put("Connection: upgrade\r\n");
  } else if (r.keepalive) {
    o.put("Connection: keep-alive\r\n");
  } else {
    o.put("Connection: close\r\n");
  }
  o.put("\r\n");
  r.hbuf.last = o.p;
  r.header_size = o.p - mem;
  return true;
}

bool send_to_client(Upstream& u, bool& progress, std::size_t& moved) {
  Request& r = *u.r;
  Connection& c = *r.c;
  // The head, then the ring from its oldest buffer, then the last chunk.
  std::size_t k = 0;
  if (!r.hbuf.empty()) u.ring_chain[k++].buf = &r.hbuf;
  for (std::uint32_t i = u.ring_head;; i = (i + 1) % u.nring) {
    if (!u.ring[i].empty()) u.ring_chain[k++].buf = &u.ring[i];
    if (i == u.ring_tail) break;
  }
  if (!u.last_chunk_buf.empty()) u.ring_chain[k++].buf = &u.last_chunk_buf;
  if (k == 0 || !c.write->ready || c.write->delayed) return true;
  // limit_rate applies to a proxied response as to any other (the head and
  // any chunked framing count, as the bytes on the wire).
  const off_t allowed = rate_allowance(r);
  if (allowed == 0) return true;  // delayed: the timer resumes the relay
  for (std::size_t i = 0; i < k; ++i) {
    u.ring_chain[i].next = i + 1 < k ? &u.ring_chain[i + 1] : nullptr;
  }
  const off_t before = c.sent;
  Chain* rest = c.send_chain(c, &u.ring_chain[0], allowed > 0 ? allowed : 0);
  if (rest == kChainError) return false;
  if (c.sent != before) {
    progress = true;
    moved += static_cast<std::size_t>(c.sent - before);
  }
  // Sent buffers become free, oldest first.
  while (u.ring_head != u.ring_tail && u.ring[u.ring_head].empty()) {
    Buf& h = u.ring[u.ring_head];
    h.pos = h.last = h.start;
    u.ring_head = (u.ring_head + 1) % u.nring;
  }
  Buf& t = u.ring[u.ring_tail];
  if (u.ring_head == u.ring_tail && t.empty()) t.pos = t.last = t.start;
  return true;
}

bool wait_client(Upstream& u, bool all_sent) {
  Request& r = *u.r;
  Connection& c = *r.c;
  EventLoop& loop = *c.loop;
  if (c.write->delayed) {
    // limit_rate: the delay's timer is set; the socket may be writable.
  } else if (!all_sent) {
    if (!c.write->ready) loop.add_timer(*c.write, r.loc->send_timeout);
  } else {
    loop.del_timer(*c.write);
  }
  return static_cast<bool>(loop.handle_write_event(*c.write));
}

void write_chunk_line(char* at, std::size_t n) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (int i = 7; i >= 0; --i) {
    at[i] = kHex[n & 0xf];
    n >>= 4;
  }
  at[8] = '\r';
  at[9] = '\n';
}

// The head before the bytes is no longer needed (the client's head is
// built), so the chunk starts at b.start; a head is at least 16 bytes
// ("HTTP/1.1 200" and two CRLFs), more than the chunk's framing needs.
bool frame_first_chunk(Buf& b) {
  const std::size_t n = static_cast<std::size_t>(b.last - b.pos);
  if (n == 0) return true;
  if (static_cast<std::size_t>(b.pos - b.start) < kChunkRoom) return false;
  std::memmove(b.start + kChunkLine, b.pos, n);
  write_chunk_line(b.start, n);
  b.pos = b.start;
  b.last = b.start + kChunkLine + n;
  *b.last++ = '\r';
  *b.last++ = '\n';
  return true;
}

bool tunnel_client_start(Upstream& u) {
  Request& r = *u.r;
  HttpConnection& hc = *r.hc;
  // The client -> backend direction uses the body buffer (a GET has none yet).
  if (u.body.start == nullptr) {
    const std::size_t size = r.loc->client_body_buffer_size;
    char* mem = hc.worker->buffers().get(size);
    if (mem == nullptr) return false;
    u.body.reset(mem, size);
    u.body_cap = static_cast<std::uint32_t>(size);
  }
  u.body.pos = u.body.last = u.body.start;
  // Bytes the client sent after its request head belong to the new protocol.
  Buf& hb = hc.buffer;
  if (hb.start != nullptr && hb.pos < hb.last) {
    std::size_t n = static_cast<std::size_t>(hb.last - hb.pos);
    if (n > u.body.free_space()) n = u.body.free_space();
    std::memcpy(u.body.last, hb.pos, n);
    u.body.last += n;
    hb.pos += n;
  }
  u.body_in_done = true;
  // The head goes out first, then what the backend sent after its 101.
  Connection& c = *r.c;
  while (!r.hbuf.empty()) {
    long n = c.send(c, r.hbuf.pos, r.hbuf.size());
    if (n == kIoError) return false;
    if (n == kIoAgain) break;
    r.hbuf.pos += n;
  }
  return true;
}

int tunnel_send_head(Upstream& u) {
  Request& r = *u.r;
  Connection& c = *r.c;
  EventLoop& loop = *c.loop;
  if (r.hbuf.empty()) return 1;
  // The 101 head is still on its way: nothing else goes before it.
  long n = c.write->ready ? c.send(c, r.hbuf.pos, r.hbuf.size()) : kIoAgain;
  if (n == kIoError) return -1;
  if (n > 0) r.hbuf.pos += n;
  if (!r.hbuf.empty()) {
    loop.add_timer(*c.write, r.loc->send_timeout);
    return loop.handle_write_event(*c.write) ? 0 : -1;
  }
  loop.del_timer(*c.write);
  return 1;
}

void answer(Upstream& u, int status) {
  Request& r = *u.r;
  Connection& c = *r.c;
  u.stage = Stage::kDone;
  if (!u.body_in_done) r.lingering = true;  // the rest of the body is not read
  c.loop->del_timer(*c.read);
  c.read->handler = block_reading;
  c.write->handler = write_handler;
  finalize_error(r, status);
}

void answer_intercepted(Upstream& u, int status) {
  Request& r = *u.r;
  u.stage = Stage::kDone;
  if (!u.body_in_done) r.lingering = true;
  r.c->read->handler = block_reading;
  r.c->write->handler = write_handler;
  finalize_error(r, status);
}

void client_finish(Upstream& u, bool error) {
  Request& r = *u.r;
  Connection& c = *r.c;
  EventLoop& loop = *c.loop;
  loop.del_timer(*c.read);
  loop.del_timer(*c.write);
  c.read->handler = block_reading;
  c.write->handler = write_handler;
  if (error) {
    terminate_request(r, 0);
    return;
  }
  if (!loop.handle_write_event(*c.write)) {
    terminate_request(r, 0);
    return;
  }
  finalize_request(r);
}

void client_read_handler(Event& ev) {
  Connection& c = *ev.owner<Connection>();
  auto& hc = *static_cast<HttpConnection*>(c.data);
  Request* r = hc.request;
  if (r == nullptr || r->upstream == nullptr) {
    block_reading(ev);
    return;
  }
  Upstream& u = *r->upstream;
  if (c.close) {
    end_attempt(u, 0);
    u.stage = Stage::kDone;
    terminate_request(*r, 0);
    return;
  }
  if (ev.timedout) {
    ev.timedout = 0;
    if (u.stage == Stage::kTunnel) {
      finish(u, false);
      return;
    }
    VIGIL_LOG(*c.log, kInfo, ETIMEDOUT, "*%llu client timed out reading the body",
              static_cast<unsigned long long>(c.number));
    c.timedout = 1;
    end_attempt(u, 0);
    u.stage = Stage::kDone;
    terminate_request(*r, 408);
    return;
  }
  switch (u.stage) {
    case Stage::kBody:
      body_phase(u);
      return;
    case Stage::kSending:
      if (!u.body_in_done) {
        send_request(u);
        return;
      }
      check_broken(u, ev);
      return;
    case Stage::kTunnel:
      tunnel(u);
      return;
    case Stage::kConnecting:
    case Stage::kHandshake:
    case Stage::kHead:
    case Stage::kRelay:
      if (!u.body_in_done) return;  // unread body: reading it would mean sending it
      check_broken(u, ev);
      return;
    case Stage::kDone:
      block_reading(ev);
      return;
  }
}

void client_write_handler(Event& ev) {
  Connection& c = *ev.owner<Connection>();
  auto& hc = *static_cast<HttpConnection*>(c.data);
  Request* r = hc.request;
  if (r == nullptr || r->upstream == nullptr) return;
  Upstream& u = *r->upstream;
  if (ev.delayed) {
    // limit_rate: only the delay's timer resumes the relay.
    if (!ev.timedout) {
      if (!c.loop->handle_write_event(ev)) finish(u, true);
      return;
    }
    ev.timedout = 0;
    ev.delayed = 0;
  } else if (ev.timedout) {
    ev.timedout = 0;
    VIGIL_LOG(*c.log, kInfo, ETIMEDOUT, "*%llu client timed out",
              static_cast<unsigned long long>(c.number));
    c.timedout = 1;
    finish(u, true);
    return;
  }
  if (u.stage == Stage::kRelay) {
    relay(u);
  } else if (u.stage == Stage::kTunnel) {
    tunnel(u);
  }
}

}  // namespace vigil::http::upstream_core
