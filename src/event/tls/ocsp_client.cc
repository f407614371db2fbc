#include "event/tls/ocsp_client.h"

#include <openssl/err.h>
#include <openssl/ocsp.h>
#include <openssl/x509.h>

#include <memory>
#include <new>

#include "event/tls/context.h"
#include "event/tls/ocsp_cache.h"
#include "event/tls/ocsp_fetch.h"
#include "event/tls/tls.h"
#include "event/tls/tls_conf.h"
#include "vigil/core/log.h"
#include "vigil/event/loop.h"

namespace vigil {

// One connection's checks (nginx's ngx_ssl_ocsp_t and the running
// ngx_ssl_ocsp_ctx_t).
struct TlsOcspCheck {
  Connection* c = nullptr;
  const TlsOcspConf* conf = nullptr;
  TlsContext* tc = nullptr;
  STACK_OF(X509) * certs = nullptr;  // the verified chain, leaf first
  int ncert = 0;                     // certificates checked (or being checked)
  int cert_status = V_OCSP_CERTSTATUS_GOOD;
  bool failed = false;  // a status could not be had
  bool waiting = false;
  void (*resume)(Connection& c) = nullptr;
  // The certificate being asked about.
  X509* cert = nullptr;
  X509* issuer = nullptr;
  OcspResponder aia;  // its AIA responder, when ssl_ocsp_responder is not set
  const OcspResponder* responder = nullptr;
  unsigned char key[kOcspKeySize] = {};
  bool has_key = false;
  OcspFetch* fetch = nullptr;

  ~TlsOcspCheck() {
    if (fetch != nullptr) fetch->cancel();
    if (certs != nullptr) sk_X509_pop_free(certs, X509_free);
  }
};

namespace {

void log_error(Connection& c, const std::string& text) {
  if (c.log == nullptr) return;
  VIGIL_LOG(*c.log, kError, 0, "*%llu %s, client: %.*s", static_cast<unsigned long long>(c.number),
            text.c_str(), static_cast<int>(c.addr_text.size()), c.addr_text.data());
}

// The responder for the current certificate (nginx's ngx_ssl_ocsp_responder):
// ssl_ocsp_responder, else the certificate's AIA, a name in it left for the
// resolver.
bool pick_responder(TlsOcspCheck& k) {
  if (k.conf->has_responder) {
    k.responder = &k.conf->responder;
    return true;
  }
  const std::string url = ocsp_aia_url(k.cert);
  if (url.empty()) {
    log_error(*k.c, "no OCSP responder URL in certificate");
    return false;
  }
  if (Status st = ocsp_parse_responder(url, false, k.aia); !st) {
    if (st.message() == "invalid URL prefix") {
      log_error(*k.c, "invalid URL prefix in OCSP responder \"" + url + "\" in certificate");
    } else {
      log_error(*k.c, st.message() + " in OCSP responder \"" + url.substr(7) + "\" in certificate");
    }
    return false;
  }
  k.responder = &k.aia;
  return true;
}

void fetched(void* data, bool ok, std::string_view body);

// The checks go on from certificate k.ncert (nginx's
// ngx_ssl_ocsp_validate_next). True when they are over.
bool validate_next(TlsOcspCheck& k) {
  const int n = sk_X509_num(k.certs);
  for (;;) {
    if (k.ncert >= n - 1 || (k.conf->leaf && k.ncert == 1)) return true;
    k.cert = sk_X509_value(k.certs, k.ncert);
    k.issuer = sk_X509_value(k.certs, k.ncert + 1);
    if (!pick_responder(k)) {
      k.failed = true;
      return true;
    }
    ++k.ncert;
    k.has_key = false;
    if (k.conf->cache != nullptr) {
      if (!ocsp_cache_key(k.cert, k.issuer, k.key)) {
        ERR_clear_error();
        k.failed = true;
        return true;
      }
      k.has_key = true;
      int status = 0;
      if (ocsp_cache_lookup(*k.conf->cache, k.key, status)) {
        if (status != V_OCSP_CERTSTATUS_GOOD) {
          k.cert_status = status;
          return true;
        }
        continue;
      }
    }
    break;
  }
  Connection& c = *k.c;
  Log& log = c.log != nullptr ? *c.log : c.loop->log();
  OcspFetch::Params p;
  p.responder = k.responder;
  p.resolver = k.tc->resolver();
  p.resolver_timeout = k.tc->resolver_timeout();
  p.request = ocsp_build_request(*k.responder, k.cert, k.issuer, log, "");
  p.log = &log;
  p.slot = &k.fetch;
  if (p.request.empty()) {
    k.failed = true;
    return true;
  }
  OcspFetch* f = OcspFetch::start(*c.loop, std::move(p), fetched, &k);
  if (f == nullptr) {
    k.failed = true;
    return true;
  }
  k.fetch = f;
  return false;
}

void over(TlsOcspCheck& k) {
  if (k.waiting) {
    k.waiting = false;
    k.resume(*k.c);
  }
}

// nginx's ngx_ssl_ocsp_handler.
void fetched(void* data, bool ok, std::string_view body) {
  TlsOcspCheck& k = *static_cast<TlsOcspCheck*>(data);
  k.fetch = nullptr;
  Connection& c = *k.c;
  Log& log = c.log != nullptr ? *c.log : c.loop->log();
  const std::string suffix =
      " while requesting certificate status, responder: " + k.responder->host;
  OcspVerdict v;
  if (!ok || !ocsp_verify(body, SSL_get_SSL_CTX(c.ssl->ssl), k.certs, k.cert, k.issuer, 0, v, log,
                          suffix)) {
    k.failed = true;
    over(k);
    return;
  }
  if (k.has_key && !ocsp_cache_store(*k.conf->cache, k.key, v.status, v.valid, log)) {
    k.failed = true;
    over(k);
    return;
  }
  if (v.status != V_OCSP_CERTSTATUS_GOOD) {
    k.cert_status = v.status;
    over(k);
    return;
  }
  if (validate_next(k)) over(k);
}

}  // namespace

Status tls_ocsp_init(TlsContext& tc, const TlsServerConf& conf) {
  if (conf.verify == TlsVerify::kOptionalNoCa) {
    return Status::error("\"ssl_ocsp\" is incompatible with \"ssl_verify_client optional_no_ca\"" +
                         conf.where);
  }
  TlsOcspConf oc;
  oc.leaf = conf.ocsp == TlsServerConf::Ocsp::kLeaf;
  oc.cache = conf.ocsp_cache;
  if (!conf.ocsp_responder.empty()) {
    if (Status st = ocsp_parse_responder(conf.ocsp_responder, true, oc.responder); !st) {
      const std::string& url = conf.ocsp_responder;
      if (st.message() == "invalid URL prefix") {
        return Status::error("invalid URL prefix in OCSP responder \"" + url +
                             "\" in \"ssl_ocsp_responder\"" + conf.where);
      }
      return Status::error(st.message() + " in OCSP responder \"" + url.substr(7) +
                           "\" in \"ssl_ocsp_responder\"" + conf.where);
    }
    oc.has_responder = true;
  }
  tc.set_ocsp(std::make_unique<TlsOcspConf>(std::move(oc)));
  return Status::ok();
}

int tls_ocsp_validate(Connection& c, void (*resume)(Connection& c)) {
  TlsConnection& t = *c.ssl;
  SSL* ssl = t.ssl;
  SSL_CTX* ctx = SSL_get_SSL_CTX(ssl);
  TlsContext* tc = TlsContext::of(ctx);
  if (tc == nullptr || tc->ocsp() == nullptr) return 0;
  if (SSL_get_verify_result(ssl) != X509_V_OK) return 0;
  X509* cert = SSL_get0_peer_certificate(ssl);
  if (cert == nullptr) return 0;
  auto* k = new (std::nothrow) TlsOcspCheck();
  if (k == nullptr) return -1;
  t.ocsp = k;
  k->c = &c;
  k->conf = tc->ocsp();
  k->tc = tc;
  k->resume = resume;
  if (STACK_OF(X509)* verified = SSL_get0_verified_chain(ssl); verified != nullptr) {
    k->certs = X509_chain_up_ref(verified);
    if (k->certs == nullptr) return -1;
  } else {
    // A resumed session has no verified chain: build it again from the
    // store and the chain the client sent.
    X509_STORE* store = SSL_CTX_get_cert_store(ctx);
    X509_STORE_CTX* sctx = X509_STORE_CTX_new();
    if (store == nullptr || sctx == nullptr) {
      X509_STORE_CTX_free(sctx);
      return -1;
    }
    if (X509_STORE_CTX_init(sctx, store, cert, SSL_get_peer_cert_chain(ssl)) != 1 ||
        X509_verify_cert(sctx) <= 0) {
      X509_STORE_CTX_free(sctx);
      log_error(c, "X509_verify_cert() failed" + tls_error_text());
      return -1;
    }
    k->certs = X509_STORE_CTX_get1_chain(sctx);
    X509_STORE_CTX_free(sctx);
    if (k->certs == nullptr) return -1;
  }
  if (validate_next(*k)) return 0;
  k->waiting = true;
  return 1;
}

const char* tls_ocsp_failure(const Connection& c) {
  if (c.ssl == nullptr || c.ssl->ocsp == nullptr) return nullptr;
  const TlsOcspCheck& k = *c.ssl->ocsp;
  if (k.failed) return "certificate status request failed";
  switch (k.cert_status) {
    case V_OCSP_CERTSTATUS_GOOD:
      return nullptr;
    case V_OCSP_CERTSTATUS_REVOKED:
      return "certificate revoked";
    default:
      return "certificate status unknown";
  }
}

void tls_ocsp_cleanup(Connection& c) {
  if (c.ssl == nullptr || c.ssl->ocsp == nullptr) return;
  delete c.ssl->ocsp;
  c.ssl->ocsp = nullptr;
}

}  // namespace vigil
