// The response from the backend (nginx's ngx_http_proxy_process_status_line,
// _process_header, the header filter's part, and ngx_event_pipe without the
// temporary files): the head is parsed strictly, filtered and rewritten for
// the client; the body goes through a ring of at most proxy_buffers
// buffers. When the ring is full the backend is not read; when it is empty
// the client is not written: each side waits for the other.
#include <cstring>

#include "http/filters/add_header.h"
#include "codec/head_writer.h"
#include "http/proxy/proxy.h"
#include "http/core/worker.h"
#include "vigil/core/log.h"
#include "vigil/event/loop.h"

namespace vigil::http::proxy {
namespace {

// Bytes moved through one relay pass before the other connections get a turn.
constexpr std::size_t kRelayBudget = std::size_t{2} << 20;

constexpr std::string_view kServer = "Server: vigil/" VIGIL_VERSION "\r\n";

bool ring_alloc(ProxyState& ps, std::uint32_t i) {
  Buf& b = ps.ring[i];
  if (b.start != nullptr) return true;
  const std::size_t size = i == 0 ? ps.conf->buffer_size : ps.conf->buffers_size;
  char* mem = ps.r->hc->worker->buffers().get(size);
  if (mem == nullptr) return false;
  b.reset(mem, size);
  return true;
}

// Fields nginx hides from the client unless proxy_pass_header lets them by.
bool hidden(const ProxyConf& p, std::string_view name) {
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

// proxy_redirect default: "http[s]://<proxy_pass host><proxy_pass uri>..." in
// Location becomes "<location><...>" (relative, RFC 9110 §10.2.2 allows it).
std::string_view redirect_prefix(const ProxyState& ps, char* buf, std::size_t cap) {
  const ProxyConf& p = *ps.conf;
  std::string_view uri = p.has_uri ? std::string_view(p.uri) : std::string_view("/");
  const std::string_view scheme = p.https ? "https://" : "http://";
  const std::size_t n = scheme.size() + p.target.size() + uri.size();
  if (n > cap) return {};
  std::memcpy(buf, scheme.data(), scheme.size());
  std::memcpy(buf + scheme.size(), p.target.data(), p.target.size());
  std::memcpy(buf + scheme.size() + p.target.size(), uri.data(), uri.size());
  return {buf, n};
}

}  // namespace

// Builds the client's response head into r.hbuf. `upgrade`: a 101 tunnel.
bool build_client_head(ProxyState& ps, bool upgrade) {
  Request& r = *ps.r;
  const ProxyConf& p = *ps.conf;
  const HttpLocConf& loc = *r.loc;
  char prefix_mem[512];
  std::string_view prefix =
      p.redirect_default ? redirect_prefix(ps, prefix_mem, sizeof prefix_mem) : std::string_view();
  std::string_view replacement = p.has_uri ? std::string_view(loc.name) : std::string_view("/");

  r.status = ps.resp.status;  // before the lengths: add_header may use $status
  std::size_t need = 256 + ps.resp.reason.size() + replacement.size() +
                     add_headers_length(r, r.loc->add_headers.get(), ps.resp.status);
  for (std::uint32_t i = 0; i < ps.nfields; ++i) {
    need += ps.fields[i].name.size() + ps.fields[i].value.size() + 4;
  }
  char* mem = head_memory(r, need);
  if (mem == nullptr) return false;
  if ((ps.resp.body == BodyKind::kClose && !ps.encode_chunked) || upgrade ||
      status_closes(ps.resp.status)) {
    r.keepalive = false;
  } else {
    r.keepalive = r.check.keep_alive && !r.lingering && !r.c->close && loc.keepalive_timeout > 0 &&
                  r.c->requests < loc.keepalive_requests;
  }

  HeadWriter o{mem};
  o.put("HTTP/1.1 ");
  o.put_uint(static_cast<std::uint64_t>(ps.resp.status));
  *o.p++ = ' ';
  o.put(ps.resp.reason.empty() ? reason_phrase(ps.resp.status) : ps.resp.reason);
  o.put("\r\n");
  bool pass_server = false, pass_date = false;
  for (const auto& h : p.pass_headers) {
    pass_server = pass_server || h == "server";
    pass_date = pass_date || h == "date";
  }
  if (!pass_server) o.put(loc.server_tokens ? kServer : std::string_view("Server: vigil\r\n"));
  if (!pass_date) {
    o.put("Date: ");
    o.put(clock::imf_fixdate());
    o.put("\r\n");
  }
  for (std::uint32_t i = 0; i < ps.nfields; ++i) {
    const HeaderField& f = ps.fields[i];
    if (upgrade && f.id == HeaderId::kUpgrade) {
      o.put("Upgrade: ");
      o.put(f.value);
      o.put("\r\n");
      continue;
    }
    if (hop_by_hop(f.name) || hidden(p, f.name) ||
        named_by_connection(ps.fields, ps.nfields, f.name))
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
  o.p = write_add_headers(r, r.loc->add_headers.get(), ps.resp.status, o.p);
  if (ps.client_chunked) o.put("Transfer-Encoding: chunked\r\n");
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

namespace {

// Accounts for `n` new body bytes at p (the end of `b`): where the body
// ends, and the chunked coding taken off for a client that cannot have it.
// False on a malformed body.
bool account(ProxyState& ps, Buf& b, char* p, std::size_t n) {
  switch (ps.resp.body) {
    case BodyKind::kNone:
      if (n > 0) {
        b.last = p;
        ps.upstream_reusable = false;
      }
      return true;
    case BodyKind::kClose:
      return true;
    case BodyKind::kLength:
      if (static_cast<std::int64_t>(n) > ps.resp_rest) {
        b.last = p + ps.resp_rest;
        ps.upstream_reusable = false;
        n = static_cast<std::size_t>(ps.resp_rest);
      }
      ps.resp_rest -= static_cast<std::int64_t>(n);
      if (ps.resp_rest == 0) ps.resp_done = true;
      return true;
    case BodyKind::kChunked: {
      std::size_t pos = 0;
      char* w = p;  // decode_chunked: the data is moved down to w
      while (pos < n) {
        std::size_t used = 0;
        std::string_view data;
        ChunkStatus st = ps.resp_chunked.parse(std::string_view(p + pos, n - pos), used, data);
        if (st == ChunkStatus::kData && ps.decode_chunked) {
          std::memmove(w, data.data(), data.size());
          w += data.size();
        }
        pos += used;
        if (st == ChunkStatus::kData) continue;
        if (st == ChunkStatus::kAgain) break;
        if (st == ChunkStatus::kDone) {
          ps.resp_done = true;
          if (pos < n) ps.upstream_reusable = false;  // bytes after the body
          break;
        }
        return false;
      }
      b.last = ps.decode_chunked ? w : p + pos;
      return true;
    }
  }
  return true;
}

// encode_chunked: the chunk-size line written before a chunk of `n` bytes, in
// the kChunkLine bytes reserved for it (leading zeros keep its length fixed,
// which RFC 9112's chunk-size = 1*HEXDIG allows), and the CRLF after it.
constexpr std::size_t kChunkLine = 10;  // 8 hex digits, CRLF
constexpr std::size_t kChunkRoom = kChunkLine + 2;

void write_chunk_line(char* at, std::size_t n) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (int i = 7; i >= 0; --i) {
    at[i] = kHex[n & 0xf];
    n >>= 4;
  }
  at[8] = '\r';
  at[9] = '\n';
}

// The body bytes that came with the head (b.pos..b.last) become one chunk.
// The head before them is no longer needed (the client's head is built), so
// the chunk starts at b.start; a head is at least 16 bytes ("HTTP/1.1 200" and
// two CRLFs), more than the chunk's framing needs.
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

// The head is complete: what to do with this response.
void on_head(ProxyState& ps) {
  Request& r = *ps.r;
  Buf& b = ps.ring[0];
  if (ps.parser.finish(ps.resp, r.line.method == Method::kHead) != ResponseParse::kOk) {
    char what[160];
    std::snprintf(what, sizeof what, "upstream sent invalid header: %s", ps.parser.error());
    log_error(ps, static_cast<int>(LogLevel::kError), 0, what);
    next_upstream(ps, kNextInvalidHeader, 502);
    return;
  }
  if (r.nupstream > 0) {
    UpstreamTry& t = r.upstream_tries[r.nupstream - 1];
    t.status = ps.resp.status;
    t.time = static_cast<Msec>(msec_diff(clock::current_msec(), ps.try_msec));
  }
  if (ps.resp.status == 101) {
    if (!ps.upgrade_sent || !ps.resp.has_upgrade) {
      log_error(ps, static_cast<int>(LogLevel::kError), 0,
                "upstream sent \"101 Switching Protocols\" without an Upgrade asked for");
      next_upstream(ps, kNextInvalidHeader, 502);
      return;
    }
    start_tunnel(ps);
    return;
  }
  const unsigned bit = next_upstream_bit(ps.resp.status);
  if (bit != 0 && may_retry(ps, bit)) {
    // 403 and 404 are answers, not failures of the server (nginx).
    retry_after_response(ps, bit != kNextHttp403 && bit != kNextHttp404);
    return;
  }
  if (ps.conf->intercept_errors && ps.resp.status >= 300 &&
      r.loc->find_error_page(ps.resp.status) != nullptr) {
    const int status = ps.resp.status;
    close_upstream(ps, false);
    ps.stage = Stage::kDone;
    if (!ps.body_in_done) r.lingering = true;
    r.c->read->handler = block_reading;
    r.c->write->handler = write_handler;
    finalize_error(r, status);
    return;
  }

  ps.resp_rest = ps.resp.content_length;
  if (ps.resp.body == BodyKind::kNone || (ps.resp.body == BodyKind::kLength && ps.resp_rest == 0)) {
    ps.resp_done = true;
  }
  const bool chunked_ok = r.line.version >= 1001 && r.loc->chunked_transfer_encoding;
  if (ps.resp.body == BodyKind::kChunked) {
    if (chunked_ok) {
      ps.client_chunked = true;
    } else {
      ps.decode_chunked = true;  // an HTTP/1.0 client: the body ends at close
    }
  } else if (ps.resp.body == BodyKind::kClose && chunked_ok) {
    ps.client_chunked = true;
    ps.encode_chunked = true;
  }
  if (!build_client_head(ps, false)) {
    finish(ps, true);
    return;
  }
  if (ps.decode_chunked) r.keepalive = false;
  ps.nring = ps.conf->buffering ? ps.conf->buffers_num : 1;
  if (ps.nring > kMaxRing) ps.nring = kMaxRing;
  ps.stage = Stage::kRelay;
  // Body bytes that came with the head are accounted for like later ones.
  if (ps.encode_chunked && !frame_first_chunk(b)) {
    finish(ps, true);
    return;
  }
  char* body_start = b.pos;
  const std::size_t n = static_cast<std::size_t>(b.last - b.pos);
  if (!account(ps, b, body_start, n)) {
    log_error(ps, static_cast<int>(LogLevel::kError), 0, "upstream sent invalid chunked response");
    finish(ps, true);
    return;
  }
  if (!ps.request_sent) {
    // The backend answered before taking the whole request: it will not
    // read the rest, and the client's unread body ends the connection.
    ps.upstream_reusable = false;
    if (!ps.body_in_done) r.lingering = true;
    r.keepalive = false;
  }
  relay(ps);
}

}  // namespace

void release_ring(ProxyState& ps) {
  BufferCache& cache = ps.r->hc->worker->buffers();
  for (std::uint32_t i = 0; i < kMaxRing; ++i) {
    Buf& b = ps.ring[i];
    if (b.start == nullptr) continue;
    cache.put(b.start, static_cast<std::size_t>(b.end - b.start));
    b = Buf{};
  }
}

void read_response_head(ProxyState& ps) {
  Connection& u = *ps.u;
  EventLoop& loop = *ps.r->c->loop;
  if (!ring_alloc(ps, 0)) {
    finish(ps, true);
    return;
  }
  Buf& b = ps.ring[0];
  for (;;) {
    while (b.pos < b.last) {
      std::size_t used = 0;
      std::string_view in(b.pos, static_cast<std::size_t>(b.last - b.pos));
      ResponseParse st;
      if (!ps.head_line_done) {
        st = ps.parser.parse_status_line(in, used, ps.resp);
        b.pos += used;
        if (st == ResponseParse::kOk) {
          ps.head_line_done = true;
          continue;
        }
      } else {
        HeaderField f;
        st = ps.parser.parse_header(in, used, f);
        b.pos += used;
        if (st == ResponseParse::kOk) {
          if (ps.nfields == kMaxResponseFields) {
            log_error(ps, static_cast<int>(LogLevel::kError), 0,
                      "upstream sent too many header fields");
            next_upstream(ps, kNextInvalidHeader, 502);
            return;
          }
          ps.fields[ps.nfields++] = f;
          continue;
        }
        if (st == ResponseParse::kHeadersDone) {
          const int s = ps.resp.status;
          if (s >= 100 && s < 200 && s != 101) {
            // An interim response (100 Continue, 103): the final one follows.
            ps.parser.reset();
            ps.head_line_done = false;
            ps.nfields = 0;
            continue;
          }
          loop.del_timer(*u.read);
          on_head(ps);
          return;
        }
      }
      if (st == ResponseParse::kInvalid) {
        char what[160];
        std::snprintf(what, sizeof what, "upstream sent invalid header: %s", ps.parser.error());
        log_error(ps, static_cast<int>(LogLevel::kError), 0, what);
        next_upstream(ps, kNextInvalidHeader, 502);
        return;
      }
    }
    if (b.last == b.end) {
      log_error(ps, static_cast<int>(LogLevel::kError), 0, "upstream sent too big header");
      next_upstream(ps, kNextInvalidHeader, 502);
      return;
    }
    long n = kIoAgain;
    if (u.read->ready) n = u.recv(u, b.last, static_cast<std::size_t>(b.end - b.last));
    if (n == kIoAgain) {
      if (ps.request_sent && !u.read->timer_set) loop.add_timer(*u.read, ps.conf->read_timeout);
      if (!loop.handle_read_event(*u.read)) next_upstream(ps, kNextError, 502);
      return;
    }
    if (n == 0) {
      log_error(ps, static_cast<int>(LogLevel::kError), 0,
                "upstream prematurely closed connection");
      next_upstream(ps, kNextError, 502);
      return;
    }
    if (n < 0) {
      next_upstream(ps, kNextError, 502);
      return;
    }
    b.last += n;
    ps.resp_any = true;
  }
}

void relay(ProxyState& ps) {
  Request& r = *ps.r;
  Connection& c = *r.c;
  EventLoop& loop = *c.loop;
  std::size_t moved = 0;
  for (;;) {
    bool progress = false;
    // To the client: the head, then the ring from its oldest buffer.
    std::size_t k = 0;
    if (!r.hbuf.empty()) ps.ring_chain[k++].buf = &r.hbuf;
    for (std::uint32_t i = ps.ring_head;; i = (i + 1) % ps.nring) {
      if (!ps.ring[i].empty()) ps.ring_chain[k++].buf = &ps.ring[i];
      if (i == ps.ring_tail) break;
    }
    if (!ps.last_chunk_buf.empty()) ps.ring_chain[k++].buf = &ps.last_chunk_buf;
    if (k > 0 && c.write->ready) {
      for (std::size_t i = 0; i < k; ++i) {
        ps.ring_chain[i].next = i + 1 < k ? &ps.ring_chain[i + 1] : nullptr;
      }
      const off_t before = c.sent;
      Chain* rest = c.send_chain(c, &ps.ring_chain[0], 0);
      if (rest == kChainError) {
        finish(ps, true);
        return;
      }
      if (c.sent != before) {
        progress = true;
        moved += static_cast<std::size_t>(c.sent - before);
      }
      // Sent buffers become free, oldest first.
      while (ps.ring_head != ps.ring_tail && ps.ring[ps.ring_head].empty()) {
        Buf& h = ps.ring[ps.ring_head];
        h.pos = h.last = h.start;
        ps.ring_head = (ps.ring_head + 1) % ps.nring;
      }
      Buf& t = ps.ring[ps.ring_tail];
      if (ps.ring_head == ps.ring_tail && t.empty()) t.pos = t.last = t.start;
    }
    // From the backend, while a buffer has room (filling the ring before the
    // next write makes that write one large writev).
    while (!ps.resp_done && !ps.upstream_eof && ps.u != nullptr && ps.u->read->ready) {
      Buf* t = &ps.ring[ps.ring_tail];
      // encode_chunked: a read needs room for its chunk's framing and a byte.
      const std::size_t need = ps.encode_chunked ? kChunkRoom + 1 : 1;
      if (static_cast<std::size_t>(t->end - t->last) < need) {
        const std::uint32_t next = (ps.ring_tail + 1) % ps.nring;
        if (next != ps.ring_head && ring_alloc(ps, next)) {
          ps.ring_tail = next;
          t = &ps.ring[next];
          t->pos = t->last = t->start;
        } else {
          t = nullptr;
        }
      }
      if (t != nullptr) {
        char* at = t->last;
        const std::size_t frame = ps.encode_chunked ? kChunkLine : 0;
        const long n = ps.u->recv(*ps.u, at + frame,
                                  static_cast<std::size_t>(t->end - t->last) - need + 1);
        if (n > 0 && ps.encode_chunked) {
          write_chunk_line(at, static_cast<std::size_t>(n));
          at[kChunkLine + n] = '\r';
          at[kChunkLine + n + 1] = '\n';
          t->last += kChunkRoom + n;
          moved += static_cast<std::size_t>(n);
          progress = true;
        } else if (n > 0) {
          t->last += n;
          moved += static_cast<std::size_t>(n);
          progress = true;
          if (!account(ps, *t, at, static_cast<std::size_t>(n))) {
            log_error(ps, static_cast<int>(LogLevel::kError), 0,
                      "upstream sent invalid chunked response");
            finish(ps, true);
            return;
          }
        } else if (n == 0 || n == kIoError) {
          ps.upstream_eof = true;
          progress = true;
          if (n == 0 && ps.resp.body == BodyKind::kClose) {
            ps.resp_done = true;
            if (ps.encode_chunked) {
              ps.last_chunk_buf.reset(ps.last_chunk, sizeof ps.last_chunk);
              ps.last_chunk_buf.last = ps.last_chunk_buf.start + sizeof ps.last_chunk;
            }
          } else {
            ps.premature = true;
            log_error(ps, static_cast<int>(LogLevel::kError), 0,
                      "upstream prematurely closed connection");
          }
        } else {
          break;  // kIoAgain
        }
      } else {
        break;  // the ring is full
      }
    }
    if (!progress) break;
    if (moved >= kRelayBudget) {
      loop.posted_next().post(*c.write);
      return;
    }
  }

  bool all_sent = r.hbuf.empty() && ps.last_chunk_buf.empty();
  for (std::uint32_t i = 0; i < ps.nring && all_sent; ++i) all_sent = ps.ring[i].empty();
  if (all_sent && (ps.resp_done || ps.premature)) {
    // A body cut short is never presented as complete: the client connection
    // closes (the length or the chunked coding it was promised tells it).
    finish(ps, ps.premature);
    return;
  }
  if (!all_sent) {
    if (!c.write->ready) loop.add_timer(*c.write, r.loc->send_timeout);
  } else {
    loop.del_timer(*c.write);
  }
  if (!loop.handle_write_event(*c.write)) {
    finish(ps, true);
    return;
  }
  if (ps.u != nullptr && !ps.resp_done && !ps.upstream_eof) {
    Buf& t = ps.ring[ps.ring_tail];
    const std::size_t need = ps.encode_chunked ? kChunkRoom + 1 : 1;
    const bool room = static_cast<std::size_t>(t.end - t.last) >= need ||
                      (ps.ring_tail + 1) % ps.nring != ps.ring_head;
    if (room && !ps.u->read->ready) {
      loop.add_timer(*ps.u->read, ps.conf->read_timeout);
    } else {
      loop.del_timer(*ps.u->read);  // paused by the client: not the backend's fault
    }
    if (!loop.handle_read_event(*ps.u->read)) finish(ps, true);
  }
}

}  // namespace vigil::http::proxy
