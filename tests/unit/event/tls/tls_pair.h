#pragma once
// A handshaken TLS connection over a socketpair for the unit tests of
// src/event/tls: the server end uses our socket BIO (socket_bio.h) and is
// wrapped in a Connection with the TLS I/O functions installed, as after
// tls_start_server; the client end is plain OpenSSL.

#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "event/tls/socket_bio.h"
#include "event/tls/tls.h"
#include "vigil/core/log.h"
#include "vigil/event/connection.h"
#include "vigil/event/loop.h"

namespace vigil::test {

// A self-signed P-256 certificate made in memory.
struct TestIdentity {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  X509* cert = X509_new();
  TestIdentity() {
    X509_set_version(cert, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
    X509_gmtime_adj(X509_getm_notBefore(cert), 0);
    X509_gmtime_adj(X509_getm_notAfter(cert), 3600);
    X509_set_pubkey(cert, key);
    X509_NAME* name = X509_get_subject_name(cert);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>("unit"), -1, -1, 0);
    X509_set_issuer_name(cert, name);
    X509_sign(cert, key, EVP_sha256());
  }
  ~TestIdentity() {
    X509_free(cert);
    EVP_PKEY_free(key);
  }
  TestIdentity(const TestIdentity&) = delete;
  TestIdentity& operator=(const TestIdentity&) = delete;
};

// Server and client contexts as Vigil's (partial writes, released buffers,
// read-ahead, an EOF without close_notify is an EOF).
struct TestContexts {
  TestIdentity id;
  SSL_CTX* server = SSL_CTX_new(TLS_server_method());
  SSL_CTX* client = SSL_CTX_new(TLS_client_method());
  BIO_METHOD* method = tls_socket_bio_method();
  bool ok = false;
  TestContexts() {
    if (server == nullptr || client == nullptr || method == nullptr) return;
    if (SSL_CTX_use_certificate(server, id.cert) != 1) return;
    if (SSL_CTX_use_PrivateKey(server, id.key) != 1) return;
    SSL_CTX_set_mode(server, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                                 SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_read_ahead(server, 1);
    SSL_CTX_set_options(server, SSL_OP_IGNORE_UNEXPECTED_EOF);
    ok = true;
  }
  ~TestContexts() {
    SSL_CTX_free(server);
    SSL_CTX_free(client);
    BIO_meth_free(method);
  }
  TestContexts(const TestContexts&) = delete;
  TestContexts& operator=(const TestContexts&) = delete;
};

// Steps both ends of a nonblocking handshake until both are done.
inline bool handshake_both(SSL* server, SSL* client) {
  bool s_done = false, c_done = false;
  for (int i = 0; i < 1000 && !(s_done && c_done); ++i) {
    if (!c_done) c_done = SSL_do_handshake(client) == 1;
    if (!s_done) s_done = SSL_do_handshake(server) == 1;
  }
  return s_done && c_done;
}

// What `ssl` can read now (empty when nothing is ready).
inline std::string read_available(SSL* ssl) {
  std::string out;
  char buf[16384];
  for (;;) {
    std::size_t n = 0;
    if (SSL_read_ex(ssl, buf, sizeof buf, &n) != 1) break;
    out.append(buf, n);
  }
  return out;
}

// Makes `c` the handshaken server end over `fd`, with the TLS I/O functions
// installed as after tls_start_server, both events ready.
inline void wire_tls_connection(Connection& c, Event& rev, Event& wev, TlsConnection& tc, int fd) {
  tc.handshaked = 1;
  c.fd = fd;
  c.read = &rev;
  c.write = &wev;
  c.ssl = &tc;
  c.recv = tls_recv;
  c.send = tls_send;
  c.recv_chain = tls_recv_chain;
  c.send_chain = tls_send_chain;
  rev.data = wev.data = &c;
  wev.write = 1;
  rev.ready = wev.ready = 1;
}

struct TestTlsPair {
  bool ok = false;
  int server_fd = -1, client_fd = -1;
  SSL* client = nullptr;
  TlsConnection tc;
  Event rev, wev;
  Connection c;

  TestTlsPair(TestContexts& ctx, EventLoop* loop) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) return;
    server_fd = sv[0];
    client_fd = sv[1];
    tc.ssl = SSL_new(ctx.server);
    client = SSL_new(ctx.client);
    if (tc.ssl == nullptr || client == nullptr) return;
    tc.fd = server_fd;
    BIO* bio = tls_socket_bio(ctx.method, tc);
    if (bio == nullptr) return;
    SSL_set_bio(tc.ssl, bio, bio);
    SSL_set_fd(client, client_fd);
    SSL_set_accept_state(tc.ssl);
    SSL_set_connect_state(client);
    if (!handshake_both(tc.ssl, client)) return;
    wire_tls_connection(c, rev, wev, tc, server_fd);
    c.loop = loop;
    ok = true;
  }
  ~TestTlsPair() {
    if (c.ssl != nullptr) tls_close(c);  // frees the server's SSL
    if (tc.ssl != nullptr) SSL_free(tc.ssl);
    SSL_free(client);
    if (server_fd != -1) ::close(server_fd);
    if (client_fd != -1) ::close(client_fd);
  }
  TestTlsPair(const TestTlsPair&) = delete;
  TestTlsPair& operator=(const TestTlsPair&) = delete;

  bool client_write(const std::string& data) {
    std::size_t n = 0;
    return SSL_write_ex(client, data.data(), data.size(), &n) == 1 && n == data.size();
  }
  std::string client_read_available() { return read_available(client); }
};

inline std::unique_ptr<EventLoop> make_test_loop() {
  EventLoopConfig cfg;
  cfg.connections = 8;
  auto loop = EventLoop::create(cfg, Log::global());
  return loop ? std::move(loop.value()) : nullptr;
}

}  // namespace vigil::test
