// The response from the backend (nginx's ngx_http_proxy_process_status_line,
// _process_header, _input_filter_init and the chunked/length filters): the
// head is parsed strictly with codec/response_parser; the body's end is
// found per read, and the chunked coding taken off. The core (upstream_relay.cc) reads, relays and decides.
#include <cstdio>
#include <cstring>

#include "http/proxy/proxy.h"
#include "vigil/core/log.h"

namespace vigil::http::proxy {
namespace {

using upstream_core::HeadResult;
using upstream_core::kMaxResponseFields;
using upstream_core::log_error;

HeadResult invalid_header(ProxyState& ps) {
  char what[160];
  std::snprintf(what, sizeof what, "upstream sent invalid header: %s", ps.parser.error());
  log_error(ps, static_cast<int>(LogLevel::kError), 0, what);
  return HeadResult::kInvalid;
}

}  // namespace

HeadResult process_header(Upstream& u, Buf& b) {
  auto& ps = static_cast<ProxyState&>(u);
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
          return HeadResult::kInvalid;
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
        if (ps.parser.finish(ps.resp, ps.r->line.method == Method::kHead) != ResponseParse::kOk) {
          return invalid_header(ps);
        }
        return HeadResult::kDone;
      }
    }
    if (st == ResponseParse::kInvalid) return invalid_header(ps);
  }
  return HeadResult::kAgain;
}

bool input_filter_init(Upstream& u) {
  auto& ps = static_cast<ProxyState&>(u);
  ps.resp_rest = ps.resp.content_length;
  return rewrite_redirects(ps) && rewrite_cookies(ps);
}

// Accounts for `n` new body bytes at p (the end of `b`): where the body
// ends, and the chunked coding taken off (the client's framing is chosen by
// HTTP/1's head writer and made by the chunked body filter). False on a
// malformed body.
bool input_filter(Upstream& u, Buf& b, char* p, std::size_t n) {
  auto& ps = static_cast<ProxyState&>(u);
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
      char* w = p;  // the data is moved down to w, the framing taken off
      while (pos < n) {
        std::size_t used = 0;
        std::string_view data;
        ChunkStatus st = ps.resp_chunked.parse(std::string_view(p + pos, n - pos), used, data);
        if (st == ChunkStatus::kData) {
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
      b.last = w;
      return true;
    }
  }
  return true;
}

}  // namespace vigil::http::proxy
