// The request to the backend (nginx's ngx_http_proxy_create_request and the
// request body path of ngx_http_upstream): the head is built once, with
// nginx's URI rules and the hop-by-hop fields removed; the body streams from
// the client through one buffer, so a slow backend stops the client's reads.
#include <cstring>

#include "codec/head_writer.h"
#include "http/proxy/proxy.h"
#include "http/core/worker.h"
#include "vigil/core/log.h"
#include "vigil/event/loop.h"

namespace vigil::http::proxy {
namespace {

constexpr std::string_view kCrlf = "\r\n";
constexpr char kChunkEnd[] = "\r\n";
constexpr char kChunkEndLast[] = "\r\n0\r\n\r\n";
constexpr char kLastChunk[] = "0\r\n\r\n";

bool dropped(const Request& r, const ProxyConf& p, const HeaderField& f) {
  if (hop_by_hop(f.name) || iequals(f.name, "content-length") || iequals(f.name, "expect")) {
    return true;
  }
  for (const auto& h : p.set_headers) {
    if (iequals(h.name, f.name)) return true;
  }
  return named_by_connection(r.fields, r.nfields, f.name);
}

// Moves body bytes from the client's header buffer (what arrived with the
// head) into ps.body.
void take_buffered(ProxyState& ps, Buf& hb) {
  Buf& b = ps.body;
  const std::size_t room = static_cast<std::size_t>(b.end - b.last);
  const std::size_t have = static_cast<std::size_t>(hb.last - hb.pos);
  if (!ps.body_chunked_in) {
    std::size_t n = have < room ? have : room;
    if (static_cast<std::int64_t>(n) > ps.body_rest) n = static_cast<std::size_t>(ps.body_rest);
    std::memcpy(b.last, hb.pos, n);
    b.last += n;
    hb.pos += n;
    ps.body_rest -= static_cast<std::int64_t>(n);
    if (ps.body_rest == 0) ps.body_in_done = true;
    return;
  }
}

// Decodes chunked input [p, p + n) into ps.body at b.last (the data never
// overtakes the input, so p may lie inside the body buffer itself). Returns
// the bytes consumed, or -1 with `status` set (400, 413).
long decode_chunked(ProxyState& ps, const char* p, std::size_t n, int& status) {
  Buf& b = ps.body;
  std::size_t pos = 0;
  while (pos < n && !ps.body_in_done) {
    std::size_t used = 0;
    std::string_view data;
    ChunkStatus st = ps.body_chunked.parse(std::string_view(p + pos, n - pos), used, data);
    pos += used;
    switch (st) {
      case ChunkStatus::kData:
        std::memmove(b.last, data.data(), data.size());
        b.last += data.size();
        continue;
      case ChunkStatus::kAgain:
        break;
      case ChunkStatus::kDone:
        ps.body_in_done = true;
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
void body_failed(ProxyState& ps, int status) {
  Request& r = *ps.r;
  ps.r->lingering = true;
  if (ps.u != nullptr || ps.stage != Stage::kBody) {
    ps.stage = Stage::kDone;
    ps.body_in_done = true;
    finish(ps, true);
    return;
  }
  ps.stage = Stage::kDone;
  r.c->read->handler = block_reading;
  r.c->write->handler = write_handler;
  finalize_error(r, status);
}

}  // namespace

bool hop_by_hop(std::string_view name) {
  static constexpr std::string_view kNames[] = {"connection",      "keep-alive",        "te",
                                                "trailer",         "transfer-encoding", "upgrade",
                                                "proxy-connection"};
  for (auto n : kNames) {
    if (iequals(n, name)) return true;
  }
  return false;
}

bool named_by_connection(const HeaderField* fields, std::uint32_t n, std::string_view name) {
  for (std::uint32_t i = 0; i < n; ++i) {
    if (fields[i].id == HeaderId::kConnection && list_has_token(fields[i].value, name)) return true;
  }
  return false;
}

bool build_request(ProxyState& ps) {
  Request& r = *ps.r;
  const ProxyConf& p = *ps.conf;
  const HttpLocConf& loc = *r.loc;

  // The URI (nginx's rules): with a URI part in proxy_pass, the part of the
  // normalised path the location matched is replaced by it; without one,
  // the client's URI goes as it came.
  std::string_view rest;
  // After an internal redirect (try_files) the new URI goes, escaped, as nginx.
  bool replace = p.has_uri || r.uri_redirected;
  if (replace) {
    std::string_view uri = r.uri;
    if (p.has_uri && uri.starts_with(loc.name)) {
      rest = uri.substr(loc.name.size());
    } else {
      rest = uri;  // an internal redirect to here: the whole path follows
    }
  }
  std::string_view raw = r.line.target;
  if (r.line.form == TargetForm::kAbsolute) {
    raw = r.line.path.empty() ? std::string_view("/") : r.line.path;
  }

  std::size_t need = r.line.method_name.size() + 1 + 16;
  if (replace) {
    need += p.uri.size() + 3 * rest.size() + 1 + r.line.query.size();
  } else {
    need += raw.size() + 1 + r.line.query.size();
  }
  for (const auto& h : p.set_headers) need += h.name.size() + 4 + h.value.length(r);
  if (p.pass_request_headers) {
    for (std::uint32_t i = 0; i < r.nfields; ++i) {
      need += r.fields[i].name.size() + r.fields[i].value.size() + 4;
    }
  }
  need += 64;  // framing and the final CRLF
  const std::size_t cap = (need + 1023) & ~std::size_t{1023};
  char* mem = r.hc->worker->buffers().get(cap);
  if (mem == nullptr) return false;
  ps.head.reset(mem, cap);
  ps.head_cap = static_cast<std::uint32_t>(cap);

  HeadWriter w{mem};
  w.put(r.line.method_name);
  *w.p++ = ' ';
  ps.uri_off = static_cast<std::uint32_t>(w.p - mem);
  if (replace) {
    w.put(p.uri);
    w.put_escaped_path(rest);
    if (r.line.has_query) {
      *w.p++ = '?';
      w.put(r.line.query);
    }
  } else {
    w.put(raw);
    if (r.line.form == TargetForm::kAbsolute && r.line.has_query) {
      *w.p++ = '?';
      w.put(r.line.query);
    }
  }
  ps.uri_len = static_cast<std::uint32_t>(w.p - mem) - ps.uri_off;
  w.put(p.http_version == 1001 ? " HTTP/1.1\r\n" : " HTTP/1.0\r\n");

  for (const auto& h : p.set_headers) {
    if (h.value.length(r) == 0) continue;  // an empty value drops the field (nginx)
    char* start = w.p;
    w.put(h.name);
    w.put(": ");
    char* value = w.p;
    w.p = h.value.write(r, w.p);
    if (w.p == value) {  // empty after all
      w.p = start;
      continue;
    }
    w.put(kCrlf);
    if (iequals(h.name, "upgrade")) ps.upgrade_sent = true;
  }
  if (p.pass_request_headers) {
    for (std::uint32_t i = 0; i < r.nfields; ++i) {
      const HeaderField& f = r.fields[i];
      if (dropped(r, p, f)) continue;
      w.put(f.name);
      w.put(": ");
      w.put(f.value);
      w.put(kCrlf);
    }
  }
  if (ps.body_out == BodyOut::kLength) {
    w.put("Content-Length: ");
    w.put_uint(static_cast<std::uint64_t>(ps.body_length));
    w.put(kCrlf);
  } else if (ps.body_out == BodyOut::kChunked) {
    w.put("Transfer-Encoding: chunked\r\n");
  }
  w.put(kCrlf);
  ps.head.last = w.p;
  return true;
}

int read_body(ProxyState& ps) {
  Request& r = *ps.r;
  Connection& c = *r.c;
  HttpConnection& hc = *r.hc;
  EventLoop& loop = *c.loop;
  Buf& b = ps.body;
  if (ps.body_in_done) return 1;
  if (b.pos == b.last && b.last != b.start) {
    b.pos = b.last = b.start;
    ps.body_replayable = false;
  }
  Buf& hb = hc.buffer;
  for (;;) {
    if (ps.body_in_done || b.last == b.end) return 1;
    if (hb.start != nullptr && hb.pos < hb.last) {
      if (ps.body_chunked_in) {
        const std::size_t room = static_cast<std::size_t>(b.end - b.last);
        std::size_t have = static_cast<std::size_t>(hb.last - hb.pos);
        if (have > room) have = room;
        int status = 0;
        long used = decode_chunked(ps, hb.pos, have, status);
        if (used < 0) {
          VIGIL_LOG(*c.log, kInfo, 0, "*%llu client sent invalid chunked body: %s",
                    static_cast<unsigned long long>(c.number), ps.body_chunked.error());
          body_failed(ps, status);
          return -1;
        }
        hb.pos += used;
      } else {
        take_buffered(ps, hb);
      }
      continue;
    }
    // "Expect: 100-continue" (RFC 9110 §10.1.1): the client waits for a word
    // before it sends the body. The backend is not asked: we read the body.
    if (r.check.expect_continue && !r.continue_sent) {
      static constexpr char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
      r.continue_sent = true;
      if (c.send(c, kContinue, sizeof kContinue - 1) != static_cast<long>(sizeof kContinue - 1)) {
        body_failed(ps, 400);
        return -1;
      }
    }
    long n = kIoAgain;
    char* at = b.last;
    std::size_t room = static_cast<std::size_t>(b.end - b.last);
    if (!ps.body_chunked_in && static_cast<std::int64_t>(room) > ps.body_rest) {
      room = static_cast<std::size_t>(ps.body_rest);
    }
    if (c.read->ready) n = c.recv(c, at, room);
    if (n == kIoAgain) {
      loop.add_timer(*c.read, r.loc->client_body_timeout);
      if (!loop.handle_read_event(*c.read)) {
        body_failed(ps, 500);
        return -1;
      }
      return b.pos < b.last ? 1 : 0;
    }
    if (n <= 0) {
      if (n == 0) {
        VIGIL_LOG(*c.log, kInfo, 0, "*%llu client prematurely closed connection",
                  static_cast<unsigned long long>(c.number));
      }
      body_failed(ps, 400);
      return -1;
    }
    loop.del_timer(*c.read);
    if (!ps.body_chunked_in) {
      b.last += n;
      ps.body_rest -= n;
      if (ps.body_rest == 0) ps.body_in_done = true;
      continue;
    }
    int status = 0;
    long used = decode_chunked(ps, at, static_cast<std::size_t>(n), status);
    if (used < 0) {
      VIGIL_LOG(*c.log, kInfo, 0, "*%llu client sent invalid chunked body: %s",
                static_cast<unsigned long long>(c.number), ps.body_chunked.error());
      body_failed(ps, status);
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

void send_request(ProxyState& ps) {
  Connection& u = *ps.u;
  EventLoop& loop = *ps.r->c->loop;
  for (;;) {
    if (ps.pending == nullptr) {
      std::size_t k = 0;
      if (!ps.head.empty()) ps.out[k++].buf = &ps.head;
      if (ps.body_out != BodyOut::kNone) {
        if (ps.body.empty() && !ps.body_in_done && k == 0) {
          const int rc = read_body(ps);
          if (rc < 0) return;
          if (rc == 0) return;  // the client's read event brings us back
        }
        Buf& b = ps.body;
        if (!b.empty()) {
          if (ps.body_out == BodyOut::kChunked) {
            int len = std::snprintf(ps.chunk_head, sizeof ps.chunk_head, "%zx\r\n", b.size());
            ps.chunk_head_buf.reset(ps.chunk_head, sizeof ps.chunk_head);
            ps.chunk_head_buf.last = ps.chunk_head + len;
            ps.out[k++].buf = &ps.chunk_head_buf;
            ps.out[k++].buf = &b;
            const bool last = ps.body_in_done;
            const char* tail = last ? kChunkEndLast : kChunkEnd;
            const std::size_t tlen = last ? sizeof kChunkEndLast - 1 : sizeof kChunkEnd - 1;
            ps.chunk_tail_buf.reset(const_cast<char*>(tail), tlen);
            ps.chunk_tail_buf.last = ps.chunk_tail_buf.start + tlen;
            ps.out[k++].buf = &ps.chunk_tail_buf;
            ps.last_chunk_queued = last;
          } else {
            ps.out[k++].buf = &b;
          }
        } else if (ps.body_in_done && ps.body_out == BodyOut::kChunked && !ps.last_chunk_queued) {
          ps.chunk_tail_buf.reset(const_cast<char*>(kLastChunk), sizeof kLastChunk - 1);
          ps.chunk_tail_buf.last = ps.chunk_tail_buf.start + sizeof kLastChunk - 1;
          ps.out[k++].buf = &ps.chunk_tail_buf;
          ps.last_chunk_queued = true;
        }
      }
      if (k == 0) {
        if (ps.body_out != BodyOut::kNone && !ps.body_in_done) continue;  // read more
        // All sent: now the response (which may have started already).
        ps.request_sent = true;
        loop.del_timer(*u.write);
        if (ps.stage == Stage::kSending) {
          ps.stage = Stage::kHead;
          loop.add_timer(*u.read, ps.conf->read_timeout);
          read_response_head(ps);
        }
        return;
      }
      for (std::size_t i = 0; i < k; ++i) ps.out[i].next = i + 1 < k ? &ps.out[i + 1] : nullptr;
      ps.pending = &ps.out[0];
    }
    const off_t before = u.sent;
    Chain* rest = u.send_chain(u, ps.pending, 0);
    if (u.sent != before) ps.sent_any = true;
    if (rest == kChainError) {
      log_error(ps, static_cast<int>(LogLevel::kError), 0, "upstream closed the connection");
      ps.pending = nullptr;
      next_upstream(ps, kNextError, 502);
      return;
    }
    ps.pending = rest;
    if (rest != nullptr) {
      if (!u.write->ready) {
        loop.add_timer(*u.write, ps.conf->send_timeout);
        if (!loop.handle_write_event(*u.write)) next_upstream(ps, kNextError, 502);
        return;
      }
      continue;
    }
    // This piece went out: an emptied body buffer is refilled from its start.
    if (!ps.body_in_done && ps.body.empty() && ps.body.start != nullptr) {
      ps.body.pos = ps.body.last = ps.body.start;
      ps.body_replayable = false;
    }
  }
}

bool rewind_request(ProxyState& ps) {
  if (!ps.body_replayable) return false;
  ps.head.pos = ps.head.start;
  if (ps.body.start != nullptr) ps.body.pos = ps.body.start;
  ps.pending = nullptr;
  ps.last_chunk_queued = false;
  ps.request_sent = false;
  ps.parser.reset();
  ps.resp = ResponseHead{};
  ps.head_line_done = false;
  ps.nfields = 0;
  ps.resp_any = false;
  ps.resp_done = false;
  ps.upstream_eof = false;
  ps.upstream_reusable = true;
  ps.premature = false;
  if (ps.ring[0].start != nullptr) ps.ring[0].pos = ps.ring[0].last = ps.ring[0].start;
  ps.ring_head = ps.ring_tail = 0;
  return true;
}

}  // namespace vigil::http::proxy
