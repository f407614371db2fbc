#pragma once
// TLS for the integration tests: a throwaway CA and certificates made with
// the openssl command into the test's temporary prefix, and a small TLS
// client on OpenSSL's API that reads HTTP/1.1 responses with deadlines and
// reports what was negotiated (version, ALPN, certificate, resumption).

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <vector>

#include "http_harness.h"

namespace vigil::test {

// Runs the openssl command in `dir`; true on success.
inline bool openssl_cli(const std::string& dir, std::vector<std::string> args) {
  args.insert(args.begin(), "openssl");
  auto [rc, out] = run(args, dir);
  if (rc != 0) ADD_FAILURE() << "openssl failed: " << out;
  return rc == 0;
}

// dir/name.crt + dir/name.key: a self-signed CA.
inline bool make_ca(const std::string& dir, const std::string& name) {
  return openssl_cli(
      dir, {"req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", name + ".key", "-out", name + ".crt", "-days", "2", "-subj", "/CN=" + name});
}

// dir/name.crt + dir/name.key signed by dir/ca.{crt,key}, for `cn` (also its
// subjectAltName). `rsa`: RSA 2048 instead of ECDSA P-256.
inline bool make_cert(const std::string& dir, const std::string& name, const std::string& cn,
                      const std::string& ca, bool rsa = false) {
  std::ofstream(dir + "/" + name + ".ext") << "subjectAltName=DNS:" << cn << "\n";
  std::vector<std::string> req = {"req", "-newkey"};
  if (rsa) {
    req.insert(req.end(), {"rsa:2048"});
  } else {
    req.insert(req.end(), {"ec", "-pkeyopt", "ec_paramgen_curve:P-256"});
  }
  req.insert(req.end(),
             {"-nodes", "-keyout", name + ".key", "-out", name + ".csr", "-subj", "/CN=" + cn});
  return openssl_cli(dir, req) &&
         openssl_cli(dir, {"x509", "-req", "-in", name + ".csr", "-CA", ca + ".crt", "-CAkey",
                           ca + ".key", "-CAcreateserial", "-out", name + ".crt", "-days", "2",
                           "-extfile", name + ".ext"});
}

struct TlsOptions {
  std::string sni;                // SNI host name ("" = none)
  std::vector<std::string> alpn;  // offered protocols
  int min_version = 0;            // TLS1_2_VERSION ...
  int max_version = 0;
  SSL_SESSION* session = nullptr;  // to resume (not consumed)
  std::string ca_file;             // verify the server against it
  std::string cert, key;           // client certificate
  std::string sigalgs;             // e.g. "RSA-PSS+SHA256:rsa_pkcs1_sha256" to force RSA
  bool tickets = true;
};

class TlsClient {
 public:
  TlsClient(int port, const TlsOptions& o = {}) {
    ctx_ = SSL_CTX_new(TLS_client_method());
    if (o.min_version) SSL_CTX_set_min_proto_version(ctx_, o.min_version);
    if (o.max_version) SSL_CTX_set_max_proto_version(ctx_, o.max_version);
    if (o.min_version && o.min_version < TLS1_2_VERSION) {
      SSL_CTX_set_security_level(ctx_, 0);  // let the client at least try the old versions
    }
    if (!o.tickets) SSL_CTX_set_options(ctx_, SSL_OP_NO_TICKET);
    if (!o.ca_file.empty()) {
      SSL_CTX_load_verify_locations(ctx_, o.ca_file.c_str(), nullptr);
      SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER, nullptr);
    }
    if (!o.cert.empty()) {
      SSL_CTX_use_certificate_chain_file(ctx_, o.cert.c_str());
      SSL_CTX_use_PrivateKey_file(ctx_, o.key.c_str(), SSL_FILETYPE_PEM);
    }
    if (!o.sigalgs.empty()) SSL_CTX_set1_sigalgs_list(ctx_, o.sigalgs.c_str());
    if (!o.alpn.empty()) {
      std::string wire;
      for (const auto& p : o.alpn) {
        wire.push_back(static_cast<char>(p.size()));
        wire += p;
      }
      SSL_CTX_set_alpn_protos(ctx_, reinterpret_cast<const unsigned char*>(wire.data()),
                              static_cast<unsigned>(wire.size()));
    }
    fd_ = connect_loopback(port, /*nonblocking=*/true);
    ssl_ = SSL_new(ctx_);
    SSL_set_fd(ssl_, fd_);
    if (!o.sni.empty()) SSL_set_tlsext_host_name(ssl_, o.sni.c_str());
    if (o.session != nullptr) SSL_set_session(ssl_, o.session);
    SSL_set_connect_state(ssl_);
  }
  ~TlsClient() {
    if (ssl_ != nullptr) {
      // Without a shutdown OpenSSL marks the session not resumable.
      if (SSL_is_init_finished(ssl_)) SSL_set_shutdown(ssl_, SSL_SENT_SHUTDOWN);
      SSL_free(ssl_);
    }
    if (ctx_ != nullptr) SSL_CTX_free(ctx_);
    if (fd_ != -1) ::close(fd_);
  }
  TlsClient(const TlsClient&) = delete;
  TlsClient& operator=(const TlsClient&) = delete;

  // Completes the handshake; false (with error() set) when the server refused.
  bool handshake(int timeout_ms = 5000) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      ERR_clear_error();
      int rc = SSL_do_handshake(ssl_);
      if (rc == 1) return true;
      if (!wait(SSL_get_error(ssl_, rc), deadline)) {
        collect_error();
        return false;
      }
    }
  }

  bool send(std::string_view data, int timeout_ms = 5000) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (!data.empty()) {
      std::size_t n = 0;
      int rc = SSL_write_ex(ssl_, data.data(), data.size(), &n);
      if (rc == 1) {
        data.remove_prefix(n);
        continue;
      }
      if (!wait(SSL_get_error(ssl_, rc), deadline)) return false;
    }
    return true;
  }

  // Reads more plaintext into the buffer; false on EOF, error or timeout.
  bool fill(std::chrono::steady_clock::time_point deadline, std::size_t max = 65536) {
    char tmp[65536];
    for (;;) {
      std::size_t n = 0;
      int rc = SSL_read_ex(ssl_, tmp, std::min(max, sizeof tmp), &n);
      if (rc == 1) {
        buf_.append(tmp, n);
        return true;
      }
      int err = SSL_get_error(ssl_, rc);
      if (err == SSL_ERROR_ZERO_RETURN) {
        eof_ = true;
        return false;
      }
      if (!wait(err, deadline)) return false;
    }
  }

  Response read_response(bool head_only = false, int timeout_ms = 5000) {
    Response r;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    std::size_t end;
    while ((end = buf_.find("\r\n\r\n")) == std::string::npos) {
      if (!fill(deadline)) return r;
    }
    r.head = buf_.substr(0, end + 4);
    buf_.erase(0, end + 4);
    parse_response_head(r);
    std::size_t len = 0;
    if (!head_only && r.has("content-length")) len = std::stoull(r.header("content-length"));
    while (buf_.size() < len) {
      if (!fill(deadline)) return r;
    }
    r.body = buf_.substr(0, len);
    buf_.erase(0, len);
    r.complete = true;
    return r;
  }

  // The server ends the TLS stream (close_notify or EOF) within the time.
  bool closed_within(int timeout_ms) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (fill(deadline)) {
    }
    return eof_ || std::chrono::steady_clock::now() < deadline;
  }

  SSL* ssl() { return ssl_; }
  int fd() const { return fd_; }
  const std::string& error() const { return error_; }
  std::string& buffer() { return buf_; }
  std::string version() const { return SSL_get_version(ssl_); }
  std::string alpn() const {
    const unsigned char* p = nullptr;
    unsigned len = 0;
    SSL_get0_alpn_selected(ssl_, &p, &len);
    return std::string(reinterpret_cast<const char*>(p), len);
  }
  bool reused() const { return SSL_session_reused(ssl_) == 1; }
  // The server certificate's common name.
  std::string peer_cn() const {
    X509* cert = SSL_get0_peer_certificate(ssl_);
    if (cert == nullptr) return "";
    char cn[256] = {};
    X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn, sizeof cn);
    return cn;
  }
  // "EC" or "RSA": the type of the server certificate's key.
  std::string peer_key_type() const {
    X509* cert = SSL_get0_peer_certificate(ssl_);
    if (cert == nullptr) return "";
    EVP_PKEY* k = X509_get0_pubkey(cert);
    return EVP_PKEY_is_a(k, "EC") ? "EC" : EVP_PKEY_is_a(k, "RSA") ? "RSA" : "?";
  }
  // A session to resume later (the caller frees it). Under TLS 1.3 tickets
  // arrive after the handshake: read a response first.
  SSL_SESSION* session() const { return SSL_get1_session(ssl_); }

 private:
  bool wait(int err, std::chrono::steady_clock::time_point deadline) {
    short events = 0;
    if (err == SSL_ERROR_WANT_READ) {
      events = POLLIN;
    } else if (err == SSL_ERROR_WANT_WRITE) {
      events = POLLOUT;
    } else {
      collect_error();
      return false;
    }
    auto left = ms_left(deadline);
    if (left <= 0) return false;
    pollfd p{fd_, events, 0};
    return ::poll(&p, 1, static_cast<int>(left)) > 0;
  }
  void collect_error() {
    char b[256];
    unsigned long e;
    while ((e = ERR_get_error()) != 0) {
      ERR_error_string_n(e, b, sizeof b);
      error_ += b;
      error_ += ' ';
    }
  }

  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
  int fd_ = -1;
  std::string buf_;
  std::string error_;
  bool eof_ = false;
};

// A running vigil with a throwaway CA (ca.crt) and a server certificate for
// "localhost" (server.crt, ECDSA) in its prefix.
class TlsServer : public VigilServer {
 public:
  TlsServer() { ok_ = make_ca(dir(), "ca") && make_cert(dir(), "server", "localhost", "ca"); }
  bool pki_ok() const { return ok_; }
  std::string ca() const { return dir() + "/ca.crt"; }

 private:
  bool ok_ = false;
};

// A server block listening with TLS on `port`, certificate server.crt.
inline std::string tls_server_block(int port, const std::string& extra = "",
                                    const std::string& names = "localhost") {
  return "server {\n  listen 127.0.0.1:" + std::to_string(port) + " ssl;\n  server_name " + names +
         ";\n  root html;\n  ssl_certificate ../server.crt;\n  ssl_certificate_key "
         "../server.key;\n" +
         extra + "\n}\n";
}

}  // namespace vigil::test
