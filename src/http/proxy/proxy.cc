// The proxy's handler and its protocol table on the upstream core (nginx's
// ngx_http_proxy_handler, which fills u->create_request and the rest).
#include "http/proxy/proxy.h"

#include <new>

#include "http/core/worker.h"

namespace vigil::http::proxy {
namespace {

void reinit_request(Upstream& u) {
  auto& ps = static_cast<ProxyState&>(u);
  ps.last_chunk_queued = false;
  ps.parser.reset();
  ps.head_line_done = false;
}

void finalize(Upstream& u) {
  auto& ps = static_cast<ProxyState&>(u);
  if (ps.cookie_mem != nullptr) ps.r->hc->worker->buffers().put(ps.cookie_mem, ps.cookie_mem_size);
  ps.~ProxyState();
}

constexpr upstream_core::UpstreamProtocol kHttp1{
    .create_request = create_request,
    .reinit_request = reinit_request,
    .body_output = body_output,
    .process_header = process_header,
    .input_filter_init = input_filter_init,
    .input_filter = input_filter,
    .finalize = finalize,
};

}  // namespace

namespace {

int proxy_content(Request& r) {
  // The proxy reads the body (request_body.h) as it streams it to the backend.
  return start(r);
}

}  // namespace

const ContentHandler kContent{"proxy_pass", proxy_content, true, true};

int start(Request& r) {
  const ProxyConf& conf = proxy_conf(*r.loc);
  if (!conf.enabled || conf.group == nullptr) return 500;
  HttpWorker& w = *r.hc->worker;
  char* mem = w.buffers().get(sizeof(ProxyState));
  if (mem == nullptr) return 500;
  auto* ps = new (mem) ProxyState();
  r.upstream = ps;
  ps->r = &r;
  ps->conf = &conf;
  ps->protocol = &kHttp1;
  ps->state_mem = mem;
  ps->state_size = sizeof(ProxyState);
  // HTTP/1.0 has no chunked coding: a chunked body is read ahead (into a
  // temporary file when it outgrows its buffer), its length counted.
  ps->buffer_body = r.check.chunked && conf.http_version == 1000;
  ps->own_body = conf.body_set;
  return upstream_core::start(*ps);
}

}  // namespace vigil::http::proxy
