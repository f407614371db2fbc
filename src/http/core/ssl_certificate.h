#pragma once
// ssl_certificate and ssl_certificate_key with variables (nginx's
// ngx_http_ssl_certificate): the names are evaluated for each handshake,
// after SNI chose the server, with a request made for the purpose (the
// connection's variables: $ssl_server_name, geo on the client's address...).

#include <memory>
#include <string>

#include "event/tls/certificate.h"
#include "vigil/core/result.h"

namespace vigil {
struct TlsServerConf;
}

namespace vigil::http {

class VarTemplate;
struct Request;

// The names of every pair of `conf`, compiled ("unknown variable" errors
// point at the directive).
Result<std::unique_ptr<TlsCertificateNames>> server_certificate_names(const TlsServerConf& conf);

// A certificate or key name: `t` evaluated for `r` into `out`; false when
// memory for it could not be had. (proxy_ssl_certificate's names too.)
bool evaluate_certificate_name(const VarTemplate& t, const Request& r, std::string& out);

}  // namespace vigil::http
