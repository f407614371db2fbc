// TLS to the backend (proxy_pass https://; nginx's
// ngx_http_upstream_ssl_init_connection, _ssl_name, _ssl_handshake and the
// session saving of the round-robin peer): the event layer's TLS client
// (event/tls) on the upstream connection, started once TCP is connected and
// timed by proxy_connect_timeout, before the first byte of the request.
//
// Names: proxy_ssl_name (variables allowed), else the proxy_pass host, with
// the port taken off. SNI (proxy_ssl_server_name on) is never an IP literal
// (RFC 6066 §3); the certificate is checked against the name, an IP literal
// as an IP address (proxy_ssl_verify on).
//
// Sessions (proxy_ssl_session_reuse on): the newest session per context and
// server is kept by the worker (proxy_sessions.h) and offered to the next new
// connection; a handshake that fails forgets it. A keepalive connection keeps
// its TLS state: it goes back to a location with the same context only.
#include <arpa/inet.h>

#include <cerrno>
#include <new>
#include <string>

#include "event/tls/context.h"
#include "event/tls/tls.h"
#include "http/core/worker.h"
#include "http/proxy/proxy_sessions.h"
#include "http/upstream/upstream.h"
#include "vigil/core/log.h"
#include "vigil/event/loop.h"

namespace vigil::http::upstream_core {
namespace {

constexpr std::size_t kMaxName = 256;

// proxy_ssl_name evaluated for the request, else the proxy_pass host; the
// port is left out ("[::1]:8443" -> "[::1]", "backend:8443" -> "backend").
std::string_view ssl_name(const Upstream& us, char* buf) {
  const UpstreamConf& p = *us.conf;
  std::string_view name = us.target;
  if (!p.ssl_name.empty()) {
    if (p.ssl_name.length(*us.r) > kMaxName) return {};
    char* end = p.ssl_name.write(*us.r, buf);
    name = std::string_view(buf, static_cast<std::size_t>(end - buf));
  }
  if (!name.empty() && name.front() == '[') {
    const std::size_t close = name.find(']');
    return close == std::string_view::npos ? name : name.substr(0, close + 1);
  }
  const std::size_t colon = name.find(':');
  return colon == std::string_view::npos ? name : name.substr(0, colon);
}

bool ip_literal(std::string_view name) {
  if (name.empty()) return false;
  if (name.front() == '[') return true;
  char text[INET_ADDRSTRLEN];
  if (name.size() >= sizeof text) return false;
  name.copy(text, name.size());
  text[name.size()] = '\0';
  in_addr a{};
  return ::inet_pton(AF_INET, text, &a) == 1;
}

ProxySessions& sessions_of(const Upstream& us) {
  return us.r->hc->worker->proxy_sessions();
}

// TLS 1.3 tickets arrive with the first reads of the response, TLS 1.2
// sessions at the end of the handshake: either way the connection belongs
// to this request then.
void session_saved(Connection& u, SSL_SESSION* session) {
  auto* us = static_cast<Upstream*>(u.data);
  if (us == nullptr || us->u != &u || us->pr.peer() == nullptr) {
    SSL_SESSION_free(session);
    return;
  }
  sessions_of(*us).keep(us->conf->tls.get(), us->pr.peer(), session);
}

// The connection is ready (TLS too): the protocol binds the request to it,
// then the request goes.
void begin_sending(Upstream& us) {
  note_connected(us);
  us.stage = Stage::kSending;
  if (us.protocol->attach != nullptr && !us.protocol->attach(us)) {
    next_upstream(us, kNextError, 502);
    return;
  }
  send_request(us);
}

void handshake_done(Connection& u, TlsHandshake result) {
  Upstream& us = *static_cast<Upstream*>(u.data);
  u.read->handler = upstream_handler;
  u.write->handler = upstream_handler;
  if (result == TlsHandshake::kOk) {
    begin_sending(us);
    return;
  }
  if (us.conf->ssl.session_reuse && us.pr.peer() != nullptr) {
    sessions_of(us).forget(us.conf->tls.get(), us.pr.peer());
  }
  if (u.close || us.r->c->close) {  // the worker closes connections (shutdown, pool drain)
    finish(us, true);
    return;
  }
  const bool timedout = u.timedout != 0;
  std::string why = "SSL handshake with upstream failed";
  if (u.ssl != nullptr && !u.ssl->failure.empty()) why.assign(u.ssl->failure);
  log_error(us, static_cast<int>(LogLevel::kError), 0, why.c_str());
  if (timedout) {
    next_upstream(us, kNextTimeout, 504);
  } else {
    next_upstream(us, kNextError, 502);
  }
}

void start_tls(Upstream& us) {
  Connection& u = *us.u;
  const UpstreamConf& p = *us.conf;
  us.stage = Stage::kHandshake;
  char buf[kMaxName];
  std::string_view name = ssl_name(us, buf);
  if (name.empty() && p.ssl.verify) {
    // Nothing to check the certificate against: never a silent "any name".
    log_error(us, static_cast<int>(LogLevel::kError), 0,
              "proxy_ssl_name is empty or longer than 256 bytes");
    next_upstream(us, kNextError, 502);
    return;
  }
  std::string_view sni = p.ssl.server_name && !ip_literal(name) ? name : std::string_view();
  std::string_view verify = name;
  if (verify.size() >= 2 && verify.front() == '[') verify = verify.substr(1, verify.size() - 2);
  SSL_SESSION* session = nullptr;
  if (p.ssl.session_reuse && us.pr.peer() != nullptr) {
    session = sessions_of(us).find(p.tls.get(), us.pr.peer());
  }
  Status st = tls_start_client(u, *p.tls, sni, verify, session, p.connect_timeout, handshake_done,
                               p.ssl.session_reuse ? session_saved : nullptr);
  if (!st) {
    log_error(us, static_cast<int>(LogLevel::kAlert), 0, st.message().c_str());
    next_upstream(us, kNextError, 502);
  }
}

}  // namespace

void connected(Upstream& us) {
  if (us.https && us.u->ssl == nullptr) {
    start_tls(us);
    return;
  }
  begin_sending(us);
}

bool cached_fits(const Upstream& us, const Connection& u) {
  if (!us.https) return u.ssl == nullptr;
  return u.ssl != nullptr && u.ssl->ssl != nullptr && us.conf->tls != nullptr &&
         SSL_get_SSL_CTX(u.ssl->ssl) == us.conf->tls->native();
}

bool tls_drained(const Connection& u) {
  if (u.ssl == nullptr || u.ssl->ssl == nullptr) return true;
  return SSL_has_pending(u.ssl->ssl) == 0 &&
         (SSL_get_shutdown(u.ssl->ssl) & SSL_RECEIVED_SHUTDOWN) == 0;
}

}  // namespace vigil::http::upstream_core

namespace vigil::http {

ProxySessions::~ProxySessions() {
  for (auto& [key, session] : sessions_) SSL_SESSION_free(session);
}

SSL_SESSION* ProxySessions::find(const void* ctx, const void* peer) const {
  auto it = sessions_.find(Key{ctx, peer});
  return it == sessions_.end() ? nullptr : it->second;
}

void ProxySessions::keep(const void* ctx, const void* peer, SSL_SESSION* session) {
  try {
    auto [it, added] = sessions_.try_emplace(Key{ctx, peer}, session);
    if (!added) {
      SSL_SESSION_free(it->second);
      it->second = session;
    }
  } catch (const std::bad_alloc&) {
    SSL_SESSION_free(
        session);  // no memory for the entry: the next connection does a full handshake
  }
}

void ProxySessions::forget(const void* ctx, const void* peer) {
  auto it = sessions_.find(Key{ctx, peer});
  if (it == sessions_.end()) return;
  SSL_SESSION_free(it->second);
  sessions_.erase(it);
}

}  // namespace vigil::http
