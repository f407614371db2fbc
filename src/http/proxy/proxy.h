#pragma once
// The HTTP reverse proxy (nginx's ngx_http_proxy_module on ngx_http_upstream):
// one ProxyState per proxied request, taken from the worker's buffer cache
// when proxy_pass runs and given back when the request ends (free_request
// calls proxy::release, whatever ended it).
//
//   proxy_handler -> [read the body ahead: proxy_request_buffering]
//     -> connect (upstream layer: balancer, keepalive cache)
//     -> [TLS handshake: proxy_pass https:// (proxy_ssl.cc)] -> send the head
//        and stream the body (proxy_request.cc)
//     -> read and parse the response head (proxy_response.cc)
//        -> next upstream / intercept / 101 tunnel (proxy_tunnel.cc)
//     -> relay the body through a bounded ring of buffers, both directions
//        paced by the slower side -> give the connection back (keepalive) or
//        close it -> finalize_request.
//
// Memory per request is bounded by configuration: the request head, one
// client_body_buffer_size buffer, proxy_buffer_size for the response head,
// and proxy_buffers for the body (one buffer with proxy_buffering off). No
// temporary files: when the buffers are full the upstream is not read.

#include <cstddef>
#include <cstdint>

#include "codec/chunked.h"
#include "http/core/request.h"
#include "codec/response_parser.h"
#include "upstream/upstream.h"
#include "vigil/event/peer.h"

namespace vigil::http::proxy {

enum class Stage : std::uint8_t {
  kBody,
  kConnecting,
  kHandshake,  // TLS to the upstream (proxy_pass https://), under proxy_connect_timeout
  kSending,
  kHead,
  kRelay,
  kTunnel,
  kDone
};

enum class BodyOut : std::uint8_t {
  kNone,     // no body goes to the backend
  kLength,   // Content-Length (the client's, or the decoded length of a whole chunked body)
  kChunked,  // re-sent chunked, as it arrives (HTTP/1.1 to the backend)
};

inline constexpr std::uint32_t kMaxRing = 64;
inline constexpr std::uint32_t kMaxResponseFields = 128;

struct ProxyState {
  Request* r = nullptr;
  const ProxyConf* conf = nullptr;
  Stage stage = Stage::kBody;
  upstream::PeerRequest pr;
  PeerConnection pc;
  Connection* u = nullptr;
  Msec start_msec = 0;  // the first attempt (proxy_next_upstream_timeout)
  Msec try_msec = 0;    // the current attempt ($upstream_response_time)
  bool retried_fresh = false;
  bool sent_any = false;  // some byte of this request reached a backend (non_idempotent)
  char hash_key[256];              // the evaluated `hash` key when it fits
  char* hash_key_mem = nullptr;     // else a worker buffer holding it
  std::uint32_t hash_key_mem_size = 0;

  // The request head, built once; head.pos goes back to head.start for a retry.
  Buf head;
  std::uint32_t head_cap = 0;
  std::uint32_t uri_off = 0;  // the URI inside the head (for log lines)
  std::uint32_t uri_len = 0;
  bool upgrade_sent = false;  // the head asks for an Upgrade (proxy_set_header Upgrade ...)

  // The request body: read from the client, kept in `body` until sent.
  BodyOut body_out = BodyOut::kNone;
  bool body_in = false;      // the client sends a body
  bool body_in_done = true;  // all of it has been read from the client
  bool body_chunked_in = false;
  std::int64_t body_rest = 0;     // Content-Length bytes still to read from the client
  std::int64_t body_length = -1;  // what Content-Length says to the backend
  ChunkedParser body_chunked;
  Buf body;
  std::uint32_t body_cap = 0;
  bool body_replayable = true;  // `body` holds the body from its first byte
  char chunk_head[24];
  Buf chunk_head_buf;
  Buf chunk_tail_buf;
  bool last_chunk_queued = false;
  Chain out[4];
  Chain* pending = nullptr;  // what is left of the current send
  bool request_sent = false;

  // The response.
  ResponseParser parser;
  ResponseHead resp;
  bool head_line_done = false;
  std::uint32_t nfields = 0;
  HeaderField fields[kMaxResponseFields];
  bool resp_any = false;  // a byte of the response arrived
  std::int64_t resp_rest = 0;
  ChunkedParser resp_chunked;
  bool resp_done = false;  // the whole body arrived
  bool upstream_eof = false;
  bool premature = false;  // the backend closed (or failed) before the body's end
  bool upstream_reusable = true;
  bool decode_chunked = false;  // the client gets the body without the chunked coding
  bool client_chunked = false;  // the client gets the body chunked (Transfer-Encoding: chunked)
  // A body that ends at the backend's close, to an HTTP/1.1 client: each read
  // becomes a chunk (room for its size line before it and CRLF after it), and
  // the last chunk follows the close, so the client connection stays open.
  bool encode_chunked = false;
  char last_chunk[5] = {'0', '\r', '\n', '\r', '\n'};
  Buf last_chunk_buf;

  // The ring of response buffers: data in [head_i .. tail_i] (cyclic).
  Buf ring[kMaxRing];
  std::uint32_t nring = 1;
  std::uint32_t ring_head = 0;
  std::uint32_t ring_tail = 0;
  Chain ring_chain[kMaxRing + 2];  // the head, the ring, the last chunk
  Chain* client_pending = nullptr;

  // The tunnel after a 101 (client -> backend direction uses `body`).
  bool client_eof = false;
  bool tunnel_up_shut = false;
  bool tunnel_down_shut = false;
};

// ---- proxy.cc -----------------------------------------------------------------------
// proxy_pass's content handler (phases.h): reads the body itself, as it
// streams it to the backend.
extern const ContentHandler kContent;
// Starts proxying `r` (0: on its way, else a status).
int start(Request& r);
// Gives back everything the proxy holds for `r` (free_request calls it).
void release(Request& r);
void connect(ProxyState& ps);
// The attempt failed: `next` is the proxy_next_upstream condition (kNext*),
// `status` what the client gets when no other server is tried (502, 504).
void next_upstream(ProxyState& ps, unsigned next, int status);
// A response status in proxy_next_upstream may be retried on another server.
bool may_retry(ProxyState& ps, unsigned next);
// Drops the response of this attempt (failed: counts against the server) and
// tries the next server.
void retry_after_response(ProxyState& ps, bool failed);
// Ends the proxied request; `error`: the client connection must close.
void finish(ProxyState& ps, bool error);
// Closes (or keeps alive, `reusable`) the upstream connection.
void close_upstream(ProxyState& ps, bool reusable);
// Logs "<what> while <stage action>, client: ..., upstream: ..." as nginx does.
void log_error(ProxyState& ps, int level, int err, const char* what);
void client_read_handler(Event& ev);
void client_write_handler(Event& ev);
void upstream_handler(Event& ev);
bool idempotent(const Request& r);

// ---- proxy_request.cc ---------------------------------------------------------------
// Builds the request head into ps.head; false when out of memory.
bool build_request(ProxyState& ps);
// Reads body bytes from the client into ps.body. Returns 1 when the body
// buffer has data or the body is complete, 0 when waiting for the client,
// -1 when the request was ended (error answered or client gone).
int read_body(ProxyState& ps);
// Sends the head and body to the backend as far as possible.
void send_request(ProxyState& ps);
// Prepares ps for sending the request again (another server).
bool rewind_request(ProxyState& ps);

// ---- proxy_response.cc ----------------------------------------------------------------
void read_response_head(ProxyState& ps);
// Hop-by-hop fields (RFC 9110 §7.6.1), never forwarded as they are, in
// either direction. nginx clears only some of these by default; the RFC says
// all, and we follow it.
bool hop_by_hop(std::string_view name);
// A field that one of the Connection fields among `fields` names (RFC 9110
// §7.6.1: hop-by-hop too).
bool named_by_connection(const HeaderField* fields, std::uint32_t n, std::string_view name);

// The client's response head (status line, filtered fields) into r.hbuf.
bool build_client_head(ProxyState& ps, bool upgrade);
void relay(ProxyState& ps);
// Returns every ring buffer to the worker's cache.
void release_ring(ProxyState& ps);

// ---- proxy_ssl.cc ---------------------------------------------------------------------
// The connection to the backend is up (fresh or cached): TLS first when
// proxy_pass is https and the connection has none yet, then the request.
void connected(ProxyState& ps);
// A cached keepalive connection fits this location: TLS with the same
// context for https, plain for http (one group may serve both).
bool cached_fits(const ProxyState& ps, const Connection& u);
// The response is complete: nothing of the backend's is left inside the TLS
// layer (bytes OpenSSL read that no MSG_PEEK could see).
bool tls_drained(const Connection& u);

// ---- proxy_tunnel.cc ------------------------------------------------------------------
void start_tunnel(ProxyState& ps);
void tunnel(ProxyState& ps);

}  // namespace vigil::http::proxy
