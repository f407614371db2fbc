#pragma once
// The HTTP reverse proxy (nginx's ngx_http_proxy_module): the HTTP/1
// protocol on the upstream core (http/upstream/upstream.h). The core
// connects, retries, relays and finishes; this module fills its protocol
// table:
//
//   create_request     the request head (nginx's URI rules, proxy_set_header,
//                      hop-by-hop fields removed) and how the body is framed
//                      (Content-Length or chunked)     proxy_request.cc
//   reinit_request     per-attempt state back to the start   proxy.cc
//   body_output        a body buffer as is, or as one chunk  proxy_request.cc
//   process_header     the status line and fields, strictly
//                      (codec/response_parser)               proxy_response.cc
//   input_filter_init  where the body ends, proxy_redirect   proxy_response.cc
//   input_filter       Content-Length, chunked (decoded for an HTTP/1.0
//                      client), close-delimited              proxy_response.cc
//   finalize           the state's destructor                proxy.cc
//
// One ProxyState per proxied request, taken from the worker's buffer cache
// when proxy_pass runs and given back by the core when the request ends.

#include <cstddef>
#include <cstdint>

#include "codec/chunked.h"
#include "codec/response_parser.h"
#include "http/core/request.h"
#include "http/proxy/proxy_conf.h"
#include "http/upstream/upstream.h"

namespace vigil::http::proxy {

using upstream_core::Upstream;

enum class BodyOut : std::uint8_t {
  kNone,     // no body goes to the backend
  kLength,   // Content-Length (the client's, or the decoded length of a whole chunked body)
  kChunked,  // re-sent chunked, as it arrives (HTTP/1.1 to the backend)
};

struct ProxyState : Upstream {
  const ProxyConf& pconf() const { return static_cast<const ProxyConf&>(*conf); }

  // The request body's framing to the backend.
  BodyOut body_frame = BodyOut::kNone;
  std::int64_t body_length = -1;  // what Content-Length says to the backend
  char chunk_head[24];
  Buf chunk_head_buf;
  Buf chunk_tail_buf;
  bool last_chunk_queued = false;

  // The response head and body framing.
  ResponseParser parser;
  bool head_line_done = false;
  std::int64_t resp_rest = 0;
  ChunkedParser resp_chunked;
  // The Set-Cookie values proxy_cookie_* rewrote (a worker buffer, given
  // back when the request ends).
  char* cookie_mem = nullptr;
  std::uint32_t cookie_mem_size = 0;

  // proxy_pass with variables: the URL's URI part (in u.url_mem), sent as
  // it is, and $proxy_host.
  bool eval_has_uri = false;
  bool eval_uri_slash = false;  // the URI part starts with '?': a '/' goes first
  std::string_view eval_uri;
  std::string_view host_header;
  std::string_view port;  // $proxy_port
};

// ---- proxy.cc -----------------------------------------------------------------------
// proxy_pass's content handler (phases.h): reads the body itself, as it
// streams it to the backend.
extern const ContentHandler kContent;
// Starts proxying `r` (0: on its way, else a status).
int start(Request& r);

// ---- proxy_request.cc ---------------------------------------------------------------
int create_request(Upstream& u);
std::size_t body_output(Upstream& u, Chain* out, std::size_t k);

// ---- proxy_cookie.cc ------------------------------------------------------------------
// proxy_cookie_domain / _path / _flags on the response head's Set-Cookie
// fields (their values then point into ps.cookie_mem); false when out of memory.
bool rewrite_cookies(ProxyState& ps);
Status set_cookie_domain(const DirectiveCall& call, ProxyConf& p);
Status set_cookie_path(const DirectiveCall& call, ProxyConf& p);
Status set_cookie_flags(const DirectiveCall& call, ProxyConf& p);

// ---- proxy_redirect.cc ----------------------------------------------------------------
// proxy_redirect on the response head's Location and Refresh fields (the
// new values in the request's memory); false when out of memory.
bool rewrite_redirects(ProxyState& ps);
Status set_redirect(const DirectiveCall& call, ProxyConf& p);

// ---- proxy_response.cc ----------------------------------------------------------------
upstream_core::HeadResult process_header(Upstream& u, Buf& b);
bool input_filter_init(Upstream& u);
bool input_filter(Upstream& u, Buf& b, char* p, std::size_t n);

}  // namespace vigil::http::proxy
