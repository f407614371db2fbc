#pragma once
// ssl_certificate / ssl_certificate_key and proxy_ssl_certificate /
// proxy_ssl_certificate_key with variables in stream servers (nginx's
// ngx_stream_ssl_certificate and the stream proxy's certificate callback):
// evaluated with the session's variables for each handshake, client side
// and upstream side alike (both connections' data is the Session).

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "event/tls/certificate.h"
#include "vigil/core/result.h"

namespace vigil::stream {

// Compiles the names of `certs` and `keys` (paired by order); `where` names
// the directive for errors.
Result<std::unique_ptr<TlsCertificateNames>> certificate_names(
    const std::vector<std::string>& certs, const std::vector<std::string>& keys,
    const std::string& where);

}  // namespace vigil::stream
