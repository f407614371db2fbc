#include "event/tls/stapling.h"

#include <openssl/err.h>
#include <openssl/ocsp.h>
#include <openssl/x509.h>

#include <algorithm>
#include <cstring>
#include <new>

#include "event/tls/context.h"
#include "event/tls/ocsp.h"
#include "event/tls/ocsp_fetch.h"
#include "event/tls/tls_conf.h"
#include "vigil/core/log.h"
#include "vigil/event/loop.h"

namespace vigil {

struct TlsStaple {
  TlsContext* owner = nullptr;
  X509* cert = nullptr;              // the context's
  STACK_OF(X509) * chain = nullptr;  // the context's
  X509* issuer = nullptr;            // a reference of our own
  std::string name;                  // the certificate's file, for the log
  bool verify = false;
  bool fetches = false;  // has a responder: the response is fetched
  OcspResponder responder;
  std::string request;  // the HTTP request, built once
  // The current response (DER), sent while now <= valid.
  std::string staple;
  std::time_t valid = 0;
  std::time_t refresh = 0;  // no fetch before this
  bool loading = false;
  Log* log = nullptr;  // the worker's, while a fetch runs
};

namespace {

constexpr Msec kStaplingTimeout = 60000;  // nginx's staple->timeout
constexpr std::time_t kRetry = 300;       // after a failure, and the least refresh delay
constexpr std::time_t kMaxRefresh = 3600;

int g_staple_index = -1;

void warn(std::vector<std::string>* warnings, const std::string& text, const std::string& where) {
  if (warnings != nullptr) warnings->push_back(text + where);
}

Status load_file(TlsStaple& s, const std::string& path, const std::string& where) {
  ERR_clear_error();
  BIO* bio = BIO_new_file(path.c_str(), "rb");
  if (bio == nullptr) {
    return Status::error("BIO_new_file(\"" + path + "\") failed" + tls_error_text() + where);
  }
  OCSP_RESPONSE* resp = d2i_OCSP_RESPONSE_bio(bio, nullptr);
  BIO_free(bio);
  if (resp == nullptr) {
    return Status::error("d2i_OCSP_RESPONSE_bio(\"" + path + "\") failed" + tls_error_text() +
                         where);
  }
  const int len = i2d_OCSP_RESPONSE(resp, nullptr);
  if (len > 0) {
    s.staple.assign(static_cast<std::size_t>(len), '\0');
    auto* p = reinterpret_cast<unsigned char*>(s.staple.data());
    if (i2d_OCSP_RESPONSE(resp, &p) != len) s.staple.clear();
  }
  OCSP_RESPONSE_free(resp);
  if (s.staple.empty()) {
    return Status::error("i2d_OCSP_RESPONSE(\"" + path + "\") failed" + tls_error_text() + where);
  }
  s.valid = kOcspForever;
  return Status::ok();
}

// The issuer from the certificate's chain, else from the context's store
// (nginx's ngx_ssl_stapling_issuer). False when there is none.
Result<bool> find_issuer(TlsStaple& s, SSL_CTX* ctx, const std::string& where) {
  for (int i = 0; i < sk_X509_num(s.chain); ++i) {
    X509* candidate = sk_X509_value(s.chain, i);
    if (X509_check_issued(candidate, s.cert) == X509_V_OK) {
      if (X509_up_ref(candidate) != 1) return Status::error("X509_up_ref() failed" + where);
      s.issuer = candidate;
      return true;
    }
  }
  X509_STORE* store = SSL_CTX_get_cert_store(ctx);
  if (store == nullptr) return Status::error("SSL_CTX_get_cert_store() failed" + where);
  X509_STORE_CTX* sctx = X509_STORE_CTX_new();
  if (sctx == nullptr) return Status::error("X509_STORE_CTX_new() failed" + where);
  if (X509_STORE_CTX_init(sctx, store, nullptr, nullptr) != 1) {
    X509_STORE_CTX_free(sctx);
    return Status::error("X509_STORE_CTX_init() failed" + tls_error_text() + where);
  }
  X509* issuer = nullptr;
  const int rc = X509_STORE_CTX_get1_issuer(&issuer, sctx, s.cert);
  X509_STORE_CTX_free(sctx);
  if (rc == -1)
    return Status::error("X509_STORE_CTX_get1_issuer() failed" + tls_error_text() + where);
  ERR_clear_error();
  if (rc == 0) return false;
  s.issuer = issuer;
  return true;
}

void fetched(void* data, bool ok, std::string_view body);

void update(TlsStaple& s, EventLoop& loop) {
  const std::time_t now = clock::now_sec();
  if (!s.fetches || s.loading || s.refresh >= now) return;
  OcspFetch::Params p;
  p.responder = &s.responder;
  p.resolver = s.owner->resolver();
  p.resolver_timeout = s.owner->resolver_timeout();
  p.timeout = kStaplingTimeout;
  p.request = s.request;
  p.cert_name = s.name;
  p.log = &loop.log();
  s.log = p.log;
  s.loading = true;
  if (OcspFetch::start(loop, std::move(p), fetched, &s) == nullptr) {
    s.loading = false;
    s.refresh = now + kRetry;
  }
}

// nginx's ngx_ssl_stapling_ocsp_handler.
void fetched(void* data, bool ok, std::string_view body) {
  TlsStaple& s = *static_cast<TlsStaple*>(data);
  const std::time_t now = clock::now_sec();
  s.loading = false;
  s.refresh = now + kRetry;
  if (!ok) return;
  const std::string suffix =
      " while requesting certificate status, responder: " + s.responder.host + ", certificate: \"" +
      s.name + "\"";
  OcspVerdict v;
  Log& log = s.log != nullptr ? *s.log : Log::global();
  if (!ocsp_verify(body, s.owner->native(), s.chain, s.cert, s.issuer,
                   s.verify ? OCSP_TRUSTOTHER : OCSP_NOVERIFY, v, log, suffix)) {
    return;
  }
  if (v.status != V_OCSP_CERTSTATUS_GOOD) {
    VIGIL_LOG(log, kError, 0, "certificate status \"%s\" in the OCSP response%s",
              OCSP_cert_status_str(v.status), suffix.c_str());
    return;
  }
  s.staple.assign(body);
  s.valid = v.valid;
  // Refreshed before it expires, but not sooner than in 5 minutes, and at
  // least every hour.
  const std::time_t before_expiry = v.valid - kRetry;
  s.refresh = std::max(std::min(before_expiry, now + kMaxRefresh), now + kRetry);
}

// SSL_CTX_set_tlsext_status_cb (nginx's ngx_ssl_certificate_status_callback).
int status_cb(SSL* ssl, void*) {
  X509* cert = SSL_get_certificate(ssl);
  if (cert == nullptr || g_staple_index < 0) return SSL_TLSEXT_ERR_NOACK;
  auto* s = static_cast<TlsStaple*>(X509_get_ex_data(cert, g_staple_index));
  if (s == nullptr) return SSL_TLSEXT_ERR_NOACK;
  int rc = SSL_TLSEXT_ERR_NOACK;
  if (!s->staple.empty() && s->valid >= clock::now_sec()) {
    // OpenSSL frees the copy it is given.
    auto* p = static_cast<unsigned char*>(OPENSSL_malloc(s->staple.size()));
    if (p != nullptr) {
      std::memcpy(p, s->staple.data(), s->staple.size());
      if (SSL_set_tlsext_status_ocsp_resp(ssl, p, static_cast<long>(s->staple.size())) == 1) {
        rc = SSL_TLSEXT_ERR_OK;
      } else {
        OPENSSL_free(p);
      }
    }
  }
  auto* c = static_cast<Connection*>(SSL_get_app_data(ssl));
  if (c != nullptr && c->loop != nullptr) update(*s, *c->loop);
  return rc;
}

// One certificate (nginx's ngx_ssl_stapling_certificate): the staple is
// attached even when it ends up with nothing to send.
Status setup(TlsStaple& s, const TlsServerConf& conf, std::vector<std::string>* warnings) {
  const std::string& where = conf.where;
  if (!conf.stapling_file.empty()) return load_file(s, conf.stapling_file, where);
  auto found = find_issuer(s, s.owner->native(), where);
  if (!found) return found.status();
  if (!found.value()) {
    warn(
        warnings,
        "\"ssl_stapling\" ignored, issuer certificate not found for certificate \"" + s.name + "\"",
        where);
    return Status::ok();
  }
  std::string url = conf.stapling_responder;
  if (url.empty()) {
    url = ocsp_aia_url(s.cert);
    if (url.empty()) {
      warn(warnings,
           "\"ssl_stapling\" ignored, no OCSP responder URL in the certificate \"" + s.name + "\"",
           where);
      return Status::ok();
    }
  }
  if (Status st = ocsp_parse_responder(url, true, s.responder); !st) {
    const std::string& why = st.message();
    if (why == "invalid URL prefix") {
      warn(warnings,
           "\"ssl_stapling\" ignored, invalid URL prefix in OCSP responder \"" + url +
               "\" in the certificate \"" + s.name + "\"",
           where);
    } else {
      warn(warnings,
           "\"ssl_stapling\" ignored, " + why + " in OCSP responder \"" + url.substr(7) +
               "\" in the certificate \"" + s.name + "\"",
           where);
    }
    return Status::ok();
  }
  s.request = ocsp_build_request(s.responder, s.cert, s.issuer, Log::global(), "");
  if (s.request.empty()) return Status::error("cannot build an OCSP request" + where);
  s.verify = conf.stapling_verify;
  s.fetches = true;
  return Status::ok();
}

}  // namespace

Status tls_stapling_init(TlsContext& tc, const TlsServerConf& conf,
                         std::vector<std::string>* warnings) {
  if (g_staple_index < 0) {
    g_staple_index = X509_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
    if (g_staple_index < 0) return Status::error("X509_get_ex_new_index() failed" + conf.where);
  }
  for (const TlsContext::LoadedCert& lc : tc.certificates()) {
    auto* s = new (std::nothrow) TlsStaple();
    if (s == nullptr) return Status::error("no memory for ssl_stapling" + conf.where);
    tc.add_staple(s);
    s->owner = &tc;
    s->cert = lc.cert;
    s->chain = lc.chain;
    s->name = lc.name;
    if (X509_set_ex_data(lc.cert, g_staple_index, s) != 1) {
      return Status::error("X509_set_ex_data() failed" + conf.where);
    }
    if (Status st = setup(*s, conf, warnings); !st) return st;
  }
  SSL_CTX_set_tlsext_status_cb(tc.native(), status_cb);
  return Status::ok();
}

void tls_staple_free(TlsStaple* s) {
  if (s == nullptr) return;
  if (s->issuer != nullptr) X509_free(s->issuer);
  delete s;
}

}  // namespace vigil
