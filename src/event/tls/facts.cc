// nginx's $ssl_* facts of a TLS connection, computed when a variable asks.
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string_view>

#include "event/tls/ocsp_client.h"
#include "event/tls/tls.h"

namespace vigil {
namespace {

// Appends to `out` when it is not null; counts always.
struct Writer {
  char* out;
  std::size_t n = 0;
  void put(std::string_view s) {
    if (out != nullptr && !s.empty()) std::memcpy(out + n, s.data(), s.size());
    n += s.size();
  }
  void hex(const unsigned char* p, std::size_t len, bool upper) {
    const char* digits = upper ? "0123456789ABCDEF" : "0123456789abcdef";
    for (std::size_t i = 0; i < len; ++i) {
      const char two[2] = {digits[p[i] >> 4], digits[p[i] & 0xf]};
      put({two, 2});
    }
  }
};

// The text a BIO received (a memory BIO), passed through `w`; the BIO is freed.
bool drain(BIO* bio, Writer& w, bool tab_after_newline = false) {
  if (bio == nullptr) return false;
  char* data = nullptr;
  const long len = BIO_get_mem_data(bio, &data);
  std::string_view text(data, len > 0 ? static_cast<std::size_t>(len) : 0);
  if (tab_after_newline) {
    // nginx's $ssl_client_cert: the PEM folded as one header field value.
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.remove_suffix(1);
    std::size_t at = 0;
    while (at < text.size()) {
      const std::size_t nl = text.find('\n', at);
      const std::size_t end = nl == std::string_view::npos ? text.size() : nl + 1;
      w.put(text.substr(at, end - at));
      if (nl != std::string_view::npos && end < text.size()) w.put("\t");
      at = end;
    }
  } else {
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.remove_suffix(1);
    w.put(text);
  }
  BIO_free(bio);
  return true;
}

// Runs `print` (true on success) on a fresh memory BIO and passes what it
// wrote through `w`.
template <class Print>
bool printed(Writer& w, Print print, bool tab_after_newline = false) {
  BIO* bio = BIO_new(BIO_s_mem());
  if (bio == nullptr) return false;
  if (!print(bio)) {
    BIO_free(bio);
    return false;
  }
  return drain(bio, w, tab_after_newline);
}

bool name_text(const X509_NAME* name, Writer& w) {
  return printed(w,
                 [name](BIO* b) { return X509_NAME_print_ex(b, name, 0, XN_FLAG_RFC2253) >= 0; });
}

}  // namespace

std::size_t tls_fact(const Connection& c, TlsFact fact, char* out, bool& found) {
  found = false;
  if (c.ssl == nullptr || c.ssl->ssl == nullptr) return 0;
  SSL* ssl = c.ssl->ssl;
  Writer w{out};
  switch (fact) {
    case TlsFact::kSessionId: {
      const SSL_SESSION* sess = SSL_get0_session(ssl);
      if (sess == nullptr) return 0;
      unsigned int len = 0;
      const unsigned char* id = SSL_SESSION_get_id(sess, &len);
      w.hex(id, len, true);
      found = true;
      return w.n;
    }
    case TlsFact::kCurve: {
      const int nid = SSL_get_negotiated_group(ssl);
      if (nid == NID_undef) return 0;
      const char* name = OBJ_nid2sn(nid & ~TLSEXT_nid_unknown);
      if ((nid & TLSEXT_nid_unknown) != 0 || name == nullptr) {
        char tmp[16];
        const int n = std::snprintf(tmp, sizeof tmp, "0x%04x", nid & 0xffff);
        w.put({tmp, n > 0 ? static_cast<std::size_t>(n) : 0});
      } else {
        w.put(name);
      }
      found = true;
      return w.n;
    }
    case TlsFact::kCurves: {
      const int n = SSL_get1_curves(ssl, nullptr);
      int groups[64];
      if (n <= 0 || n > 64 || SSL_get1_curves(ssl, groups) != n) return 0;
      for (int i = 0; i < n; ++i) {
        if (i > 0) w.put(":");
        const char* name = (groups[i] & TLSEXT_nid_unknown) != 0 ? nullptr : OBJ_nid2sn(groups[i]);
        if (name != nullptr) {
          w.put(name);
        } else {
          char tmp[16];
          const int len = std::snprintf(tmp, sizeof tmp, "0x%04x", groups[i] & 0xffff);
          w.put({tmp, len > 0 ? static_cast<std::size_t>(len) : 0});
        }
      }
      found = true;
      return w.n;
    }
    case TlsFact::kClientVerify: {
      // A failed verification is reported even when no certificate is left.
      if (const long rc = SSL_get_verify_result(ssl); rc != X509_V_OK) {
        w.put("FAILED:");
        w.put(X509_verify_cert_error_string(rc));
      } else if (SSL_get0_peer_certificate(ssl) == nullptr) {
        w.put("NONE");
      } else if (const char* why = tls_ocsp_failure(c); why != nullptr) {
        w.put("FAILED:");
        w.put(why);
      } else {
        w.put("SUCCESS");
      }
      found = true;
      return w.n;
    }
    case TlsFact::kCiphers: {
      STACK_OF(SSL_CIPHER)* list = SSL_get_client_ciphers(ssl);
      if (list == nullptr) return 0;
      for (int i = 0; i < sk_SSL_CIPHER_num(list); ++i) {
        if (i > 0) w.put(":");
        w.put(SSL_CIPHER_get_name(sk_SSL_CIPHER_value(list, i)));
      }
      found = true;
      return w.n;
    }
    default:
      break;
  }
  X509* cert = SSL_get0_peer_certificate(ssl);
  if (cert == nullptr) return 0;
  switch (fact) {
    case TlsFact::kClientSubject:
      found = name_text(X509_get_subject_name(cert), w);
      break;
    case TlsFact::kClientIssuer:
      found = name_text(X509_get_issuer_name(cert), w);
      break;
    case TlsFact::kClientSerial:
      found = printed(
          w, [cert](BIO* b) { return i2a_ASN1_INTEGER(b, X509_get0_serialNumber(cert)) >= 0; });
      break;
    case TlsFact::kClientSubjectLegacy:
    case TlsFact::kClientIssuerLegacy: {
      char line[1024];
      const X509_NAME* name = fact == TlsFact::kClientSubjectLegacy ? X509_get_subject_name(cert)
                                                                    : X509_get_issuer_name(cert);
      if (X509_NAME_oneline(name, line, sizeof line) == nullptr) return 0;
      w.put(line);
      found = true;
      break;
    }
    case TlsFact::kClientNotBefore:
    case TlsFact::kClientNotAfter: {
      const ASN1_TIME* t =
          fact == TlsFact::kClientNotBefore ? X509_get0_notBefore(cert) : X509_get0_notAfter(cert);
      found = printed(w, [t](BIO* b) { return ASN1_TIME_print(b, t) == 1; });
      break;
    }
    case TlsFact::kClientDaysLeft: {
      int days = 0;
      int secs = 0;
      if (ASN1_TIME_diff(&days, &secs, nullptr, X509_get0_notAfter(cert)) != 1) return 0;
      if (days < 0 || (days == 0 && secs < 0)) days = 0;
      char tmp[16];
      const int n = std::snprintf(tmp, sizeof tmp, "%d", days);
      w.put({tmp, n > 0 ? static_cast<std::size_t>(n) : 0});
      found = true;
      break;
    }
    case TlsFact::kClientFingerprint: {
      unsigned char md[EVP_MAX_MD_SIZE];
      unsigned int len = 0;
      if (X509_digest(cert, EVP_sha1(), md, &len) != 1) return 0;
      w.hex(md, len, false);
      found = true;
      break;
    }
    case TlsFact::kClientEscapedCert: {
      // $ssl_client_raw_cert's text, percent-encoded through `w`.
      BIO* bio = BIO_new(BIO_s_mem());
      if (bio == nullptr || PEM_write_bio_X509(bio, cert) != 1) {
        BIO_free(bio);
        break;
      }
      char* data = nullptr;
      long len = BIO_get_mem_data(bio, &data);
      while (len > 0 && (data[len - 1] == '\n' || data[len - 1] == '\r')) --len;  // as $ssl_client_raw_cert
      for (long i = 0; i < len; ++i) {
        const auto ch = static_cast<unsigned char>(data[i]);
        if (std::isalnum(ch) || ch == '-' || ch == '.' || ch == '_' || ch == '~') {
          const char one = static_cast<char>(ch);
          w.put({&one, 1});
        } else {
          const char three[3] = {'%', "0123456789ABCDEF"[ch >> 4], "0123456789ABCDEF"[ch & 0xf]};
          w.put({three, 3});
        }
      }
      BIO_free(bio);
      found = true;
      break;
    }
    case TlsFact::kClientRawCert:
    case TlsFact::kClientCert:
      found = printed(
          w, [cert](BIO* b) { return PEM_write_bio_X509(b, cert) == 1; },
          fact == TlsFact::kClientCert);
      break;
    default:
      break;
  }
  return found ? w.n : 0;
}

}  // namespace vigil
