#pragma once
// The ssl_* and proxy_ssl_* directives (nginx's ngx_http_ssl_module,
// ngx_stream_ssl_module and the proxy_ssl_* part of the proxy modules), kept
// in the event layer because http and stream share them: each protocol embeds
// a TlsServerConf (and a TlsClientConf for upstreams) in its server conf and
// registers the directives with add_tls_server_directives. Paths are resolved
// against the configuration's directory when parsed, as nginx does.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <typeinfo>
#include <utility>
#include <vector>

#include "core/conf/module.h"
#include "vigil/core/clock.h"

namespace vigil {

class ShmZone;

// ssl_protocols bits.
inline constexpr unsigned kTlsV1 = 1u << 0;
inline constexpr unsigned kTlsV1_1 = 1u << 1;
inline constexpr unsigned kTlsV1_2 = 1u << 2;
inline constexpr unsigned kTlsV1_3 = 1u << 3;

enum class TlsVerify : std::uint8_t { kOff, kOn, kOptional, kOptionalNoCa };

struct TlsCertificate {
  std::string cert;  // resolved path
  std::string key;
  std::string where;  // of ssl_certificate
};

struct TlsServerConf {
  std::vector<std::string> certificates;  // ssl_certificate, in order
  std::vector<std::string> certificate_where;
  std::vector<std::string> keys;  // ssl_certificate_key, paired by order
  unsigned protocols = kTlsV1_2 | kTlsV1_3;
  std::string ciphers = "HIGH:!aNULL:!MD5";
  bool prefer_server_ciphers = false;
  std::string ecdh_curve = "auto";
  std::string dhparam;
  // ssl_password_file: its lines, read when the directive is (as nginx reads
  // it), so a server inheriting it does not open the file again.
  std::vector<std::string> passwords;
  std::vector<std::pair<std::string, std::string>> conf_commands;
  // ssl_handshake_timeout; 0 when not set: each protocol bounds the
  // handshake as nginx does (http: the server's client_header_timeout,
  // stream: 60 s, mail: the server's timeout).
  Msec handshake_timeout = 0;
  // ssl_reject_handshake (http): handshakes naming this server (or reaching
  // it as the default server without SNI) are refused with the
  // unrecognized_name alert; no certificate is needed then.
  bool reject_handshake = false;

  // ssl_session_cache: off | none | [builtin[:size]] [shared:name:size]
  enum class Cache : std::uint8_t { kOff, kNone, kOn };
  Cache cache = Cache::kNone;
  bool builtin_cache = false;
  std::size_t builtin_size = 20480;  // sessions (OpenSSL's default)
  std::string shared_name;           // "" = no shared cache
  std::size_t shared_size = 0;       // bytes
  ShmZone* shared_zone = nullptr;    // registered when the directive is read
  Msec session_timeout = 300000;
  bool session_tickets = true;
  std::vector<std::string> ticket_key_files;

  TlsVerify verify = TlsVerify::kOff;
  std::string client_certificate;
  std::string trusted_certificate;
  std::string crl;  // ssl_crl: revocation lists checked for every certificate of a chain
  int verify_depth = 1;

  // ssl_stapling, ssl_stapling_file, ssl_stapling_responder,
  // ssl_stapling_verify (http; stapling.h).
  bool stapling = false;
  bool stapling_verify = false;
  std::string stapling_file;       // resolved path, "" = none
  std::string stapling_responder;  // the URL as written, "" = the certificate's AIA

  // ssl_ocsp, ssl_ocsp_responder, ssl_ocsp_cache (http; ocsp_client.h).
  enum class Ocsp : std::uint8_t { kOff, kOn, kLeaf };
  Ocsp ocsp = Ocsp::kOff;
  std::string ocsp_responder;  // the URL as written, "" = each certificate's AIA
  ShmZone* ocsp_cache = nullptr;  // null: off

  // Where the load's warnings go (ConfEnv::warnings), for the notices of
  // ssl_stapling.
  std::vector<std::string>* warnings = nullptr;

  std::string where;  // the directive (or server) messages point at

  // ssl_certificate / ssl_certificate_key with variables (either one): no
  // certificate is loaded with the configuration; every pair is evaluated
  // and loaded for each handshake (certificate.h), names with variables
  // kept as written and resolved under conf_prefix then.
  bool certificate_vars = false;
  bool key_vars = false;
  std::string conf_prefix;
  bool certificate_variables() const { return certificate_vars || key_vars; }

  std::vector<TlsCertificate> pairs() const;
};

// proxy_ssl_*: TLS to an upstream.
struct TlsClientConf {
  bool enable = false;  // proxy_ssl on (stream); implied by https:// (http)
  unsigned protocols = kTlsV1_2 | kTlsV1_3;
  std::string ciphers = "DEFAULT";
  bool verify = false;
  std::string trusted_certificate;
  std::string crl;  // proxy_ssl_crl (with proxy_ssl_verify)
  int verify_depth = 1;
  bool server_name = false;
  std::string name;  // proxy_ssl_name; "" = the proxy_pass host
  bool session_reuse = true;
  // "" (or "" after evaluation): no client certificate.
  std::string certificate;
  std::string certificate_key;
  // Either has variables: evaluated per connection (certificate.h), names
  // resolved under conf_prefix then.
  bool certificate_vars = false;
  bool key_vars = false;
  std::string conf_prefix;
  bool certificate_variables() const { return certificate_vars || key_vars; }
  std::vector<std::string> passwords;  // proxy_ssl_password_file, read with the directive
  std::vector<std::pair<std::string, std::string>> conf_commands;
  std::string where;
};

// Registers every ssl_* directive (server side) in `contexts`, writing the
// TlsServerConf that `get` finds in the module's conf of spec `spec`.
void add_tls_server_directives(Module& m, ConfContextMask contexts, int spec,
                               const std::type_info& conf_type, TlsServerConf& (*get)(void*));
// ssl_stapling*, ssl_ocsp* (nginx has them in http only).
void add_tls_ocsp_directives(Module& m, ConfContextMask contexts, int spec,
                             const std::type_info& conf_type, TlsServerConf& (*get)(void*));
// The <prefix>_ssl_* directives (proxy_ssl_*, grpc_ssl_*), and
// <prefix>_ssl itself with `with_enable_flag`.
void add_tls_client_directives(Module& m, ConfContextMask contexts, int spec,
                               const std::type_info& conf_type, TlsClientConf& (*get)(void*),
                               bool with_enable_flag, std::string_view prefix);

// Copies what the child scope did not set from its parent (the merge of
// nginx's ngx_http_ssl_merge_srv_conf).
void merge_tls_server_conf(const ConfInit& ctx, const TlsServerConf& parent, TlsServerConf& child);
void merge_tls_client_conf(const ConfInit& ctx, const TlsClientConf& parent, TlsClientConf& child,
                           std::string_view prefix);

template <class Conf, TlsServerConf Conf::*Member>
TlsServerConf& tls_server_member(void* conf) {
  return static_cast<Conf*>(conf)->*Member;
}
template <class Conf, TlsClientConf Conf::*Member>
TlsClientConf& tls_client_member(void* conf) {
  return static_cast<Conf*>(conf)->*Member;
}

}  // namespace vigil
