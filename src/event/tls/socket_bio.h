#pragma once
// The BIO through which OpenSSL reads and writes a connection's socket: our
// own, in place of OpenSSL's BIO_s_socket with a callback. It does what the
// socket BIO does (recv/send, retry flags, EOF) and keeps the connection's
// `drained` bit on each read, which the callback did at the price of two
// callback calls around every BIO_read, BIO_write and BIO_ctrl (OpenSSL's
// record layer makes several BIO_ctrl calls per record). Sends use
// MSG_NOSIGNAL and both calls go through the fault points recv and send.
//
// kTLS needs OpenSSL's socket BIO (it switches that BIO to the kernel's TLS),
// so a context with SSL_OP_ENABLE_KTLS keeps BIO_s_socket and the callback
// (tls_watch_reads).

#include <openssl/bio.h>

namespace vigil {

struct TlsConnection;

// A new method (freed with BIO_meth_free), or null when OpenSSL cannot make one.
BIO_METHOD* tls_socket_bio_method();
// A BIO of method `m` on the connection's socket `t.fd`; it does not own the
// descriptor. Null when OpenSSL has no memory.
BIO* tls_socket_bio(BIO_METHOD* m, TlsConnection& t);

}  // namespace vigil
