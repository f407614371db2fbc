#pragma once
// A TLS context (nginx's ngx_ssl_t): one SSL_CTX built from a server's (or an
// upstream's) ssl directives when the configuration is loaded, so `-t` and a
// reload check certificates and keys before any worker uses them. Workers
// inherit the contexts through fork(); a reload builds new ones and the old
// workers keep theirs until they exit.

#include <openssl/ssl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "event/tls/certificate.h"
#include "event/tls/tls_conf.h"
#include "vigil/core/clock.h"
#include "vigil/core/result.h"

namespace vigil {

struct ResolverConf;
struct TlsOcspConf;
struct TlsStaple;

// One ssl_session_ticket_key file: 48 bytes (AES-128-CBC + HMAC-SHA256 with
// a 16-byte key) or 80 bytes (AES-256-CBC + 32-byte HMAC key), as nginx reads them.
struct TlsTicketKey {
  unsigned char name[16];
  unsigned char hmac_key[32];
  unsigned char aes_key[32];
  std::size_t hmac_len = 0;
  std::size_t aes_len = 0;
};

class TlsContext {
 public:
  // `alpn`: the protocols the server offers, most preferred first (empty:
  // no ALPN). The conf must outlive the context.
  static Result<std::shared_ptr<TlsContext>> server(const TlsServerConf& conf,
                                                    std::vector<std::string> alpn);
  static Result<std::shared_ptr<TlsContext>> client(const TlsClientConf& conf);

  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  SSL_CTX* native() const { return ctx_; }
  const TlsServerConf* server_conf() const { return server_conf_; }
  // ssl_reject_handshake: the server this context stands for refuses handshakes.
  bool rejects_handshakes() const { return server_conf_ != nullptr && server_conf_->reject_handshake; }
  const TlsClientConf* client_conf() const { return client_conf_; }
  const std::vector<TlsTicketKey>& ticket_keys() const { return ticket_keys_; }
  // The wire-format ALPN list (length-prefixed names).
  const std::string& alpn() const { return alpn_; }

  // The names of certificates with variables, given by the protocol that
  // owns the configuration (certificate.h); null when they have none.
  const TlsCertificateNames* certificate_names() const { return certificate_names_.get(); }
  void set_certificate_names(std::unique_ptr<TlsCertificateNames> names) {
    certificate_names_ = std::move(names);
  }

  // The certificates loaded with the configuration, in the order of the
  // ssl_certificate directives (the context holds a reference to each, and
  // to its chain).
  struct LoadedCert {
    X509* cert = nullptr;
    STACK_OF(X509)* chain = nullptr;  // may be null
    std::string name;                 // the file
  };
  const std::vector<LoadedCert>& certificates() const { return certs_; }

  // The resolver of names known only at run time (OCSP responders), given
  // by the protocol that owns the configuration; null: none defined.
  void set_resolver(std::shared_ptr<const ResolverConf> resolver, Msec timeout) {
    resolver_ = std::move(resolver);
    resolver_timeout_ = timeout;
  }
  const std::shared_ptr<const ResolverConf>& resolver() const { return resolver_; }
  Msec resolver_timeout() const { return resolver_timeout_; }

  // ssl_ocsp's settings (ocsp_client.h); null when it is off.
  void set_ocsp(std::unique_ptr<TlsOcspConf> conf);
  const TlsOcspConf* ocsp() const { return ocsp_.get(); }

  // ssl_stapling's per-certificate state (stapling.h), freed with the context.
  void add_staple(TlsStaple* s) { staples_.push_back(s); }

  static TlsContext* of(const SSL_CTX* ctx);
  // The method of our socket BIO (socket_bio.h); null when the context
  // enables kTLS, which needs OpenSSL's socket BIO.
  BIO_METHOD* bio_method() const { return bio_method_; }

 private:
  TlsContext() = default;
  Status configure_server(const TlsServerConf& conf);
  Status configure_client(const TlsClientConf& conf);

  Status make_bio_method();

  SSL_CTX* ctx_ = nullptr;
  BIO_METHOD* bio_method_ = nullptr;
  const TlsServerConf* server_conf_ = nullptr;
  const TlsClientConf* client_conf_ = nullptr;
  std::vector<TlsTicketKey> ticket_keys_;
  std::string alpn_;
  std::unique_ptr<TlsCertificateNames> certificate_names_;
  std::vector<LoadedCert> certs_;
  std::shared_ptr<const ResolverConf> resolver_;
  Msec resolver_timeout_ = 30000;
  std::vector<TlsStaple*> staples_;
  std::unique_ptr<TlsOcspConf> ocsp_;
};

// The OpenSSL error queue as " (SSL: error:...:reason)" and cleared; "" when empty.
std::string tls_error_text();

}  // namespace vigil
