#pragma once
// proxy_ssl_certificate / proxy_ssl_certificate_key (and the grpc_ and other
// prefixes) with variables (nginx's ngx_http_upstream_ssl_certificate):
// evaluated for the request when the upstream asks for a client
// certificate; an empty certificate name sends none.

#include "vigil/core/result.h"

namespace vigil {
class TlsContext;
struct TlsClientConf;
}  // namespace vigil

namespace vigil::http::upstream_core {

// Gives `ctx` the compiled names when `conf`'s certificate has variables;
// nothing to do otherwise.
Status set_client_certificate_names(TlsContext& ctx, const TlsClientConf& conf);

}  // namespace vigil::http::upstream_core
