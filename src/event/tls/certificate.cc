#include "event/tls/certificate.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cstring>

#include "core/conf/scope.h"
#include "event/tls/context.h"
#include "event/tls/tls.h"
#include "vigil/core/log.h"
#include "vigil/event/connection.h"

namespace vigil {
namespace {

constexpr std::string_view kDataPrefix = "data:";

struct KeyPasswords {
  const std::vector<std::string>* list = nullptr;
  std::size_t current = 0;
};

// Never prompts: without a password an encrypted key does not load.
int key_password_cb(char* buf, int size, int, void* arg) {
  auto* pw = static_cast<KeyPasswords*>(arg);
  if (pw == nullptr || pw->list == nullptr || pw->current >= pw->list->size()) return 0;
  const std::string& p = (*pw->list)[pw->current];
  if (p.size() > static_cast<std::size_t>(size)) return 0;
  std::memcpy(buf, p.data(), p.size());
  return static_cast<int>(p.size());
}

// A BIO over the value of a "data:" name, or over the named file; `shown`
// is what messages call it: the file's path, never the PEM of a value.
BIO* open_name(std::string_view name, std::string_view conf_prefix, const char*& what,
               std::string& shown) {
  if (name.starts_with(kDataPrefix)) {
    what = "BIO_new_mem_buf()";
    shown = "data:...";
    name.remove_prefix(kDataPrefix.size());
    return BIO_new_mem_buf(name.data(), static_cast<int>(name.size()));
  }
  what = "BIO_new_file()";
  shown = join_conf_path(conf_prefix, name);
  return BIO_new_file(shown.c_str(), "r");
}

std::string shown(std::string_view name) {
  if (name.starts_with(kDataPrefix)) return "data:...";
  return std::string(name);
}

Status use_chain(SSL* ssl, std::string_view name, std::string_view conf_prefix) {
  const char* what = "";
  std::string cert;
  BIO* bio = open_name(name, conf_prefix, what, cert);
  if (bio == nullptr) {
    return Status::error("cannot load certificate \"" + cert + "\": " + what + " failed" +
                         tls_error_text());
  }
  X509* leaf = PEM_read_bio_X509_AUX(bio, nullptr, nullptr, nullptr);
  if (leaf == nullptr) {
    BIO_free(bio);
    return Status::error("cannot load certificate \"" + shown(cert) +
                         "\": PEM_read_bio_X509_AUX() failed" + tls_error_text());
  }
  const int used = SSL_use_certificate(ssl, leaf);
  X509_free(leaf);
  if (used != 1 || SSL_clear_chain_certs(ssl) != 1) {
    BIO_free(bio);
    return Status::error("SSL_use_certificate(\"" + shown(cert) + "\") failed" + tls_error_text());
  }
  // The rest of the file is the chain, sent after the leaf.
  for (;;) {
    X509* ca = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
    if (ca == nullptr) {
      const unsigned long e = ERR_peek_last_error();
      if (ERR_GET_LIB(e) == ERR_LIB_PEM && ERR_GET_REASON(e) == PEM_R_NO_START_LINE) {
        ERR_clear_error();  // the end of the file
        break;
      }
      BIO_free(bio);
      return Status::error("cannot load certificate \"" + shown(cert) +
                           "\": PEM_read_bio_X509() failed" + tls_error_text());
    }
    if (SSL_add0_chain_cert(ssl, ca) != 1) {
      X509_free(ca);
      BIO_free(bio);
      return Status::error("SSL_add0_chain_cert(\"" + shown(cert) + "\") failed" +
                           tls_error_text());
    }
  }
  BIO_free(bio);
  return Status::ok();
}

Status use_key(SSL* ssl, std::string_view name, const std::vector<std::string>& passwords,
               std::string_view conf_prefix) {
  std::string key = shown(name);
  KeyPasswords pw{&passwords, 0};
  const std::size_t tries = passwords.empty() ? 1 : passwords.size();
  EVP_PKEY* pkey = nullptr;
  for (std::size_t i = 0; i < tries && pkey == nullptr; ++i) {
    const char* what = "";
    BIO* bio = open_name(name, conf_prefix, what, key);
    if (bio == nullptr) {
      return Status::error("cannot load certificate key \"" + key + "\": " + what + " failed" +
                           tls_error_text());
    }
    pw.current = i;
    pkey = PEM_read_bio_PrivateKey(bio, nullptr, key_password_cb, &pw);
    BIO_free(bio);
  }
  if (pkey == nullptr) {
    return Status::error("cannot load certificate key \"" + shown(key) +
                         "\": PEM_read_bio_PrivateKey() failed" + tls_error_text());
  }
  ERR_clear_error();  // the failures of passwords tried before the right one
  const int used = SSL_use_PrivateKey(ssl, pkey);
  EVP_PKEY_free(pkey);
  if (used != 1) {
    return Status::error("SSL_use_PrivateKey(\"" + shown(key) + "\") failed" + tls_error_text());
  }
  return Status::ok();
}

}  // namespace

Status tls_use_certificate(SSL* ssl, std::string_view cert, std::string_view key,
                           const std::vector<std::string>& passwords,
                           std::string_view conf_prefix) {
  ERR_clear_error();
  if (Status s = use_chain(ssl, cert, conf_prefix); !s) return s;
  if (Status s = use_key(ssl, key, passwords, conf_prefix); !s) return s;
  if (SSL_check_private_key(ssl) != 1) {
    return Status::error("certificate key \"" + shown(key) + "\" does not match certificate \"" +
                         shown(cert) + "\"" + tls_error_text());
  }
  return Status::ok();
}

bool tls_name_has_variables(std::string_view name) {
  return name.find('$') != std::string_view::npos;
}

int tls_certificate_cb(SSL* ssl, void* arg) {
  auto* tc = static_cast<TlsContext*>(arg);
  auto* c = static_cast<Connection*>(SSL_get_app_data(ssl));
  if (tc == nullptr || c == nullptr || c->ssl == nullptr) return 1;
  if (c->ssl->handshaked) return 1;  // renegotiation is refused anyway
  const TlsCertificateNames* names = tc->certificate_names();
  if (names == nullptr) return 1;
  const TlsServerConf* server = tc->server_conf();
  const TlsClientConf* client = tc->client_conf();
  const std::size_t pairs = server != nullptr ? server->certificates.size() : 1;
  const std::vector<std::string>& passwords =
      server != nullptr ? server->passwords : client->passwords;
  const std::string& prefix = server != nullptr ? server->conf_prefix : client->conf_prefix;
  std::string cert;
  std::string key;
  for (std::size_t i = 0; i < pairs; ++i) {
    cert.clear();
    key.clear();
    if (!names->evaluate(*c, i, cert, key)) return 0;
    Status st = Status::ok();
    if (cert.empty() && client != nullptr) {
      return 1;  // proxy_ssl_certificate evaluated empty: no client certificate
    }
    if (cert.empty()) {
      st = Status::error("the certificate name is empty");
    } else if (key.empty()) {
      st = Status::error("the certificate key name is empty for certificate \"" + shown(cert) +
                         "\"");
    } else {
      st = tls_use_certificate(ssl, cert, key, passwords, prefix);
    }
    if (!st) {
      VIGIL_LOG(*c->log, kError, 0, "*%llu %s while SSL handshaking%s%.*s",
                static_cast<unsigned long long>(c->number), st.message().c_str(),
                client != nullptr ? " to upstream" : ", client: ",
                client != nullptr ? 0 : static_cast<int>(c->addr_text.size()), c->addr_text.data());
      return 0;
    }
  }
  return 1;
}

}  // namespace vigil
