// The proxy's handler and its protocol table on the upstream core (nginx's
// ngx_http_proxy_handler, which fills u->create_request and the rest).
#include "http/proxy/proxy.h"

#include <arpa/inet.h>

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <new>

#include "core/unix_addr.h"
#include "http/core/worker.h"
#include "vigil/core/log.h"

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

int proxy_content(Request& r) {
  // The proxy reads the body (request_body.h) as it streams it to the backend.
  return start(r);
}

// proxy_pass with variables (nginx's ngx_http_proxy_eval): the URL of this
// request names an upstream block (no port), an address, or a name the
// location's resolver looks up. 0, or the status the client gets.
int eval_url(ProxyState& ps) {
  Request& r = *ps.r;
  const ProxyConf& conf = ps.pconf();
  std::string_view url;
  if (!upstream_core::evaluate_url(ps, conf.url, url)) return 500;
  char what[600];
  auto fail = [&](const char* text) {
    std::snprintf(what, sizeof what, "%s in upstream \"%.*s\"", text,
                  static_cast<int>(url.size() > 400 ? 400 : url.size()), url.data());
    upstream_core::log_request_error(r, static_cast<int>(LogLevel::kError), what);
    return 500;
  };
  std::string_view rest;
  if (upstream_core::has_scheme(url, "http://")) {
    rest = url.substr(7);
    ps.https = false;
  } else if (upstream_core::has_scheme(url, "https://")) {
    rest = url.substr(8);
    ps.https = true;
  } else {
    std::snprintf(what, sizeof what, "invalid URL prefix in \"%.*s\"",
                  static_cast<int>(url.size() > 400 ? 400 : url.size()), url.data());
    upstream_core::log_request_error(r, static_cast<int>(LogLevel::kError), what);
    return 500;
  }
  if (upstream_core::has_scheme(rest, "unix:")) {
    // "unix:/path[:/uri]" (nginx): the Host is "localhost", no port.
    const std::size_t colon = rest.find(':', 5);
    const std::string_view path = rest.substr(5, colon == std::string_view::npos ? colon : colon - 5);
    if (colon != std::string_view::npos) {
      ps.eval_has_uri = true;
      ps.eval_uri = rest.substr(colon + 1);
      ps.eval_uri_slash = ps.eval_uri.empty() || ps.eval_uri.front() != '/';
    }
    sockaddr_storage ss{};
    socklen_t len = 0;
    if (!make_unix_sockaddr(path, ss, len)) return fail("invalid unix domain socket");
    ps.target = rest.substr(0, colon);
    ps.port = {};
    ps.host_header = "localhost";
    if (!upstream_core::set_address_group(ps, reinterpret_cast<sockaddr*>(&ss), len, ps.target)) {
      return 500;
    }
    return 0;
  }
  const std::size_t end = rest.find_first_of("/?");
  const std::string_view hostport = rest.substr(0, end);
  if (end != std::string_view::npos) {
    ps.eval_has_uri = true;
    ps.eval_uri = rest.substr(end);
    ps.eval_uri_slash = ps.eval_uri.front() == '?';
  }
  std::string_view host;
  std::string_view port_text;
  unsigned port = 0;
  if (const int status = upstream_core::route_to(ps, url, hostport, ps.https ? 443 : 80,
                                                 conf.groups, host, port_text, port);
      status != 0) {
    return status;
  }
  ps.port = port_text.empty() ? (ps.https ? std::string_view("443") : std::string_view("80"))
                              : port_text;
  // $proxy_host: the port only when it is not the scheme's.
  ps.host_header = port == (ps.https ? 443u : 80u) ? host : hostport;
  return 0;
}

}  // namespace

const ContentHandler kContent{"proxy_pass", proxy_content, true, true};

int start(Request& r) {
  const ProxyConf& conf = proxy_conf(*r.loc);
  if (!conf.enabled || (conf.group == nullptr && !conf.variables)) return 500;
  // A response that redirected the request (X-Accel-Redirect, an
  // intercepted error) is let go before this one starts.
  if (r.upstream != nullptr) upstream_core::release(r);
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
  ps->group = conf.group;
  ps->https = conf.https;
  ps->target = conf.target;
  if (conf.variables) {
    if (const int status = eval_url(*ps); status != 0) return status;
  }
  // HTTP/1.0 has no chunked coding: a chunked body is read ahead (into a
  // temporary file when it outgrows its buffer), its length counted.
  ps->buffer_body = r.check.chunked && conf.http_version == 1000;
  ps->own_body = conf.body_set;
  return upstream_core::start(*ps);
}

}  // namespace vigil::http::proxy
