// The request to the backend (nginx's ngx_http_proxy_create_request and
// ngx_http_proxy_body_output_filter): the head is built once, with nginx's
// URI rules and the hop-by-hop fields removed; the body goes as the core
// reads it from the client, one buffer at a time, as it is (Content-Length)
// or as one chunk per buffer (chunked to an HTTP/1.1 backend).
#include <cstdio>
#include <cstring>

#include "codec/head_writer.h"
#include "http/core/worker.h"
#include "http/proxy/proxy.h"
#include "vigil/core/log.h"

namespace vigil::http::proxy {
namespace {

using upstream_core::hop_by_hop;
using upstream_core::named_by_connection;

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

// Builds the request head into ps.head; false when out of memory.
bool build_request(ProxyState& ps) {
  Request& r = *ps.r;
  const ProxyConf& p = ps.pconf();
  const HttpLocConf& loc = *r.loc;

  // The URI (nginx's rules): with a URI part in proxy_pass, the part of the
  // normalised path the location matched is replaced by it; without one,
  // the client's URI goes as it came.
  std::string_view rest;
  // After an internal redirect (try_files) the new URI goes, escaped, as nginx.
  // With variables and a URI part in proxy_pass, the evaluated URI goes as
  // it is (nginx: no part of the path replaced, no arguments added).
  const bool evaluated = p.variables && ps.eval_has_uri;
  const bool replace = !evaluated && (p.has_uri || r.uri_redirected);
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

  // proxy_method, else the client's method.
  const std::size_t method_len =
      p.method.empty() ? r.line.method_name.size() : p.method.length(r);
  std::size_t need = method_len + 1 + 16;
  if (evaluated) {
    need += 1 + ps.eval_uri.size();
  } else if (replace) {
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
  // proxy_set_body: the body follows the head in the same buffer.
  if (p.body_set) need += static_cast<std::size_t>(ps.body_length);
  const std::size_t cap = (need + 1023) & ~std::size_t{1023};
  char* mem = r.hc->worker->buffers().get(cap);
  if (mem == nullptr) return false;
  ps.head.reset(mem, cap);
  ps.head_cap = static_cast<std::uint32_t>(cap);

  HeadWriter w{mem};
  if (p.method.empty()) {
    w.put(r.line.method_name);
  } else {
    w.p = p.method.write(r, w.p);
  }
  *w.p++ = ' ';
  ps.uri_off = static_cast<std::uint32_t>(w.p - mem);
  if (evaluated) {
    if (ps.eval_uri_slash) *w.p++ = '/';
    w.put(ps.eval_uri);
  } else if (replace) {
    w.put(p.uri);
    w.put_escaped_path(rest);
    if (!r.line.query.empty()) {  // nginx: args.len > 0
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
  if (ps.body_frame == BodyOut::kLength) {
    w.put("Content-Length: ");
    w.put_uint(static_cast<std::uint64_t>(ps.body_length));
    w.put(kCrlf);
  } else if (ps.body_frame == BodyOut::kChunked) {
    w.put("Transfer-Encoding: chunked\r\n");
  }
  w.put(kCrlf);
  if (p.body_set) w.p = p.set_body.write(r, w.p);
  ps.head.last = w.p;
  return true;
}

}  // namespace

int create_request(Upstream& u) {
  auto& ps = static_cast<ProxyState&>(u);
  Request& r = *ps.r;
  if (ps.pconf().body_set) {
    // proxy_set_body: its value is the body; the client's is not read.
    ps.body_frame = BodyOut::kLength;
    ps.body_length = static_cast<std::int64_t>(ps.pconf().set_body.length(r));
  } else if (ps.body_out) {
    if (r.body.done) {
      ps.body_frame = BodyOut::kLength;
      ps.body_length = static_cast<std::int64_t>(request_body_data(r).size());
    } else if (!r.body.chunked_in) {
      ps.body_frame = BodyOut::kLength;
      ps.body_length = r.check.content_length;
    } else if (ps.pconf().http_version == 1001) {
      ps.body_frame = BodyOut::kChunked;
    } else {
      // HTTP/1.0 has no chunked coding: start() reads such a body ahead
      // (into a temporary file when it outgrows its buffer), so this is
      // reached only when it could not be.
      VIGIL_LOG(*r.c->log, kError, 0,
                "*%llu a chunked request body larger than client_body_buffer_size cannot be "
                "sent with proxy_http_version 1.0",
                static_cast<unsigned long long>(r.c->number));
      return 411;
    }
  }
  return build_request(ps) ? 0 : 500;
}

std::size_t body_output(Upstream& u, Chain* out, std::size_t k) {
  auto& ps = static_cast<ProxyState&>(u);
  Buf& b = request_body_data(*ps.r);
  if (!b.empty()) {
    if (ps.body_frame == BodyOut::kChunked) {
      int len = std::snprintf(ps.chunk_head, sizeof ps.chunk_head, "%zx\r\n", b.size());
      ps.chunk_head_buf.reset(ps.chunk_head, sizeof ps.chunk_head);
      ps.chunk_head_buf.last = ps.chunk_head + len;
      out[k++].buf = &ps.chunk_head_buf;
      out[k++].buf = &b;
      const bool last = ps.r->body.done;
      const char* tail = last ? kChunkEndLast : kChunkEnd;
      const std::size_t tlen = last ? sizeof kChunkEndLast - 1 : sizeof kChunkEnd - 1;
      ps.chunk_tail_buf.reset(const_cast<char*>(tail), tlen);
      ps.chunk_tail_buf.last = ps.chunk_tail_buf.start + tlen;
      out[k++].buf = &ps.chunk_tail_buf;
      ps.last_chunk_queued = last;
    } else {
      out[k++].buf = &b;
    }
  } else if (ps.r->body.done && ps.body_frame == BodyOut::kChunked && !ps.last_chunk_queued) {
    ps.chunk_tail_buf.reset(const_cast<char*>(kLastChunk), sizeof kLastChunk - 1);
    ps.chunk_tail_buf.last = ps.chunk_tail_buf.start + sizeof kLastChunk - 1;
    out[k++].buf = &ps.chunk_tail_buf;
    ps.last_chunk_queued = true;
  }
  return k;
}

}  // namespace vigil::http::proxy
