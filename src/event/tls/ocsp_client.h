#pragma once
// Client certificates checked with OCSP (nginx's ssl_ocsp, ngx_ssl_ocsp_*):
// after the handshake verified a client's certificate, the status of each
// certificate of its chain (ssl_ocsp on: every one but the root; leaf: the
// client's own) is asked of the responder (ssl_ocsp_responder, else the
// certificate's AIA, whose host name needs a `resolver`), one after the
// other, first from ssl_ocsp_cache when it has one. The handshake is held
// (its timeout still running) until the answers are in: then the protocol
// sees the connection as for any handshake, and a certificate that is not
// "good", or a status that could not be had, makes $ssl_client_verify
// "FAILED:certificate revoked" / "FAILED:certificate status unknown" /
// "FAILED:certificate status request failed" and the request a 400
// (tls_client_verify_status), as in nginx. The checks run on every
// handshake, resumed ones too.

#include <string>

#include "event/tls/ocsp.h"
#include "vigil/core/result.h"

namespace vigil {

class ShmZone;
class TlsContext;
struct Connection;
struct TlsServerConf;

// A context's ssl_ocsp settings (nginx's ngx_ssl_ocsp_conf_t).
struct TlsOcspConf {
  bool leaf = false;
  bool has_responder = false;
  OcspResponder responder;  // ssl_ocsp_responder
  ShmZone* cache = nullptr;
};

// Reads the ssl_ocsp settings of `conf` into `tc` (conf.ocsp not off).
Status tls_ocsp_init(TlsContext& tc, const TlsServerConf& conf);

// After a successful handshake: starts the checks. 0: nothing to wait for;
// 1: waiting, `resume(c)` runs when they are done; -1: failed (logged).
int tls_ocsp_validate(Connection& c, void (*resume)(Connection& c));

// The checks' verdict: null when the certificate stands (or nothing was
// checked), else nginx's reason ("certificate revoked", ...).
const char* tls_ocsp_failure(const Connection& c);

// Stops the checks and frees their state (tls_close).
void tls_ocsp_cleanup(Connection& c);

}  // namespace vigil
