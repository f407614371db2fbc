#include "event/tls/ocsp.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/x509v3.h>

#include <cstring>
#include <memory>

#include "event/tls/context.h"
#include "vigil/core/log.h"

namespace vigil {
namespace {

bool iprefix(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i) {
    char ch = s[i];
    if (ch >= 'A' && ch <= 'Z') ch = static_cast<char>(ch | 0x20);
    if (ch != prefix[i]) return false;
  }
  return true;
}

}  // namespace

OcspAddress ocsp_address(const sockaddr* sa, socklen_t len, std::uint16_t port) {
  OcspAddress a;
  std::memcpy(&a.addr, sa, len);
  a.len = len;
  char text[INET6_ADDRSTRLEN] = {};
  if (sa->sa_family == AF_INET6) {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&a.addr);
    in6->sin6_port = htons(port);
    ::inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof text);
    a.text = std::string("[") + text + "]:" + std::to_string(port);
  } else {
    auto* in4 = reinterpret_cast<sockaddr_in*>(&a.addr);
    in4->sin_port = htons(port);
    ::inet_ntop(AF_INET, &in4->sin_addr, text, sizeof text);
    a.text = std::string(text) + ":" + std::to_string(port);
  }
  return a;
}

namespace {

// RFC 3986's unreserved characters stay, the rest is %XX (nginx's
// NGX_ESCAPE_URI_COMPONENT turns base64's '+', '/' and '=' into escapes).
void escape_component(std::string_view in, std::string& out) {
  static const char kHex[] = "0123456789ABCDEF";
  for (unsigned char ch : in) {
    const bool keep = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                      (ch >= '0' && ch <= '9') || ch == '-' || ch == '.' || ch == '_' || ch == '~';
    if (keep) {
      out += static_cast<char>(ch);
    } else {
      out += '%';
      out += kHex[ch >> 4];
      out += kHex[ch & 0xf];
    }
  }
}

// nextUpdate as a time_t; -1 when it cannot be read.
std::time_t asn1_time(const ASN1_GENERALIZEDTIME* t) {
  struct tm tm {};
  if (ASN1_TIME_to_tm(t, &tm) != 1) return -1;
  return ::timegm(&tm);
}

}  // namespace

Status ocsp_parse_responder(std::string_view url, bool resolve, OcspResponder& out) {
  out = OcspResponder{};
  constexpr std::string_view kScheme = "http://";  // layer-names-ok: the responder URL scheme
  if (url.size() <= kScheme.size() || !iprefix(url, kScheme)) {
    return Status::error("invalid URL prefix");
  }
  std::string_view rest = url.substr(7);
  const std::size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  if (slash != std::string_view::npos) out.uri.assign(rest.substr(slash));
  std::string_view host = authority;
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {
    const std::size_t close = authority.find(']');
    if (close == std::string_view::npos) return Status::error("invalid host");
    host = authority.substr(0, close + 1);
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return Status::error("invalid host");
      port = after.substr(1);
      if (port.empty()) return Status::error("invalid port");
    }
  } else if (const std::size_t colon = authority.rfind(':'); colon != std::string_view::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
    if (port.empty()) return Status::error("invalid port");
  }
  if (host.empty() || host == "[]") return Status::error("no host");
  if (!port.empty()) {
    unsigned value = 0;
    for (char ch : port) {
      if (ch < '0' || ch > '9' || value > 65535) return Status::error("invalid port");
      value = value * 10 + static_cast<unsigned>(ch - '0');
    }
    if (value < 1 || value > 65535) return Status::error("invalid port");
    out.port = static_cast<std::uint16_t>(value);
  }
  out.host.assign(host);
  // The bare name or address (without IPv6's brackets).
  std::string bare(host);
  if (bare.front() == '[') bare = bare.substr(1, bare.size() - 2);
  sockaddr_in in4{};
  sockaddr_in6 in6{};
  if (::inet_pton(AF_INET, bare.c_str(), &in4.sin_addr) == 1) {
    in4.sin_family = AF_INET;
    out.addrs.push_back(ocsp_address(reinterpret_cast<sockaddr*>(&in4), sizeof in4, out.port));
    out.numeric = true;
    return Status::ok();
  }
  if (::inet_pton(AF_INET6, bare.c_str(), &in6.sin6_addr) == 1) {
    in6.sin6_family = AF_INET6;
    out.addrs.push_back(ocsp_address(reinterpret_cast<sockaddr*>(&in6), sizeof in6, out.port));
    out.numeric = true;
    return Status::ok();
  }
  if (host.front() == '[') return Status::error("invalid host");
  if (!resolve) return Status::ok();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(bare.c_str(), nullptr, &hints, &res) != 0 || res == nullptr) {
    return Status::error("host not found");
  }
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6) continue;
    out.addrs.push_back(ocsp_address(ai->ai_addr, ai->ai_addrlen, out.port));
  }
  ::freeaddrinfo(res);
  if (out.addrs.empty()) return Status::error("host not found");
  return Status::ok();
}

std::string ocsp_aia_url(X509* cert) {
  STACK_OF(OPENSSL_STRING)* aia = X509_get1_ocsp(cert);
  if (aia == nullptr) return {};
  std::string url;
  if (const char* s = sk_OPENSSL_STRING_value(aia, 0); s != nullptr) url = s;
  X509_email_free(aia);
  return url;
}

std::string ocsp_build_request(const OcspResponder& r, X509* cert, X509* issuer, Log& log,
                               std::string_view log_suffix) {
  const auto fail = [&](const char* what) {
    const std::string detail = tls_error_text();
    VIGIL_LOG(log, kCrit, 0, "%s failed%s%.*s", what, detail.c_str(),
              static_cast<int>(log_suffix.size()), log_suffix.data());
    return std::string();
  };
  std::unique_ptr<OCSP_REQUEST, decltype(&OCSP_REQUEST_free)> req(OCSP_REQUEST_new(),
                                                                  OCSP_REQUEST_free);
  if (!req) return fail("OCSP_REQUEST_new()");
  OCSP_CERTID* id = OCSP_cert_to_id(nullptr, cert, issuer);
  if (id == nullptr) return fail("OCSP_cert_to_id()");
  if (OCSP_request_add0_id(req.get(), id) == nullptr) {
    OCSP_CERTID_free(id);
    return fail("OCSP_request_add0_id()");
  }
  const int len = i2d_OCSP_REQUEST(req.get(), nullptr);
  if (len <= 0) return fail("i2d_OCSP_REQUEST()");
  std::string der(static_cast<std::size_t>(len), '\0');
  auto* p = reinterpret_cast<unsigned char*>(der.data());
  if (i2d_OCSP_REQUEST(req.get(), &p) != len) return fail("i2d_OCSP_REQUEST()");
  std::string b64(4 * ((der.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(b64.data()),
                                reinterpret_cast<const unsigned char*>(der.data()),
                                static_cast<int>(der.size()));
  if (n < 0) return fail("EVP_EncodeBlock()");
  b64.resize(static_cast<std::size_t>(n));
  std::string out = "GET ";
  out += r.uri;
  if (out.back() != '/') out += '/';
  escape_component(b64, out);
  out += " HTTP/1.0\r\nHost: ";  // layer-names-ok: OCSP over HTTP (RFC 6960 A.1)
  out += r.host;
  out += "\r\n\r\n";
  return out;
}

bool ocsp_verify(std::string_view der, SSL_CTX* ctx, STACK_OF(X509) * chain, X509* cert,
                 X509* issuer, unsigned long flags, OcspVerdict& out, Log& log,
                 std::string_view log_suffix) {
  const int sl = static_cast<int>(log_suffix.size());
  const char* sp = log_suffix.data();
  const auto ssl_error = [&](LogLevel level, const char* what) {
    const std::string detail = tls_error_text();
    if (log.enabled(level)) log.write(level, 0, "%s failed%s%.*s", what, detail.c_str(), sl, sp);
    return false;
  };
  const auto* p = reinterpret_cast<const unsigned char*>(der.data());
  std::unique_ptr<OCSP_RESPONSE, decltype(&OCSP_RESPONSE_free)> resp(
      d2i_OCSP_RESPONSE(nullptr, &p, static_cast<long>(der.size())), OCSP_RESPONSE_free);
  if (!resp) return ssl_error(LogLevel::kError, "d2i_OCSP_RESPONSE()");
  const int rs = OCSP_response_status(resp.get());
  if (rs != OCSP_RESPONSE_STATUS_SUCCESSFUL) {
    VIGIL_LOG(log, kError, 0, "OCSP response not successful (%d: %s)%.*s", rs,
              OCSP_response_status_str(rs), sl, sp);
    return false;
  }
  std::unique_ptr<OCSP_BASICRESP, decltype(&OCSP_BASICRESP_free)> basic(
      OCSP_response_get1_basic(resp.get()), OCSP_BASICRESP_free);
  if (!basic) return ssl_error(LogLevel::kError, "OCSP_response_get1_basic()");
  X509_STORE* store = SSL_CTX_get_cert_store(ctx);
  if (store == nullptr) return ssl_error(LogLevel::kCrit, "SSL_CTX_get_cert_store()");
  if (OCSP_basic_verify(basic.get(), chain, store, flags) != 1) {
    return ssl_error(LogLevel::kError, "OCSP_basic_verify()");
  }
  std::unique_ptr<OCSP_CERTID, decltype(&OCSP_CERTID_free)> id(
      OCSP_cert_to_id(nullptr, cert, issuer), OCSP_CERTID_free);
  if (!id) return ssl_error(LogLevel::kCrit, "OCSP_cert_to_id()");
  int status = 0;
  ASN1_GENERALIZEDTIME* this_update = nullptr;
  ASN1_GENERALIZEDTIME* next_update = nullptr;
  if (OCSP_resp_find_status(basic.get(), id.get(), &status, nullptr, nullptr, &this_update,
                            &next_update) != 1) {
    ERR_clear_error();
    VIGIL_LOG(log, kError, 0, "certificate status not found in the OCSP response%.*s", sl, sp);
    return false;
  }
  if (OCSP_check_validity(this_update, next_update, 300, -1) != 1) {
    return ssl_error(LogLevel::kError, "OCSP_check_validity()");
  }
  std::time_t valid = kOcspForever;
  if (next_update != nullptr) {
    valid = asn1_time(next_update);
    if (valid == -1) {
      ERR_clear_error();
      VIGIL_LOG(log, kError, 0, "invalid nextUpdate time in certificate status%.*s", sl, sp);
      return false;
    }
  }
  out.status = status;
  out.valid = valid;
  return true;
}

}  // namespace vigil
