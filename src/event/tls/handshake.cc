// The TLS handshake driven by the event loop, SNI, and the nonblocking
// shutdown (nginx's ngx_ssl_create_connection, ngx_ssl_handshake,
// ngx_ssl_handshake_handler, ngx_http_ssl_servername, ngx_ssl_shutdown).
#include <openssl/err.h>
#include <sys/socket.h>

#include <openssl/x509v3.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "event/tls/buffers.h"
#include "event/tls/context.h"
#include "event/tls/counters.h"
#include "event/tls/ocsp_client.h"
#include "event/tls/socket_bio.h"
#include "event/tls/tls.h"
#include "vigil/core/log.h"
#include "vigil/event/loop.h"

namespace vigil {
namespace {

void handshake_handler(Event& ev);

// Why a client (upstream) handshake failed, as nginx words it: the
// certificate check first (the verify callback's verdict is what ended the
// handshake), else what the library or the socket said. Kept in the arena
// for the done callback, which logs it with its own context.
void keep_client_failure(Connection& c, const char* what, int err) {
  TlsConnection& t = *c.ssl;
  std::string text;
  // Without proxy_ssl_verify the chain is still checked and its result
  // kept, but it decides nothing.
  const bool verifying = t.ssl != nullptr && (SSL_get_verify_mode(t.ssl) & SSL_VERIFY_PEER) != 0;
  const long verify = verifying ? SSL_get_verify_result(t.ssl) : X509_V_OK;
  if (verify == X509_V_ERR_HOSTNAME_MISMATCH || verify == X509_V_ERR_IP_ADDRESS_MISMATCH) {
    X509_VERIFY_PARAM* param = SSL_get0_param(t.ssl);
    std::string name;
    if (const char* host = X509_VERIFY_PARAM_get0_host(param, 0)) name = host;
    if (char* ip = X509_VERIFY_PARAM_get1_ip_asc(param)) {
      name = ip;
      OPENSSL_free(ip);
    }
    text = "upstream SSL certificate does not match \"" + name + "\"";
    ERR_clear_error();
  } else if (verify != X509_V_OK) {
    text = "upstream SSL certificate verify error: (" + std::to_string(verify) + ":" +
           X509_verify_cert_error_string(verify) + ")";
    ERR_clear_error();
  } else {
    text = what;
    if (err != 0) text += " (" + std::to_string(err) + ": " + std::strerror(err) + ")";
    text += tls_error_text();
  }
  char* mem = c.arena != nullptr ? static_cast<char*>(c.arena->alloc(text.size(), 1)) : nullptr;
  if (mem != nullptr) {
    std::memcpy(mem, text.data(), text.size());
    t.failure = std::string_view(mem, text.size());
  }
}

void log_handshake_failure(Connection& c, const char* what, int err) {
  if (c.ssl != nullptr && c.ssl->client) {
    keep_client_failure(c, what, err);
    return;
  }
  if (c.log == nullptr) {
    ERR_clear_error();
    return;
  }
  // A client that sends garbage, an alert or resets is routine for a
  // server: [info], as nginx logs "SSL_do_handshake() failed".
  const std::string detail = tls_error_text();
  VIGIL_LOG(*c.log, kInfo, err, "*%llu %s%s while SSL handshaking, client: %.*s",
            static_cast<unsigned long long>(c.number), what, detail.c_str(),
            static_cast<int>(c.addr_text.size()), c.addr_text.data());
}

void finish(Connection& c, TlsHandshake result);

// ssl_ocsp's checks are done: the handshake ends as it would have.
void ocsp_resume(Connection& c) {
  finish(c, TlsHandshake::kOk);
}

// While ssl_ocsp's checks run, the connection waits: the handshake's timer
// still bounds it, and what the client sends meanwhile stays in the socket
// (a level-triggered backend stops reporting it; the protocol reads it once
// the handshake is over).
void ocsp_wait_handler(Event& ev) {
  Connection& c = *ev.owner<Connection>();
  if (ev.timedout || c.close) {
    if (ev.timedout) {
      c.timedout = 1;
      if (c.log != nullptr) {
        VIGIL_LOG(*c.log, kInfo, ETIMEDOUT, "*%llu client timed out in SSL handshake, client: %.*s",
                  static_cast<unsigned long long>(c.number), static_cast<int>(c.addr_text.size()),
                  c.addr_text.data());
      }
    }
    tls_ocsp_cleanup(c);
    finish(c, TlsHandshake::kFailed);
    return;
  }
  ev.ready = 1;
  if (ev.write) {
    (void)c.loop->handle_write_event(ev);
  } else {
    c.ssl->drained = 0;
    (void)c.loop->handle_read_event(ev);
  }
}

void finish(Connection& c, TlsHandshake result) {
  TlsConnection& t = *c.ssl;
  EventLoop& loop = *c.loop;
  if (result == TlsHandshake::kOk && !t.client && !t.ocsp_started) {
    t.ocsp_started = 1;
    const int rc = tls_ocsp_validate(c, ocsp_resume);
    if (rc == 1) {
      c.read->handler = ocsp_wait_handler;
      c.write->handler = ocsp_wait_handler;
      return;
    }
    if (rc == -1) {
      c.error = 1;
      result = TlsHandshake::kFailed;
    }
  }
  loop.del_timer(*c.read);
  loop.del_timer(*c.write);
  TlsHandshakeDone done = t.done;
  TlsCounters* counters = tls_counters();
  if (result == TlsHandshake::kOk) {
    counters->handshakes.add();
    if (SSL_session_reused(t.ssl) == 1) counters->sessions_reused.add();
    t.handshaked = 1;
    // tls_recv and tls_send do not clear the error queue before each call
    // (tls_io.cc): whatever a successful handshake left there (a ticket that
    // did not decrypt, say) goes now.
    ERR_clear_error();
#ifdef BIO_get_ktls_send
    t.ktls_send = BIO_get_ktls_send(SSL_get_wbio(t.ssl)) ? 1 : 0;
#endif
    // Application data may have arrived with the last handshake flight:
    // the protocol's first read finds out, unless the socket was empty at
    // the last read and OpenSSL holds nothing (that read would meet EAGAIN).
    c.read->ready = t.drained && !c.read->pending_eof && SSL_has_pending(t.ssl) == 0 ? 0 : 1;
  } else if (result == TlsHandshake::kFailed) {
    counters->handshakes_failed.add();
  } else if (result == TlsHandshake::kPlain) {
    SSL_free(t.ssl);
    t.ssl = nullptr;
    c.ssl = nullptr;
    c.recv = unix_recv;
    c.send = unix_send;
    c.recv_chain = readv_chain;
    c.send_chain = writev_chain;
  }
  done(c, result);
}

// Returns false when the handshake cannot go on (already finished).
bool do_handshake(Connection& c) {
  TlsConnection& t = *c.ssl;
  EventLoop& loop = *c.loop;
  ERR_clear_error();
  t.drained = 0;  // finish() trusts only a read() made by this step
  const int n = SSL_do_handshake(t.ssl);
  if (n == 1) {
    finish(c, TlsHandshake::kOk);
    return false;
  }
  const int err = SSL_get_error(t.ssl, n);
  if (err == SSL_ERROR_WANT_READ) {
    c.read->ready = 0;
    // A level-triggered backend would report a registered write event on
    // every pass while we wait to read: take it out (the last write went
    // through, so the socket is writable as far as we know).
    if (!(loop.capabilities() & kCapClear) && c.write->active) {
      c.write->ready = 1;
      if (!loop.handle_write_event(*c.write)) {
        finish(c, TlsHandshake::kFailed);
        return false;
      }
    }
    if (!loop.handle_read_event(*c.read)) {
      finish(c, TlsHandshake::kFailed);
      return false;
    }
    return true;
  }
  if (err == SSL_ERROR_WANT_WRITE) {
    c.write->ready = 0;
    if (!loop.handle_write_event(*c.write)) {
      finish(c, TlsHandshake::kFailed);
      return false;
    }
    return true;
  }
  c.error = 1;
  const int sys = err == SSL_ERROR_SYSCALL ? errno : 0;
  if (err == SSL_ERROR_SYSCALL && ERR_peek_error() == 0) {
    // The peer went away (EOF or reset) in the middle of the handshake.
    log_handshake_failure(c, sys != 0 ? "peer reset the connection" : "peer closed connection",
                          sys);
  } else if (err == SSL_ERROR_ZERO_RETURN) {
    log_handshake_failure(c, "peer sent close_notify", 0);
  } else {
    log_handshake_failure(c, "SSL_do_handshake() failed", sys);
  }
  finish(c, TlsHandshake::kFailed);
  return false;
}

// Plain HTTP on a TLS port starts with a letter; a TLS ClientHello with a
// handshake record (0x16), an SSLv2-style hello with 0x80.
bool peek_plain(Connection& c, bool& plain) {
  unsigned char first = 0;
  for (;;) {
    const ssize_t n = ::recv(c.fd, &first, 1, MSG_PEEK);
    if (n == 1) {
      plain = !(first == 0x16 || first == 0x80);
      return true;
    }
    if (n == -1 && errno == EINTR) continue;
    if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      c.read->ready = 0;
      if (!c.loop->handle_read_event(*c.read)) finish(c, TlsHandshake::kFailed);
      return false;
    }
    c.error = 1;
    log_handshake_failure(c, n == 0 ? "peer closed connection" : "recv() failed",
                          n == 0 ? 0 : errno);
    finish(c, TlsHandshake::kFailed);
    return false;
  }
}

void handshake_handler(Event& ev) {
  Connection& c = *ev.owner<Connection>();
  if (ev.timedout) {
    c.timedout = 1;
    if (c.ssl->client) {
      keep_client_failure(c, "upstream timed out", ETIMEDOUT);
    } else if (c.log != nullptr) {
      VIGIL_LOG(*c.log, kInfo, ETIMEDOUT, "*%llu client timed out in SSL handshake, client: %.*s",
                static_cast<unsigned long long>(c.number), static_cast<int>(c.addr_text.size()),
                c.addr_text.data());
    }
    finish(c, TlsHandshake::kFailed);
    return;
  }
  if (c.close) {  // the worker is shutting down or needs the slot
    finish(c, TlsHandshake::kFailed);
    return;
  }
  TlsConnection& t = *c.ssl;
  if (t.detect_plain) {
    bool plain = false;
    if (!peek_plain(c, plain)) return;
    t.detect_plain = 0;
    if (plain) {
      finish(c, TlsHandshake::kPlain);
      return;
    }
  }
  (void)do_handshake(c);
}

Result<TlsConnection*> create(Connection& c, TlsContext& ctx) {
  auto* t = c.arena != nullptr ? c.arena->make<TlsConnection>() : nullptr;
  if (t == nullptr) return Status::error("no memory for the TLS state");
  ERR_clear_error();
  t->ssl = SSL_new(ctx.native());
  if (t->ssl == nullptr) return Status::error("SSL_new() failed" + tls_error_text());
  t->fd = c.fd;
  if (BIO_METHOD* m = ctx.bio_method(); m != nullptr) {
    BIO* bio = tls_socket_bio(m, *t);
    if (bio == nullptr) {
      SSL_free(t->ssl);
      t->ssl = nullptr;
      return Status::error("BIO_new() failed" + tls_error_text());
    }
    SSL_set_bio(t->ssl, bio, bio);  // one BIO both ways: SSL_free frees it
  } else {
    // kTLS: OpenSSL's socket BIO, watched by a callback.
    if (SSL_set_fd(t->ssl, c.fd) != 1) {
      SSL_free(t->ssl);
      t->ssl = nullptr;
      return Status::error("SSL_set_fd() failed" + tls_error_text());
    }
    tls_watch_reads(*t);
  }
  SSL_set_app_data(t->ssl, &c);
  t->sessions = &ctx;
  c.ssl = t;
  // OpenSSL reads and writes the socket itself from here on. The TLS I/O is
  // installed before any event is armed, so a completion-based backend
  // (io_uring) sees the connection's I/O replaced and watches it for
  // readiness instead of receiving the ClientHello into its own buffers.
  // Nothing reads through c.recv until the handshake is done.
  c.recv = tls_recv;
  c.send = tls_send;
  c.recv_chain = tls_recv_chain;
  c.send_chain = tls_send_chain;
  return t;
}

void start(Connection& c, Msec timeout) {
  EventLoop& loop = *c.loop;
  c.read->handler = handshake_handler;
  c.write->handler = handshake_handler;
  loop.add_timer(*c.read, timeout);
  // With TCP_DEFER_ACCEPT (or a connected client socket) there is something
  // to do at once; otherwise wait for the ClientHello.
  if (c.read->ready || c.ssl->client) {
    handshake_handler(*c.read);
    return;
  }
  if (!loop.handle_read_event(*c.read)) finish(c, TlsHandshake::kFailed);
}

}  // namespace

Status tls_start_server(Connection& c, TlsContext& ctx, bool detect_plain, Msec timeout,
                        TlsHandshakeDone done, TlsSelectServer select) {
  auto t = create(c, ctx);
  if (!t) return t.status();
  SSL_set_accept_state(t.value()->ssl);
  t.value()->done = done;
  t.value()->select = select;
  t.value()->detect_plain = detect_plain ? 1 : 0;
  start(c, timeout);
  return Status::ok();
}

Status tls_start_client(Connection& c, TlsContext& ctx, std::string_view sni,
                        std::string_view verify_host, SSL_SESSION* session, Msec timeout,
                        TlsHandshakeDone done, TlsSessionSaved saved) {
  auto t = create(c, ctx);
  if (!t) return t.status();
  SSL* ssl = t.value()->ssl;
  SSL_set_connect_state(ssl);
  t.value()->client = 1;
  t.value()->done = done;
  t.value()->saved = saved;
  if (!sni.empty()) {
    const std::string name(sni);
    if (SSL_set_tlsext_host_name(ssl, name.c_str()) != 1) {
      return Status::error("SSL_set_tlsext_host_name(\"" + name + "\") failed" + tls_error_text());
    }
  }
  const TlsClientConf* conf = ctx.client_conf();
  if (conf != nullptr && conf->verify && !verify_host.empty()) {
    const std::string host(verify_host);
    if (SSL_set1_host(ssl, host.c_str()) != 1) {
      return Status::error("SSL_set1_host(\"" + host + "\") failed" + tls_error_text());
    }
  }
  if (session != nullptr && SSL_set_session(ssl, session) != 1) ERR_clear_error();
  start(c, timeout);
  return Status::ok();
}

void tls_send_close_notify(Connection& c) {
  TlsConnection* t = c.ssl;
  if (t == nullptr || t->ssl == nullptr || !t->handshaked) return;
  if (SSL_get_shutdown(t->ssl) & SSL_SENT_SHUTDOWN) return;
  ERR_clear_error();
  SSL_set_shutdown(t->ssl, SSL_get_shutdown(t->ssl) | SSL_RECEIVED_SHUTDOWN);
  (void)SSL_shutdown(t->ssl);
  ERR_clear_error();
  // Reads go on (lingering close): the peer's data after this is still read.
  SSL_set_shutdown(t->ssl, SSL_get_shutdown(t->ssl) & ~SSL_RECEIVED_SHUTDOWN);
}

void tls_close(Connection& c) {
  tls_ocsp_cleanup(c);
  tls_release_stage(c);
  tls_forget_warm(c);
  TlsConnection* t = c.ssl;
  c.ssl = nullptr;
  c.recv = unix_recv;
  c.send = unix_send;
  c.recv_chain = readv_chain;
  c.send_chain = writev_chain;
  if (t == nullptr || t->ssl == nullptr) return;
  ERR_clear_error();
  if (t->handshaked && !c.error && !c.timedout) {
    // One try: close_notify goes out if the socket buffer takes it. We never
    // wait for the peer's (RFC 8446 §6.1 allows closing after sending ours).
    if (!(SSL_get_shutdown(t->ssl) & SSL_SENT_SHUTDOWN)) {
      SSL_set_shutdown(t->ssl, SSL_get_shutdown(t->ssl) | SSL_RECEIVED_SHUTDOWN);
      (void)SSL_shutdown(t->ssl);
    }
  } else {
    SSL_set_quiet_shutdown(t->ssl, 1);
  }
  ERR_clear_error();
  SSL_free(t->ssl);
  t->ssl = nullptr;
}

int tls_client_new_session_cb(SSL* ssl, SSL_SESSION* session) {
  auto* c = static_cast<Connection*>(SSL_get_app_data(ssl));
  if (c == nullptr || c->ssl == nullptr || c->ssl->saved == nullptr) return 0;
  c->ssl->saved(*c, session);
  return 1;  // the callee owns the reference now
}

TlsContext* tls_session_context(const SSL* ssl) {
  const auto* c = static_cast<const Connection*>(SSL_get_app_data(ssl));
  if (c != nullptr && c->ssl != nullptr && c->ssl->sessions != nullptr) return c->ssl->sessions;
  return TlsContext::of(SSL_get_SSL_CTX(ssl));
}

// OpenSSL calls it for every ClientHello, with or without a name: without
// one the default server is chosen, which matters only when it refuses
// handshakes. A server with no context of its own (no certificate) keeps
// the one the handshake started with, as nginx does.
int tls_servername_cb(SSL* ssl, int* alert, void*) {
  auto* c = static_cast<Connection*>(SSL_get_app_data(ssl));
  if (c == nullptr || c->ssl == nullptr || c->ssl->select == nullptr) return SSL_TLSEXT_ERR_OK;
  const char* name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
  const bool named = name != nullptr && *name != '\0';
  TlsContext* chosen = c->ssl->select(*c, named ? std::string_view(name) : std::string_view());
  if (chosen != nullptr && chosen->rejects_handshakes()) {
    if (c->log != nullptr) {
      VIGIL_LOG(*c->log, kInfo, 0, "*%llu SSL handshake rejected",
                static_cast<unsigned long long>(c->number));
    }
    *alert = SSL_AD_UNRECOGNIZED_NAME;
    return SSL_TLSEXT_ERR_ALERT_FATAL;
  }
  if (!named) return SSL_TLSEXT_ERR_OK;
  if (chosen == nullptr || chosen->native() == SSL_get_SSL_CTX(ssl)) return SSL_TLSEXT_ERR_OK;
  SSL_CTX* ctx = chosen->native();
  if (SSL_set_SSL_CTX(ssl, ctx) == nullptr) return SSL_TLSEXT_ERR_ALERT_FATAL;
  // SSL_set_SSL_CTX swaps certificates only: verification and options come
  // from the chosen server too (nginx copies them the same way).
  SSL_set_verify(ssl, SSL_CTX_get_verify_mode(ctx), SSL_CTX_get_verify_callback(ctx));
  SSL_set_verify_depth(ssl, SSL_CTX_get_verify_depth(ctx));
  SSL_clear_options(ssl, SSL_get_options(ssl) & ~SSL_CTX_get_options(ctx));
  SSL_set_options(ssl, SSL_CTX_get_options(ctx));
  return SSL_TLSEXT_ERR_OK;
}

std::string_view tls_protocol(const Connection& c) {
  if (c.ssl == nullptr || c.ssl->ssl == nullptr) return {};
  return SSL_get_version(c.ssl->ssl);
}

std::string_view tls_cipher(const Connection& c) {
  if (c.ssl == nullptr || c.ssl->ssl == nullptr) return {};
  const char* name = SSL_get_cipher_name(c.ssl->ssl);
  return name != nullptr ? name : "";
}

std::string_view tls_server_name(const Connection& c) {
  if (c.ssl == nullptr || c.ssl->ssl == nullptr) return {};
  const char* name = SSL_get_servername(c.ssl->ssl, TLSEXT_NAMETYPE_host_name);
  return name != nullptr ? name : "";
}

std::string_view tls_alpn_protocol(const Connection& c) {
  if (c.ssl == nullptr || c.ssl->ssl == nullptr) return {};
  const unsigned char* p = nullptr;
  unsigned int len = 0;
  SSL_get0_alpn_selected(c.ssl->ssl, &p, &len);
  return p != nullptr ? std::string_view(reinterpret_cast<const char*>(p), len) : std::string_view();
}

bool tls_session_reused(const Connection& c) {
  return c.ssl != nullptr && c.ssl->ssl != nullptr && SSL_session_reused(c.ssl->ssl) == 1;
}

int tls_client_verify_status(const Connection& c) {
  if (c.ssl == nullptr || c.ssl->ssl == nullptr) return 0;
  SSL* ssl = c.ssl->ssl;
  const SSL_CTX* ctx = SSL_get_SSL_CTX(ssl);
  TlsContext* tc = TlsContext::of(ctx);
  if (tc == nullptr || tc->server_conf() == nullptr) return 0;
  const TlsVerify mode = tc->server_conf()->verify;
  if (mode == TlsVerify::kOff) return 0;
  const long rc = SSL_get_verify_result(ssl);
  X509* cert = SSL_get0_peer_certificate(ssl);
  if (cert != nullptr && rc != X509_V_OK) {
    // optional_no_ca accepts a chain we cannot verify, not a broken one.
    const bool untrusted =
        rc == X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT ||
        rc == X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN || rc == X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT ||
        rc == X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY ||
        rc == X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE || rc == X509_V_ERR_CERT_UNTRUSTED;
    if (!(mode == TlsVerify::kOptionalNoCa && untrusted)) {
      if (c.log != nullptr) {
        VIGIL_LOG(*c.log, kInfo, 0, "*%llu client SSL certificate verify error: (%ld:%s)",
                  static_cast<unsigned long long>(c.number), rc, X509_verify_cert_error_string(rc));
      }
      return 495;
    }
  }
  if (cert == nullptr && mode == TlsVerify::kOn) {
    if (c.log != nullptr) {
      VIGIL_LOG(*c.log, kInfo, 0, "*%llu client sent no required SSL certificate",
                static_cast<unsigned long long>(c.number));
    }
    return 496;
  }
  if (const char* why = tls_ocsp_failure(c); why != nullptr) {
    if (c.log != nullptr) {
      VIGIL_LOG(*c.log, kInfo, 0, "*%llu client SSL certificate verify error: %s",
                static_cast<unsigned long long>(c.number), why);
    }
    // The session must not resume without the check (nginx removes it too).
    if (c.ssl->sessions != nullptr) {
      if (SSL_SESSION* sess = SSL_get0_session(ssl); sess != nullptr) {
        (void)SSL_CTX_remove_session(c.ssl->sessions->native(), sess);
      }
    }
    return 495;
  }
  return 0;
}

}  // namespace vigil
