#pragma once
// OCSP stapling (nginx's ssl_stapling, ngx_ssl_stapling*): the server sends
// the OCSP response about its own certificate in the handshake (RFC 6066
// §8 status_request, RFC 8446 §4.4.2.1), so the client need not ask the CA.
//
// When the configuration is loaded, every certificate of the context gets a
// staple: either the DER response of ssl_stapling_file (sent as it is,
// forever, never fetched), or its issuer (from the certificate's chain, else
// the context's store: ssl_trusted_certificate) and its responder
// (ssl_stapling_responder, else the certificate's AIA). A certificate
// without either is served without a staple, with a warning, as nginx does.
//
// The responses are kept per worker. A handshake that asks for a status
// gets the response in memory while it is valid (until its nextUpdate), and
// starts a fetch when the refresh time has come (ocsp_fetch.h: on the
// worker's loop, never blocking it). So the first handshake goes without a
// staple while the fetch runs, as in nginx. A good response is kept and
// refreshed 5 minutes before it expires, but not sooner than 5 minutes and
// at least every hour; a failed fetch, a response that does not verify
// (ssl_stapling_verify on: the signer must be trusted by
// ssl_trusted_certificate and the chain) or a status other than "good"
// keeps the old response and tries again in 5 minutes.

#include <string>
#include <vector>

#include "vigil/core/result.h"

namespace vigil {

class TlsContext;
struct TlsServerConf;
struct TlsStaple;

// Sets up stapling for every certificate of `tc` (conf.stapling on); the
// "ssl_stapling ignored" notices go to `warnings` (may be null).
Status tls_stapling_init(TlsContext& tc, const TlsServerConf& conf,
                         std::vector<std::string>* warnings);

// Frees a staple (TlsContext's destructor).
void tls_staple_free(TlsStaple* s);

}  // namespace vigil
