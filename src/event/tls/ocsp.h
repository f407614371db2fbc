#pragma once
// OCSP (RFC 6960) for TLS servers, as nginx 1.22 has it
// (ngx_event_openssl_stapling.c): the pieces that stapling (stapling.h) and
// the check of client certificates (ssl_ocsp, ocsp_client.h) share.
//
// A request for one certificate is built with OpenSSL's OCSP API and sent
// as nginx sends it: `GET <uri>/<base64 of the DER, URI-escaped> HTTP/1.0`
// with a Host field, to the responder named by ssl_stapling_responder /
// ssl_ocsp_responder or the certificate's Authority Information Access
// (ocsp_fetch.h sends it on the worker's loop). The answer is checked with
// OCSP_basic_verify against the context's certificate store.

#include <openssl/ocsp.h>
#include <openssl/ssl.h>
#include <sys/socket.h>

#include <cstdint>
#include <ctime>
#include <string>
#include <string_view>
#include <vector>

#include "vigil/core/result.h"

namespace vigil {

class Log;

struct OcspAddress {
  sockaddr_storage addr{};
  socklen_t len = 0;
  std::string text;  // "127.0.0.1:8081", for the log
};

// `sa` with `port`, and its text.
OcspAddress ocsp_address(const sockaddr* sa, socklen_t len, std::uint16_t port);

// Where requests go: `http://host[:port][/uri]`.
struct OcspResponder {
  std::string host;  // as written ("[::1]" for IPv6): the Host field and the name to resolve
  std::string uri = "/";
  std::uint16_t port = 80;
  bool numeric = false;  // host is an address: addrs has it
  // A numeric host's address, or the addresses a name had when the
  // configuration was read (used when no resolver is defined).
  std::vector<OcspAddress> addrs;
};

// Parses `url` (nginx's ngx_parse_url with default port 80). The error
// text is nginx's ("invalid URL prefix", "invalid host", "invalid port",
// "host not found"). `resolve`: a name is resolved now (at load time, as
// nginx does for ssl_stapling_responder and ssl_ocsp_responder); otherwise
// only addresses fill `addrs`.
Status ocsp_parse_responder(std::string_view url, bool resolve, OcspResponder& out);

// The responder URL of the certificate's AIA extension, "" when none.
std::string ocsp_aia_url(X509* cert);

// The HTTP request asking about `cert` issued by `issuer`; "" when OpenSSL
// failed (logged at crit, with `log_suffix`).
std::string ocsp_build_request(const OcspResponder& r, X509* cert, X509* issuer, Log& log,
                               std::string_view log_suffix);

// The answer's verdict (nginx's ngx_ssl_ocsp_verify).
struct OcspVerdict {
  int status = V_OCSP_CERTSTATUS_UNKNOWN;  // V_OCSP_CERTSTATUS_*
  std::time_t valid = 0;                   // nextUpdate; kOcspForever without one
};
inline constexpr std::time_t kOcspForever = static_cast<std::time_t>(0x7fffffffffffffffLL);

// Checks the DER answer `der` for `cert` (issued by `issuer`): a successful
// response, signed as `flags` asks (OCSP_NOVERIFY, OCSP_TRUSTOTHER or 0)
// against `ctx`'s store and `chain`, with a status for the certificate,
// current within 5 minutes. False when it is not (logged at error, with
// `log_suffix`).
bool ocsp_verify(std::string_view der, SSL_CTX* ctx, STACK_OF(X509) * chain, X509* cert,
                 X509* issuer, unsigned long flags, OcspVerdict& out, Log& log,
                 std::string_view log_suffix);

}  // namespace vigil
