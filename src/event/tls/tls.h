#pragma once
// TLS as a property of a connection (nginx's ngx_ssl_connection_t and
// ngx_ssl_handshake/recv/write/send_chain/shutdown).
//
// Life of a TLS connection:
//   tls_start_server / tls_start_client: SSL object, handshake handlers on
//     both events, handshake timer on the read event.
//   The handshake runs from read and write events: SSL_ERROR_WANT_READ waits
//     for readability, SSL_ERROR_WANT_WRITE for writability, nothing blocks.
//   On success the connection's recv/send/recv_chain/send_chain become the
//     TLS ones and `done(c, kOk)` runs; the protocol goes on as for plain TCP.
//   A read that leaves decrypted bytes inside OpenSSL posts the read event on
//     posted_next: no readiness event would ever announce them.
//   ConnectionPool::close_connection calls tls_close: one nonblocking
//     SSL_shutdown (close_notify if the socket takes it) and SSL_free.
//
// Ownership: TlsConnection lives in the connection's arena; the SSL object is
// freed by tls_close. Contexts outlive their connections (the configuration
// that owns them lives until every worker using it has exited).

#include <openssl/ssl.h>

#include <cstddef>
#include <string_view>

#include "vigil/core/clock.h"
#include "vigil/core/result.h"
#include "vigil/event/connection.h"

namespace vigil {

class TlsContext;
struct TlsOcspCheck;

enum class TlsHandshake : std::uint8_t {
  kOk,      // handshake done, TLS I/O functions installed
  kPlain,   // the first byte is not a TLS record: plain text on a TLS port
  kFailed,  // alert, garbage, timeout, reset: already logged, close it
};

using TlsHandshakeDone = void (*)(Connection& c, TlsHandshake result);
// SNI: the context of the server named by the client, or null to keep the
// current one. Runs inside the handshake.
using TlsSelectServer = TlsContext* (*)(Connection& c, std::string_view name);
// Client side: a session worth keeping arrived (under TLS 1.3 tickets come
// after the handshake, with the first reads). The callee takes the reference.
using TlsSessionSaved = void (*)(Connection& c, SSL_SESSION* session);

struct TlsConnection {
  SSL* ssl = nullptr;
  TlsHandshakeDone done = nullptr;
  TlsSelectServer select = nullptr;
  TlsSessionSaved saved = nullptr;
  // Server side: the context the handshake began with. Its session cache and
  // ticket keys hold this connection's sessions whatever server SNI chooses
  // (tls_session_context).
  TlsContext* sessions = nullptr;
  // A file range being encrypted: bytes [stage_off, stage_off + stage_len)
  // of stage_fd, of which stage_pos are sent. `stage` points into the loop's
  // file buffer (kTlsStageSize, one per loop, shared by its connections),
  // set only while a file is being sent.
  char* stage = nullptr;
  std::size_t stage_len = 0;
  std::size_t stage_pos = 0;
  off_t stage_off = 0;
  int stage_fd = -1;
  int fd = -1;  // the socket, for our BIO (socket_bio.h)
  // Length of an SSL_write that returned WANT_WRITE: the retry must offer at
  // least as much (OpenSSL's "bad write retry" otherwise).
  std::size_t write_pending = 0;
  // Client side: why the handshake failed (nginx's wording, e.g. "upstream
  // SSL certificate verify error: (20:...)"), in the connection's arena; set
  // before `done(c, kFailed)`, which logs it with its own context.
  std::string_view failure;
  // The LRU links of the loop's connections that keep their record buffers
  // between requests (buffers.cc), `warm` while linked.
  // ssl_ocsp's checks of the client's certificate (ocsp_client.h), freed by tls_close.
  TlsOcspCheck* ocsp = nullptr;
  TlsConnection* warm_prev = nullptr;
  TlsConnection* warm_next = nullptr;
  unsigned handshaked : 1 = 0;
  unsigned detect_plain : 1 = 0;
  unsigned client : 1 = 0;
  unsigned ktls_send : 1 = 0;
  unsigned read_error : 1 = 0;  // an error after data was returned: report it next
  // The last read() OpenSSL made on the socket, in the current tls_recv or
  // handshake step, returned less than it asked for (or nothing): the socket
  // was empty then, and an edge-triggered backend reports whatever arrives
  // after it (tls_watch_reads keeps it; each call clears it first).
  unsigned drained : 1 = 0;
  unsigned read_eof : 1 = 0;  // our BIO's read() returned 0
  unsigned warm : 1 = 0;      // on the loop's list of connections keeping buffers
  unsigned idled : 1 = 0;     // tls_idle ran once: the next idle may keep buffers
  unsigned ocsp_started : 1 = 0;  // ssl_ocsp's checks ran (or run) for this handshake
};

// A file goes out through the loop's buffer in pieces of this size: one
// pread() per four 16 KiB records (nginx reads 32 KiB output buffers and
// copies them once more into its 16 KiB TLS buffer).
inline constexpr std::size_t kTlsStageSize = 65536;

// Starts a server handshake on an accepted connection. `detect_plain`: peek
// at the first byte and report kPlain when it is not a TLS handshake record.
Status tls_start_server(Connection& c, TlsContext& ctx, bool detect_plain, Msec timeout,
                        TlsHandshakeDone done, TlsSelectServer select = nullptr);
// Starts a client handshake on a connected socket; `sni` to send (empty:
// none), `verify_host` the name the certificate must carry when the context
// verifies, `session` to resume (may be null; not consumed).
Status tls_start_client(Connection& c, TlsContext& ctx, std::string_view sni,
                        std::string_view verify_host, SSL_SESSION* session, Msec timeout,
                        TlsHandshakeDone done, TlsSessionSaved saved = nullptr);
// SSL_CTX_sess_set_new_cb of client contexts: hands the session to `saved`.
int tls_client_new_session_cb(SSL* ssl, SSL_SESSION* session);

// Sends close_notify (once, without waiting): before a half-close of the
// socket, so the peer sees a clean end of the TLS stream.
void tls_send_close_notify(Connection& c);
// Sends close_notify without waiting and frees the TLS state; called by the pool.
void tls_close(Connection& c);

// Watches the reads OpenSSL makes on the connection's socket (a BIO
// callback) to keep `drained`: a short read tells that the socket is empty,
// as it does for plain sockets, and spares the read that would only return
// EAGAIN. tls_start_server and tls_start_client install it.
void tls_watch_reads(TlsConnection& t);

// The connection waits for its next message (an HTTP keep-alive wait).
// OpenSSL frees a connection's 17 KiB read and write buffers whenever they
// are empty (SSL_MODE_RELEASE_BUFFERS) and allocates them again for the next
// record: two malloc/free pairs per request. From its second wait on, a
// connection keeps them instead, as one of the loop's kTlsWarmMax most
// recently idle connections; the least recent one beyond that gets the
// release mode back and its buffers freed. A connection served once (and
// then idle) keeps nothing, so an idle connection costs what it did.
void tls_idle(Connection& c);
inline constexpr std::size_t kTlsWarmMax = 64;

// Forgets the connection's staged file bytes (the loop keeps its buffer).
void tls_release_stage(Connection& c);
// Frees the loop's TLS file buffer and its list of connections keeping
// record buffers: the exit hook of a worker's loop.
void tls_exit_loop(EventLoop& loop);

// The I/O functions installed after the handshake (same contracts as io.cc).
long tls_recv(Connection& c, char* buf, std::size_t size);
// OpenSSL holds bytes of `c` not yet returned by tls_recv (decrypted or
// read ahead): a peek at the socket cannot see them.
bool tls_has_pending(const Connection& c);
long tls_send(Connection& c, const char* buf, std::size_t size);
long tls_recv_chain(Connection& c, Chain* chain, off_t limit);
Chain* tls_send_chain(Connection& c, Chain* in, off_t limit);

// The context whose session cache and ticket keys serve `ssl`: the one its
// handshake began with, not the one SNI switched to. OpenSSL looks a session
// up, or decrypts a ticket, before the SNI callback runs, through the first
// context's callbacks (its session_ctx), so sessions are stored and tickets
// made under that context too, or a session made after an SNI switch never
// resumes (nginx keeps ssl->session_ctx for this, nginx ticket #235).
TlsContext* tls_session_context(const SSL* ssl);

// SSL_CTX_set_tlsext_servername_callback for every server context.
int tls_servername_cb(SSL* ssl, int* alert, void* arg);

// Facts for logs and variables ("" when the connection has no TLS).
std::string_view tls_protocol(const Connection& c);
std::string_view tls_cipher(const Connection& c);
std::string_view tls_server_name(const Connection& c);
bool tls_session_reused(const Connection& c);
// The protocol ALPN agreed on ("" when none).
std::string_view tls_alpn_protocol(const Connection& c);
// Facts computed on demand for variables (facts.cc), nginx's $ssl_*.
enum class TlsFact : std::uint8_t {
  kSessionId,            // the session's id, upper-case hex
  kCurve,                // the key exchange group ("X25519", "prime256v1")
  kClientVerify,         // "SUCCESS", "FAILED:<reason>" or "NONE"
  kClientSubject,        // the client certificate's subject, RFC 2253
  kClientIssuer,         // its issuer, RFC 2253
  kClientSerial,         // its serial number, upper-case hex
  kClientFingerprint,    // SHA-1 of its DER, lower-case hex
  kClientRawCert,        // its PEM
  kClientCert,           // its PEM with every line after the first indented by a tab
  kCiphers,              // the ciphers the client offered, ':'-separated
  kClientSubjectLegacy,  // the subject in OpenSSL's one-line form ("/C=../CN=..")
  kClientIssuerLegacy,   // the issuer, likewise
  kClientNotBefore,      // "Nov 25 02:00:00 2026 GMT"
  kClientNotAfter,
  kClientDaysLeft,     // whole days until notAfter (0 once expired)
  kCurves,             // the groups the client offered, ':'-separated (unknown ones as 0x....)
  kClientEscapedCert,  // the client certificate's PEM, percent-encoded (RFC 3986 unreserved kept)
};
// Writes the fact to `out` (null: only its length) and returns its length;
// `found` false when the connection has none (no TLS, no client certificate).
std::size_t tls_fact(const Connection& c, TlsFact fact, char* out, bool& found);

// Client certificate check after the handshake (ssl_verify_client): 0 when
// acceptable, else nginx's 495 (verification failed) or 496 (none sent).
int tls_client_verify_status(const Connection& c);

}  // namespace vigil
