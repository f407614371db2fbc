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
  if (ps.url_mem != nullptr) ps.r->hc->worker->buffers().put(ps.url_mem, ps.url_mem_size);
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


bool starts_with_nocase(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && iequals(s.substr(0, prefix.size()), prefix);
}

// proxy_pass with variables (nginx's ngx_http_proxy_eval): the URL of this
// request names an upstream block (no port), an address, or a name the
// location's resolver looks up. 0, or the status the client gets.
int eval_url(ProxyState& ps) {
  Request& r = *ps.r;
  const ProxyConf& conf = ps.pconf();
  const std::size_t n = conf.url.length(r);
  const std::size_t size = (n + 4095) & ~std::size_t{4095};
  char* mem = r.hc->worker->buffers().get(size);
  if (mem == nullptr) return 500;
  ps.url_mem = mem;
  ps.url_mem_size = static_cast<std::uint32_t>(size);
  const std::string_view url(mem, static_cast<std::size_t>(conf.url.write(r, mem) - mem));
  char what[600];
  auto fail = [&](const char* text) {
    std::snprintf(what, sizeof what, "%s in upstream \"%.*s\"", text,
                  static_cast<int>(url.size() > 400 ? 400 : url.size()), url.data());
    upstream_core::log_request_error(r, static_cast<int>(LogLevel::kError), what);
    return 500;
  };
  std::string_view rest;
  if (starts_with_nocase(url, "http://")) {
    rest = url.substr(7);
    ps.https = false;
  } else if (starts_with_nocase(url, "https://")) {
    rest = url.substr(8);
    ps.https = true;
  } else {
    std::snprintf(what, sizeof what, "invalid URL prefix in \"%.*s\"",
                  static_cast<int>(url.size() > 400 ? 400 : url.size()), url.data());
    upstream_core::log_request_error(r, static_cast<int>(LogLevel::kError), what);
    return 500;
  }
  if (starts_with_nocase(rest, "unix:")) {
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
  if (hostport.empty()) return fail("no host");
  std::string_view host = hostport;
  std::string_view port_text;
  if (host.front() == '[') {
    const std::size_t close = host.find(']');
    if (close == std::string_view::npos) return fail("invalid host");
    if (close + 1 < host.size()) {
      if (host[close + 1] != ':') return fail("invalid host");
      port_text = host.substr(close + 2);
      if (port_text.empty()) return fail("invalid port");
    }
    host = host.substr(0, close + 1);
  } else if (const std::size_t colon = host.rfind(':'); colon != std::string_view::npos) {
    port_text = host.substr(colon + 1);
    host = host.substr(0, colon);
    if (port_text.empty()) return fail("invalid port");
  }
  if (host.empty() || host == "[]") return fail("no host");
  const unsigned default_port = ps.https ? 443 : 80;
  unsigned port = default_port;
  if (!port_text.empty()) {
    auto v = parse_number(port_text);
    if (!v || *v < 1 || *v > 65535) return fail("invalid port");
    port = static_cast<unsigned>(*v);
  }
  ps.target = hostport;
  ps.port = port_text.empty() ? (ps.https ? std::string_view("443") : std::string_view("80"))
                              : port_text;
  // $proxy_host: the port only when it is not the scheme's.
  ps.host_header = port == default_port ? host : hostport;
  // An upstream block of that name (named without a port, as nginx matches
  // it), or the group a proxy_pass without variables made for this very
  // host and port (nginx's implicit upstreams are searched the same way).
  if (conf.groups != nullptr) {
    if (port_text.empty()) {
      if (upstream::Group* g = conf.groups->find(host); g != nullptr && !g->implicit) {
        ps.group = g;
        return 0;
      }
    } else {
      for (const auto& g : conf.groups->groups) {
        if (g->implicit && iequals(g->name, hostport)) {
          ps.group = g.get();
          return 0;
        }
      }
    }
  }
  // An address literal goes straight to a group of its own.
  char text[INET6_ADDRSTRLEN + 1];
  const bool v6 = host.front() == '[';
  const std::string_view bare = v6 ? host.substr(1, host.size() - 2) : host;
  if (bare.size() < sizeof text) {
    std::memcpy(text, bare.data(), bare.size());
    text[bare.size()] = '\0';
    sockaddr_storage ss{};
    socklen_t len = 0;
    if (v6) {
      auto& a = reinterpret_cast<sockaddr_in6&>(ss);
      if (::inet_pton(AF_INET6, text, &a.sin6_addr) == 1) {
        a.sin6_family = AF_INET6;
        a.sin6_port = htons(static_cast<std::uint16_t>(port));
        len = sizeof a;
      }
    } else {
      auto& a = reinterpret_cast<sockaddr_in&>(ss);
      if (::inet_pton(AF_INET, text, &a.sin_addr) == 1) {
        a.sin_family = AF_INET;
        a.sin_port = htons(static_cast<std::uint16_t>(port));
        len = sizeof a;
      }
    }
    if (len != 0) {
      if (!upstream_core::set_address_group(ps, reinterpret_cast<sockaddr*>(&ss), len, hostport)) {
        return 500;
      }
      return 0;
    }
    if (v6) return fail("invalid IPv6 address");
  }
  // A name: resolved once the request is built (upstream_resolve.cc).
  ps.resolve_host = host;
  ps.resolve_port = port;
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
