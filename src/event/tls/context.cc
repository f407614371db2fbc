#include "event/tls/context.h"

#include <openssl/conf.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "event/tls/certificate.h"
#include "event/tls/ocsp_client.h"
#include "event/tls/session_cache.h"
#include "event/tls/socket_bio.h"
#include "event/tls/stapling.h"
#include "event/tls/tls.h"

namespace vigil {
namespace {

// The passwords of ssl_password_file, tried in turn for every key.
struct Passwords {
  std::vector<std::string> list;
  std::size_t current = 0;
};

// Never prompts on a terminal: without a password file an encrypted key
// simply fails to load.
int password_cb(char* buf, int size, int, void* arg) {
  auto* pw = static_cast<Passwords*>(arg);
  if (pw == nullptr || pw->current >= pw->list.size()) return 0;
  const std::string& p = pw->list[pw->current];
  if (p.size() > static_cast<std::size_t>(size)) return 0;
  std::memcpy(buf, p.data(), p.size());
  return static_cast<int>(p.size());
}

// Loads a private key, trying every password; the key itself never reaches
// a log line, only its path.
Result<EVP_PKEY*> load_key(const std::string& path, Passwords& pw, const std::string& where) {
  const std::size_t tries = pw.list.empty() ? 1 : pw.list.size();
  for (std::size_t i = 0; i < tries; ++i) {
    BIO* bio = BIO_new_file(path.c_str(), "r");
    if (bio == nullptr) {
      return Status::error("cannot load certificate key \"" + path + "\"" + tls_error_text() +
                           where);
    }
    pw.current = i;
    EVP_PKEY* key = PEM_read_bio_PrivateKey(bio, nullptr, password_cb, &pw);
    BIO_free(bio);
    if (key != nullptr) {
      ERR_clear_error();
      return key;
    }
  }
  return Status::error("cannot load certificate key \"" + path + "\"" + tls_error_text() + where);
}

Status load_pair(SSL_CTX* ctx, const std::string& cert, const std::string& key, Passwords& pw,
                 const std::string& where) {
  ERR_clear_error();
  if (SSL_CTX_use_certificate_chain_file(ctx, cert.c_str()) != 1) {
    return Status::error("cannot load certificate \"" + cert + "\"" + tls_error_text() + where);
  }
  auto k = load_key(key, pw, where);
  if (!k) return k.status();
  EVP_PKEY* pkey = k.value();
  const int ok = SSL_CTX_use_PrivateKey(ctx, pkey);
  EVP_PKEY_free(pkey);
  if (ok != 1 || SSL_CTX_check_private_key(ctx) != 1) {
    return Status::error("certificate key \"" + key + "\" does not match certificate \"" + cert +
                         "\"" + tls_error_text() + where);
  }
  return Status::ok();
}

Status set_protocols(SSL_CTX* ctx, unsigned protocols, const std::string& where) {
  if (protocols == 0) return Status::error("no TLS protocols enabled" + where);
  // Gaps are allowed (nginx's behaviour): each version off is an option bit.
  std::uint64_t off = SSL_OP_NO_SSLv2 | SSL_OP_NO_SSLv3;
  if (!(protocols & kTlsV1)) off |= SSL_OP_NO_TLSv1;
  if (!(protocols & kTlsV1_1)) off |= SSL_OP_NO_TLSv1_1;
  if (!(protocols & kTlsV1_2)) off |= SSL_OP_NO_TLSv1_2;
  if (!(protocols & kTlsV1_3)) off |= SSL_OP_NO_TLSv1_3;
  SSL_CTX_set_options(ctx, off);
  return Status::ok();
}

Status apply_conf_commands(SSL_CTX* ctx,
                           const std::vector<std::pair<std::string, std::string>>& cmds,
                           bool server, const std::string& where) {
  if (cmds.empty()) return Status::ok();
  SSL_CONF_CTX* cctx = SSL_CONF_CTX_new();
  if (cctx == nullptr) return Status::error("SSL_CONF_CTX_new() failed" + where);
  SSL_CONF_CTX_set_flags(cctx, SSL_CONF_FLAG_FILE | SSL_CONF_FLAG_CERTIFICATE |
                                   (server ? SSL_CONF_FLAG_SERVER : SSL_CONF_FLAG_CLIENT));
  SSL_CONF_CTX_set_ssl_ctx(cctx, ctx);
  Status st = Status::ok();
  for (const auto& [name, value] : cmds) {
    ERR_clear_error();
    if (SSL_CONF_cmd(cctx, name.c_str(), value.c_str()) <= 0) {
      st = Status::error("SSL_CONF_cmd(\"" + name + "\", \"" + value + "\") failed" +
                         tls_error_text() + where);
      break;
    }
  }
  if (st && SSL_CONF_CTX_finish(cctx) != 1) {
    st = Status::error("SSL_CONF_CTX_finish() failed" + tls_error_text() + where);
  }
  SSL_CONF_CTX_free(cctx);
  return st;
}

Result<TlsTicketKey> read_ticket_key(const std::string& path, const std::string& where) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::error("cannot open \"" + path + "\"" + where, errno);
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  TlsTicketKey k;
  if (data.size() == 48) {
    std::memcpy(k.name, data.data(), 16);
    std::memcpy(k.hmac_key, data.data() + 16, 16);
    std::memcpy(k.aes_key, data.data() + 32, 16);
    k.hmac_len = k.aes_len = 16;
  } else if (data.size() == 80) {
    std::memcpy(k.name, data.data(), 16);
    std::memcpy(k.hmac_key, data.data() + 16, 32);
    std::memcpy(k.aes_key, data.data() + 48, 32);
    k.hmac_len = k.aes_len = 32;
  } else {
    return Status::error("\"" + path + "\" must be 48 or 80 bytes" + where);
  }
  return k;
}

// RFC 5077 §4's recommended construction; the first key encrypts, every key
// decrypts, and a ticket under an older key is renewed (return 2).
int ticket_key_cb(SSL* ssl, unsigned char name[16], unsigned char iv[EVP_MAX_IV_LENGTH],
                  EVP_CIPHER_CTX* ectx, EVP_MAC_CTX* hctx, int enc) {
  TlsContext* tc = tls_session_context(ssl);
  if (tc == nullptr || tc->ticket_keys().empty()) return -1;
  const auto& keys = tc->ticket_keys();
  auto init = [&](const TlsTicketKey& k) {
    const EVP_CIPHER* cipher = k.aes_len == 16 ? EVP_aes_128_cbc() : EVP_aes_256_cbc();
    char digest[] = "SHA256";
    OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                           OSSL_PARAM_construct_end()};
    if (EVP_MAC_init(hctx, k.hmac_key, k.hmac_len, params) != 1) return false;
    return enc ? EVP_EncryptInit_ex(ectx, cipher, nullptr, k.aes_key, iv) == 1
               : EVP_DecryptInit_ex(ectx, cipher, nullptr, k.aes_key, iv) == 1;
  };
  if (enc == 1) {
    const TlsTicketKey& k = keys.front();
    if (RAND_bytes(iv, 16) != 1) return -1;
    std::memcpy(name, k.name, 16);
    return init(k) ? 1 : -1;
  }
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (std::memcmp(name, keys[i].name, 16) != 0) continue;
    if (!init(keys[i])) return -1;
    return i == 0 ? 1 : 2;
  }
  return 0;  // unknown key: a full handshake and a fresh ticket
}

// The client chose no protocol we speak: RFC 7301 §3.2 says to refuse.
int alpn_select_cb(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
                   unsigned int inlen, void* arg) {
  auto* tc = static_cast<TlsContext*>(arg);
  const std::string& ours = tc->alpn();
  unsigned char* selected = nullptr;
  if (SSL_select_next_proto(&selected, outlen, reinterpret_cast<const unsigned char*>(ours.data()),
                            static_cast<unsigned>(ours.size()), in,
                            inlen) != OPENSSL_NPN_NEGOTIATED) {
    return SSL_TLSEXT_ERR_ALERT_FATAL;
  }
  *out = selected;
  return SSL_TLSEXT_ERR_OK;
}

// Verification results are judged by the protocol after the handshake
// (nginx answers 400 with a reason rather than failing the handshake).
int verify_keep_going(int, X509_STORE_CTX*) {
  return 1;
}

int g_ctx_index = -1;

// ssl_crl / proxy_ssl_crl: the PEM revocation lists in `path` join the
// context's certificate store, and every certificate of a peer's chain is
// then checked against them (a chain certificate whose issuer has no list is
// "unable to get certificate CRL").
Status load_crl(SSL_CTX* ctx, const std::string& path, const std::string& where) {
  if (path.empty()) return Status::ok();
  X509_STORE* store = SSL_CTX_get_cert_store(ctx);
  X509_LOOKUP* lookup =
      store != nullptr ? X509_STORE_add_lookup(store, X509_LOOKUP_file()) : nullptr;
  if (lookup == nullptr) {
    return Status::error("X509_STORE_add_lookup() failed" + tls_error_text() + where);
  }
  if (X509_load_crl_file(lookup, path.c_str(), X509_FILETYPE_PEM) <= 0) {
    return Status::error("X509_LOOKUP_load_file(\"" + path + "\") failed" + tls_error_text() +
                         where);
  }
  if (X509_STORE_set_flags(store, X509_V_FLAG_CRL_CHECK | X509_V_FLAG_CRL_CHECK_ALL) != 1) {
    return Status::error("X509_STORE_set_flags() failed" + tls_error_text() + where);
  }
  return Status::ok();
}

}  // namespace

std::string tls_error_text() {
  std::string out;
  unsigned long e;
  char buf[256];
  while ((e = ERR_get_error()) != 0) {
    ERR_error_string_n(e, buf, sizeof buf);
    out += out.empty() ? " (SSL: " : " ";
    out += buf;
  }
  if (!out.empty()) out += ")";
  return out;
}

TlsContext* TlsContext::of(const SSL_CTX* ctx) {
  if (ctx == nullptr || g_ctx_index < 0) return nullptr;
  return static_cast<TlsContext*>(SSL_CTX_get_ex_data(ctx, g_ctx_index));
}

void TlsContext::set_ocsp(std::unique_ptr<TlsOcspConf> conf) {
  ocsp_ = std::move(conf);
}

TlsContext::~TlsContext() {
  for (TlsStaple* s : staples_) tls_staple_free(s);
  for (LoadedCert& lc : certs_) {
    X509_free(lc.cert);
    if (lc.chain != nullptr) sk_X509_pop_free(lc.chain, X509_free);
  }
  if (ctx_ != nullptr) SSL_CTX_free(ctx_);
  if (bio_method_ != nullptr) BIO_meth_free(bio_method_);
}

Status TlsContext::make_bio_method() {
#ifdef SSL_OP_ENABLE_KTLS
  if (SSL_CTX_get_options(ctx_) & SSL_OP_ENABLE_KTLS) return Status::ok();
#endif
  bio_method_ = tls_socket_bio_method();
  if (bio_method_ == nullptr) return Status::error("BIO_meth_new() failed" + tls_error_text());
  return Status::ok();
}

Result<std::shared_ptr<TlsContext>> TlsContext::server(const TlsServerConf& conf,
                                                       std::vector<std::string> alpn) {
  if (g_ctx_index < 0)
    g_ctx_index = SSL_CTX_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  std::shared_ptr<TlsContext> tc(new TlsContext());
  tc->server_conf_ = &conf;
  for (const std::string& p : alpn) {
    tc->alpn_.push_back(static_cast<char>(p.size()));
    tc->alpn_ += p;
  }
  ERR_clear_error();
  tc->ctx_ = SSL_CTX_new(TLS_server_method());
  if (tc->ctx_ == nullptr) return Status::error("SSL_CTX_new() failed" + tls_error_text());
  SSL_CTX_set_ex_data(tc->ctx_, g_ctx_index, tc.get());
  if (Status s = tc->configure_server(conf); !s) return s;
  if (Status s = tc->make_bio_method(); !s) return s;
  return tc;
}

Result<std::shared_ptr<TlsContext>> TlsContext::client(const TlsClientConf& conf) {
  if (g_ctx_index < 0)
    g_ctx_index = SSL_CTX_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  std::shared_ptr<TlsContext> tc(new TlsContext());
  tc->client_conf_ = &conf;
  ERR_clear_error();
  tc->ctx_ = SSL_CTX_new(TLS_client_method());
  if (tc->ctx_ == nullptr) return Status::error("SSL_CTX_new() failed" + tls_error_text());
  SSL_CTX_set_ex_data(tc->ctx_, g_ctx_index, tc.get());
  if (Status s = tc->configure_client(conf); !s) return s;
  if (Status s = tc->make_bio_method(); !s) return s;
  return tc;
}

Status TlsContext::configure_server(const TlsServerConf& conf) {
  SSL_CTX* ctx = ctx_;
  const std::string& where = conf.where;
  if (conf.certificates.empty() && !conf.reject_handshake) {
    return Status::error("no \"ssl_certificate\" is defined for the \"listen ... ssl\" directive" +
                         where);
  }
  if (!conf.certificates.empty() && conf.keys.size() != conf.certificates.size()) {
    return Status::error("no \"ssl_certificate_key\" is defined for certificate \"" +
                         conf.certificates.back() + "\"" + conf.certificate_where.back());
  }
  // Partial writes and a moving buffer: the event loop retries SSL_write with
  // whatever is left, from wherever its buffer now is. Released buffers keep
  // an idle connection small (OpenSSL frees its 16k+ read/write buffers).
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                            SSL_MODE_RELEASE_BUFFERS);
  // Read ahead: one read() takes whatever the socket holds instead of a
  // 5-byte record header and then its body (two calls per record; a full
  // handshake costs six reads fewer, a keep-alive request one). Bytes read
  // past the current record stay in OpenSSL's buffer, which SSL_has_pending
  // (not SSL_pending) reports, and tls_recv posts the read event for them.
  SSL_CTX_set_read_ahead(ctx, 1);
  // Renegotiation is refused (a client-initiated one is a known DoS vector);
  // TLS 1.3 has none.
  // A peer that closes without close_notify reads as an EOF (ZERO_RETURN):
  // HTTP frames its messages itself, and OpenSSL 3 would otherwise call it
  // an error and drop the session from the cache (nginx sets this too).
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION | SSL_OP_SINGLE_DH_USE |
                               SSL_OP_SINGLE_ECDH_USE | SSL_OP_IGNORE_UNEXPECTED_EOF);
  if (conf.prefer_server_ciphers) SSL_CTX_set_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE);
  if (Status s = set_protocols(ctx, conf.protocols, where); !s) return s;

  if (conf.certificate_variables()) {
    // Loaded for each handshake, once SNI chose the server (certificate.h).
    SSL_CTX_set_cert_cb(ctx, tls_certificate_cb, this);
  }
  Passwords pw{conf.passwords};
  for (std::size_t i = 0; i < conf.certificates.size() && !conf.certificate_variables(); ++i) {
    const std::string& cw =
        i < conf.certificate_where.size() ? conf.certificate_where[i] : conf.where;
    if (Status s = load_pair(ctx, conf.certificates[i], conf.keys[i], pw, cw); !s) {
      return s;
    }
    // The pair just loaded is the context's current one.
    LoadedCert lc;
    lc.name = conf.certificates[i];
    lc.cert = SSL_CTX_get0_certificate(ctx);
    STACK_OF(X509)* chain = nullptr;
    if (lc.cert == nullptr || X509_up_ref(lc.cert) != 1 ||
        SSL_CTX_get0_chain_certs(ctx, &chain) != 1) {
      return Status::error("cannot keep certificate \"" + lc.name + "\"" + tls_error_text() + cw);
    }
    if (chain != nullptr) {
      lc.chain = X509_chain_up_ref(chain);
      if (lc.chain == nullptr) {
        X509_free(lc.cert);
        return Status::error("X509_chain_up_ref() failed" + tls_error_text() + cw);
      }
    }
    certs_.push_back(std::move(lc));
  }
  ERR_clear_error();
  if (SSL_CTX_set_cipher_list(ctx, conf.ciphers.c_str()) != 1) {
    return Status::error("SSL_CTX_set_cipher_list(\"" + conf.ciphers + "\") failed" +
                         tls_error_text() + where);
  }
  if (conf.ecdh_curve != "auto" && SSL_CTX_set1_groups_list(ctx, conf.ecdh_curve.c_str()) != 1) {
    return Status::error("SSL_CTX_set1_groups_list(\"" + conf.ecdh_curve + "\") failed" +
                         tls_error_text() + where);
  }
  if (!conf.dhparam.empty()) {
    BIO* bio = BIO_new_file(conf.dhparam.c_str(), "r");
    EVP_PKEY* dh = bio != nullptr ? PEM_read_bio_Parameters(bio, nullptr) : nullptr;
    if (bio != nullptr) BIO_free(bio);
    if (dh == nullptr || SSL_CTX_set0_tmp_dh_pkey(ctx, dh) != 1) {
      if (dh != nullptr) EVP_PKEY_free(dh);
      return Status::error("cannot load DH parameters \"" + conf.dhparam + "\"" + tls_error_text() +
                           where);
    }
  }

  // Client certificates.
  if (conf.verify != TlsVerify::kOff) {
    if (conf.client_certificate.empty() && conf.verify != TlsVerify::kOptionalNoCa) {
      return Status::error("no ssl_client_certificate for ssl_verify_client" + where);
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, verify_keep_going);
    SSL_CTX_set_verify_depth(ctx, conf.verify_depth);
  }
  if (!conf.client_certificate.empty()) {
    if (SSL_CTX_load_verify_locations(ctx, conf.client_certificate.c_str(), nullptr) != 1) {
      return Status::error("cannot load client certificates \"" + conf.client_certificate + "\"" +
                           tls_error_text() + where);
    }
    STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(conf.client_certificate.c_str());
    if (names == nullptr) {
      return Status::error("SSL_load_client_CA_file(\"" + conf.client_certificate + "\") failed" +
                           tls_error_text() + where);
    }
    SSL_CTX_set_client_CA_list(ctx, names);
  }
  if (!conf.trusted_certificate.empty() &&
      SSL_CTX_load_verify_locations(ctx, conf.trusted_certificate.c_str(), nullptr) != 1) {
    return Status::error("cannot load trusted certificates \"" + conf.trusted_certificate + "\"" +
                         tls_error_text() + where);
  }

  if (Status s = load_crl(ctx, conf.crl, where); !s) return s;

  // Sessions. The id context ties a session to this server's certificates and
  // verification settings, so it never resumes in a server that would have
  // judged the client differently.
  {
    std::string id;
    for (const auto& c : conf.certificates) id += c + '\n';
    id += conf.client_certificate + '\n' + std::to_string(static_cast<int>(conf.verify));
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    if (EVP_Digest(id.data(), id.size(), md, &mdlen, EVP_sha1(), nullptr) != 1 ||
        SSL_CTX_set_session_id_context(ctx, md, mdlen) != 1) {
      return Status::error("SSL_CTX_set_session_id_context() failed" + tls_error_text() + where);
    }
  }
  SSL_CTX_set_timeout(ctx, static_cast<long>(conf.session_timeout / 1000));
  switch (conf.cache) {
    case TlsServerConf::Cache::kOff:
      SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
      break;
    case TlsServerConf::Cache::kNone:
      SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_SERVER | SSL_SESS_CACHE_NO_INTERNAL);
      break;
    case TlsServerConf::Cache::kOn: {
      long mode = SSL_SESS_CACHE_SERVER;
      if (conf.builtin_cache) {
        SSL_CTX_sess_set_cache_size(ctx, static_cast<long>(conf.builtin_size));
      } else {
        mode |= SSL_SESS_CACHE_NO_INTERNAL;
      }
      if (conf.shared_zone != nullptr) {
        tls_session_cache_install(ctx);
        // Expired sessions leave the shared zone by its own expiry and LRU.
        mode |= SSL_SESS_CACHE_NO_AUTO_CLEAR;
      }
      SSL_CTX_set_session_cache_mode(ctx, mode);
      break;
    }
  }
  if (!conf.session_tickets) {
    SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
  } else if (!conf.ticket_key_files.empty()) {
    for (const std::string& f : conf.ticket_key_files) {
      auto k = read_ticket_key(f, where);
      if (!k) return k.status();
      ticket_keys_.push_back(k.value());
    }
    if (SSL_CTX_set_tlsext_ticket_key_evp_cb(ctx, ticket_key_cb) != 1) {
      return Status::error("SSL_CTX_set_tlsext_ticket_key_evp_cb() failed" + tls_error_text() +
                           where);
    }
  }

  if (!alpn_.empty()) SSL_CTX_set_alpn_select_cb(ctx, alpn_select_cb, this);
  SSL_CTX_set_tlsext_servername_callback(ctx, tls_servername_cb);
  if (Status s = apply_conf_commands(ctx, conf.conf_commands, true, where); !s) return s;
  ERR_clear_error();
  return Status::ok();
}

Status TlsContext::configure_client(const TlsClientConf& conf) {
  SSL_CTX* ctx = ctx_;
  const std::string& where = conf.where;
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                            SSL_MODE_RELEASE_BUFFERS);
  SSL_CTX_set_options(
      ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION | SSL_OP_IGNORE_UNEXPECTED_EOF);
  SSL_CTX_set_read_ahead(ctx, 1);  // as for servers: one read() per socket buffer
  if (Status s = set_protocols(ctx, conf.protocols, where); !s) return s;
  ERR_clear_error();
  if (SSL_CTX_set_cipher_list(ctx, conf.ciphers.c_str()) != 1) {
    return Status::error("SSL_CTX_set_cipher_list(\"" + conf.ciphers + "\") failed" +
                         tls_error_text() + where);
  }
  if (!conf.certificate.empty()) {
    if (conf.certificate_key.empty()) {
      return Status::error("no \"proxy_ssl_certificate_key\" is defined for certificate \"" +
                           conf.certificate + "\"" + where);
    }
    if (conf.certificate_variables()) {
      // Evaluated when the upstream asks for a certificate (certificate.h).
      SSL_CTX_set_cert_cb(ctx, tls_certificate_cb, this);
    } else {
      Passwords pw{conf.passwords};
      if (Status s = load_pair(ctx, conf.certificate, conf.certificate_key, pw, where); !s) {
        return s;
      }
    }
  }
  if (conf.verify) {
    if (conf.trusted_certificate.empty()) {
      return Status::error("no proxy_ssl_trusted_certificate for proxy_ssl_verify" + where);
    }
    if (SSL_CTX_load_verify_locations(ctx, conf.trusted_certificate.c_str(), nullptr) != 1) {
      return Status::error("cannot load trusted certificates \"" + conf.trusted_certificate + "\"" +
                           tls_error_text() + where);
    }
    if (Status s = load_crl(ctx, conf.crl, where); !s) return s;
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
    SSL_CTX_set_verify_depth(ctx, conf.verify_depth);
  }
  // Sessions to the upstream are kept by the caller (proxy_ssl_session_reuse),
  // handed over by the new-session callback when they arrive (TLS 1.3
  // tickets come after the handshake).
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
  SSL_CTX_sess_set_new_cb(ctx, tls_client_new_session_cb);
  if (Status s = apply_conf_commands(ctx, conf.conf_commands, false, where); !s) return s;
  ERR_clear_error();
  return Status::ok();
}

}  // namespace vigil
