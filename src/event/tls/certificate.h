#pragma once
// Certificates named with variables (nginx's ngx_ssl_connection_certificate
// and the ssl_certificate / proxy_ssl_certificate callbacks, nginx 1.15.9+):
// a context whose ssl_certificate (or proxy_ssl_certificate) has variables
// loads no certificate when the configuration is read; OpenSSL's certificate
// callback asks the protocol for the names of each pair for this connection,
// and the files (or "data:" values) are loaded into the connection's SSL
// object.
//
// Server side the callback runs after SNI chose the server; client side when
// the upstream asks for a certificate. A name that evaluates empty means no
// certificate (client side: none is sent). A file that cannot be loaded, or a
// key that does not match, fails the handshake with one error line.
//
// Certificates are loaded for every handshake, as nginx 1.22 does: a renewed
// file is used by the next handshake, with no cache to invalidate.

#include <openssl/ssl.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "vigil/core/result.h"

namespace vigil {

struct Connection;

// The protocol's part: the names of pair `i` (in the order of the
// directives) for connection `c`, evaluated with the protocol's variables.
// A result that is false has been logged, and fails the handshake.
class TlsCertificateNames {
 public:
  virtual ~TlsCertificateNames() = default;
  virtual bool evaluate(Connection& c, std::size_t i, std::string& cert,
                        std::string& key) const = 0;
};

// Loads the certificate chain `cert` and the private key `key` (file names,
// relative ones under `conf_prefix`, or "data:" followed by PEM) into `ssl`,
// trying each of `passwords` for an encrypted key.
Status tls_use_certificate(SSL* ssl, std::string_view cert, std::string_view key,
                           const std::vector<std::string>& passwords, std::string_view conf_prefix);

// A name of ssl_certificate / ssl_certificate_key has variables ('$'), as
// nginx counts them.
bool tls_name_has_variables(std::string_view name);

// SSL_CTX_set_cert_cb of contexts whose certificates have variables; `arg`
// is the TlsContext.
int tls_certificate_cb(SSL* ssl, void* arg);

}  // namespace vigil
