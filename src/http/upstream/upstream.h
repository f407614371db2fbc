#pragma once
// The HTTP upstream core (nginx's ngx_http_upstream): what every protocol to
// a backend shares. One Upstream per request, the base of the protocol's own
// state (proxy::ProxyState), taken from the worker's buffer cache by the
// protocol's handler and given back when the request ends (free_request calls
// upstream_core::release, whatever ended it).
//
//   protocol handler -> upstream_core::start
//     -> [read the body ahead: *_request_buffering] (client_side.cc)
//     -> create_request -> peer from the balancer / keepalive cache, connect
//     -> [TLS handshake (upstream_ssl.cc)] -> send the request chain
//     -> read the response head into buffer 0, process_header per read
//        -> next upstream / intercept / 101 tunnel
//     -> input_filter_init; relay the body through a bounded ring of buffers,
//        input_filter once per read, both directions paced by the slower side
//     -> give the connection back (keepalive) or close it -> finalize.
//
// The core owns connecting, retries (next_upstream with the tries and time
// limits), timeouts, TLS, $upstream_addr/_status/_response_time, the relay
// and the error log lines. A protocol (proxy/, later fastcgi/, grpc/) fills
// an UpstreamProtocol table: it builds the request, frames the request body,
// parses the response head and decodes the body framing.
//
// Memory per request is bounded by configuration: the request head, one
// client_body_buffer_size buffer (the request's, request_body.h),
// buffer_size for the response head, and buffers_num buffers for the body
// (one with buffering off). A request body read ahead that outgrows its
// buffer goes to a temporary file (request_body.h); a response never does:
// when the buffers are full the upstream is not read.

#include <cstddef>
#include <cstdint>
#include <memory>

#include "codec/chunked.h"
#include "codec/response_parser.h"
#include "event/resolver.h"
#include "http/core/request.h"
#include "http/upstream/upstream_conf.h"
#include "upstream/upstream.h"
#include "vigil/event/peer.h"

namespace vigil::http::upstream_core {

enum class Stage : std::uint8_t {
  kBody,
  kConnecting,
  kHandshake,  // TLS to the upstream, under connect_timeout
  kSending,
  kHead,
  kRelay,
  kTunnel,
  kDone
};

inline constexpr std::uint32_t kMaxRing = 64;
inline constexpr std::uint32_t kMaxResponseFields = 128;

struct Upstream;

// What process_header made of the bytes in the head buffer so far.
enum class HeadResult : std::uint8_t {
  kAgain,    // more bytes needed
  kDone,     // the head is complete: u.resp and u.fields hold it
  kInvalid,  // malformed (the protocol logged why): next upstream, 502
};

// The protocol callbacks (nginx's create_request, reinit_request,
// process_header, input_filter_init, input_filter, finalize_request). The
// core calls them once per request, per attempt, per read or per buffer,
// never per byte.
struct UpstreamProtocol {
  // The request body is known (read ahead or streamed): build the request
  // head into u.head (and u.uri_off/uri_len for the log). 0, or the status
  // the client gets (500 out of memory, 411...).
  int (*create_request)(Upstream& u);
  // Another attempt follows: reset what the protocol keeps per attempt.
  void (*reinit_request)(Upstream& u);
  // Queues the body buffer u.r->body.buf (with its framing) at out[k...];
  // returns the new k. Called once per body buffer; with an empty buffer and the
  // body complete, for the end of the body (a last chunk).
  std::size_t (*body_output)(Upstream& u, Chain* out, std::size_t k);
  // Parses the response head in [b.pos, b.last), moving b.pos on.
  HeadResult (*process_header)(Upstream& u, Buf& b);
  // The response is accepted for the client: how its body ends
  // (u.resp_done...). False: the request ends with an error.
  bool (*input_filter_init)(Upstream& u);
  // `n` new body bytes at p (the end of `b`): where the body ends, with the
  // protocol's framing taken off (b.last moves back over it); the client's
  // framing is the output filters'. False on a malformed body.
  bool (*input_filter)(Upstream& u, Buf& b, char* p, std::size_t n);
  // The request ends: give back what the protocol holds (before the state
  // memory goes back to the cache).
  void (*finalize)(Upstream& u);

  // ---- optional (null for HTTP/1); a multiplexed protocol (HTTP/2: grpc/) ----
  // The connection to the backend is ready (fresh, or u.pc.cached), before
  // the first byte of this attempt is sent: the protocol binds the request
  // to the connection (its stream id, whether the connection preface is
  // still due). False: the connection cannot be used (an error, next upstream).
  bool (*attach)(Upstream& u) = nullptr;
  // Bytes the protocol sends on its own once the request is sent (HTTP/2
  // SETTINGS and PING acknowledgements, WINDOW_UPDATE as the response is
  // consumed): the next piece, or null when there is none. The core calls it
  // when the protocol asked with want_send() and the backend's connection
  // can take bytes; while the request is being sent, body_output carries
  // such bytes itself, between the frames of the body.
  Buf* (*control_output)(Upstream& u) = nullptr;
  // Its connections carry only this protocol: the keepalive cache keeps
  // them apart from HTTP/1 ones to the same servers.
  bool own_connections = false;
  // The scheme of the "upstream:" in log lines, plain and with TLS.
  const char* scheme = "http";
  const char* tls_scheme = "https";
};

// A group made for one request from addresses known only at run time (an
// address in proxy_pass with variables, or the addresses the resolver gave
// for a name), as nginx's ngx_http_upstream_create_round_robin_peer: round
// robin over them, each tried once; no health is kept past the request.
struct RunTimeGroup {
  upstream::Group group;
  std::unique_ptr<upstream::PeerHealth[]> health;
  std::unique_ptr<upstream::PeerStats[]> stats;
  Resolver* resolver = nullptr;  // set while the name is being resolved
  ResolveRequest query;
};

struct Upstream {
  Request* r = nullptr;
  const UpstreamConf* conf = nullptr;
  const UpstreamProtocol* protocol = nullptr;
  char* state_mem = nullptr;     // the protocol's state in the buffer cache
  std::uint32_t state_size = 0;  // its size (the cache slot)
  Stage stage = Stage::kBody;
  // Where this request goes: the location's group, or what proxy_pass with
  // variables named for it (null: resolve resolve_host first).
  upstream::Group* group = nullptr;
  bool https = false;
  std::string_view target;        // host[:port] as named (TLS name, log lines)
  std::string_view resolve_host;  // a name for the resolver
  unsigned resolve_port = 0;
  std::unique_ptr<RunTimeGroup> run_time;
  upstream::PeerRequest pr;
  PeerConnection pc;
  Connection* u = nullptr;
  Msec start_msec = 0;  // the first attempt (*_next_upstream_timeout)
  Msec try_msec = 0;    // the current attempt ($upstream_response_time)
  bool retried_fresh = false;
  bool sent_any = false;         // some byte of this request reached a backend (non_idempotent)
  char hash_key[256];            // the evaluated `hash` key when it fits
  char* hash_key_mem = nullptr;  // else a worker buffer holding it
  std::uint32_t hash_key_mem_size = 0;
  // A *_pass with variables: its URL evaluated for this request (a worker
  // buffer, given back by release()).
  char* url_mem = nullptr;
  std::uint32_t url_mem_size = 0;

  // The request head (create_request), built once; head.pos goes back to
  // head.start for a retry.
  Buf head;
  std::uint32_t head_cap = 0;
  std::uint32_t uri_off = 0;  // the URI inside the head (for log lines)
  std::uint32_t uri_len = 0;

  // The request body is read through request_body.h into r->body.buf and
  // kept there until sent.
  bool body_out = false;        // a body goes to the backend
  bool body_replayable = true;  // r->body.buf holds it from its first byte: a retry may send it
  bool buffer_body = false;     // the protocol cannot stream this body: read it ahead
  bool own_body = false;        // the protocol sends a body of its own: the client's is not read
  Chain out[4];
  Chain* pending = nullptr;  // what is left of the current send
  bool request_sent = false;
  // body_output could not queue the body: the backend's flow-control window
  // is closed (HTTP/2). The core waits for the backend's bytes (its
  // WINDOW_UPDATE, read by process_header or input_filter); the protocol
  // calls want_send() when the window opens.
  bool body_blocked = false;
  Chain ctl_out;                 // control_output's piece in flight
  Chain* ctl_pending = nullptr;  // what is left of it

  // The response head (process_header fills it).
  ResponseHead resp;
  std::uint32_t nfields = 0;
  HeaderField fields[kMaxResponseFields];
  // The response's trailer fields, when the protocol keeps them (grpc: its
  // trailing HEADERS), for $upstream_trailer_NAME; the protocol's memory.
  const HeaderField* resp_trailers = nullptr;
  std::uint32_t nresp_trailers = 0;
  bool resp_any = false;   // a byte of the response arrived
  bool resp_done = false;  // the whole body arrived
  bool upstream_eof = false;
  bool premature = false;  // the backend closed (or failed) before the body's end
  bool upstream_reusable = true;
  // A Location the protocol rewrote (proxy_redirect): field `location_field`
  // is sent as `location`, made absolute as the server's own redirects.
  std::string_view location;
  std::uint32_t location_field = UINT32_MAX;

  // The ring of response buffers: data in [ring_head .. ring_tail] (cyclic).
  // What was passed to the client's output filter chain is sealed, buffers
  // [ring_head .. sealed_end], until the writer has sent it all: reads go to
  // the buffers after it (one response buffer: none until it is sent).
  Buf ring[kMaxRing];
  // Where buffer 0 is refilled from once its body bytes are sent: after the
  // response head, which u.fields point into, so $upstream_http_NAME and
  // $upstream_cookie_NAME stay readable until the request is logged. Null:
  // the head left too little room, and it is given up (nfields 0).
  char* body_base = nullptr;
  std::uint32_t nring = 1;
  std::uint32_t ring_head = 0;
  std::uint32_t ring_tail = 0;
  std::uint32_t sealed_end = 0;
  Msec relay_msec = 0;        // the body relay began (*_limit_rate counts from here)
  std::uint64_t relay_read = 0;  // body bytes read from the backend since
  bool sealed = false;      // buffers are with the writer
  bool last_passed = false;  // the end of the body went to the filters
  Chain ring_chain[kMaxRing + 1];  // the sealed buffers, then the end mark
  Buf end_mark;                    // an empty last buffer: the end with no data

  // The tunnel after a 101 (client -> backend direction uses r->body.buf).
  bool upgrade_sent = false;  // the request asks for an Upgrade
  bool client_eof = false;
  bool tunnel_up_shut = false;
  bool tunnel_down_shut = false;
};

// ---- upstream.cc ----------------------------------------------------------------------
// Starts the upstream request of `u` (taken from the worker's buffer cache,
// state_size bytes, u.r/conf/protocol set, r.upstream pointing at it).
// 0: on its way, else a status for the client.
int start(Upstream& u);
// The $upstream_* entry of the current attempt (null before the first).
UpstreamTry* current_try(Upstream& u);
// Logs "<what>, client: ..., server: ..., request: ..., host: ..." (a line
// of the request before any upstream is chosen).
void log_request_error(Request& r, int level, const char* what);

// ---- upstream_resolve.cc --------------------------------------------------------------
// A *_pass with variables: `url` evaluated for u.r into u.url_mem. False
// without memory.
bool evaluate_url(Upstream& u, const VarTemplate& url, std::string_view& out);
// `url` starts with `scheme` ("http://", "grpcs://"), in any case.
bool has_scheme(std::string_view url, std::string_view scheme);
// A group of one address (an IP address in proxy_pass with variables).
// False without memory.
bool set_address_group(Upstream& u, const sockaddr* sa, socklen_t len, std::string_view server);
// A *_pass with variables: the backend its evaluated URL names by
// "host[:port]" (`url`, the whole URL, for the error lines): an upstream
// block named by the host alone, the group a *_pass without variables made
// for that very host:port, an address (a group of its own), or else a name
// for the resolver (u.resolve_host/resolve_port). `default_port` when none
// is written (0: one is required). Sets u.target and, for the caller, the
// host, the port as written and the port. 0, or 500 (logged as nginx:
// "invalid port in upstream \"...\"").
int route_to(Upstream& u, std::string_view url, std::string_view hostport, unsigned default_port,
             upstream::GroupSet* groups, std::string_view& host, std::string_view& port_text,
             unsigned& port);
// u.group is null: resolves u.resolve_host with the location's resolver,
// then connects (or answers 502).
void resolve(Upstream& u);
// Gives back everything the upstream request holds for `r` (free_request calls it).
void release(Request& r);
// The body (if any) read ahead: build the request, choose a server.
void begin_connect(Upstream& u);
// The group is known: a peer from the balancer, then connect.
void choose_peer(Upstream& u);
void connect(Upstream& u);
// The attempt failed: `next` is the next_upstream condition (kNext*),
// `status` what the client gets when no other server is tried (502, 504).
void next_upstream(Upstream& u, unsigned next, int status);
// A response status in next_upstream may be retried on another server.
bool may_retry(Upstream& u, unsigned next);
// Drops the response of this attempt (failed: counts against the server) and
// tries the next server.
void retry_after_response(Upstream& u, bool failed);
// Ends the current attempt for the upstream layer and closes the connection
// it did not keep.
void end_attempt(Upstream& u, unsigned state);
// Ends the upstream request; `error`: the client connection must close.
void finish(Upstream& u, bool error);
// Closes (or keeps alive, `reusable`) the upstream connection.
void close_upstream(Upstream& u, bool reusable);
// Logs "<what> while <stage action>, client: ..., upstream: ..." as nginx does.
void log_error(Upstream& u, int level, int err, const char* what);

// ---- upstream_relay.cc ----------------------------------------------------------------
// Sends the head and body to the backend as far as possible.
void send_request(Upstream& u);
// Reads the response head into buffer 0 and hands it to process_header.
void read_response_head(Upstream& u);
// Moves the body from the backend to the client through the ring.
void relay(Upstream& u);
// Returns every ring buffer to the worker's cache.
void release_ring(Upstream& u);
// The protocol has bytes to send (body_output while the request is sent,
// control_output after): the backend's write event is posted, so the send
// runs once the protocol's callback has returned.
void want_send(Upstream& u);
// Sends control_output's pieces while the backend's connection takes them.
// False when the connection failed (the caller ends the attempt).
bool send_control(Upstream& u);
bool idempotent(const Request& r);
// Hop-by-hop fields (RFC 9110 §7.6.1), never forwarded as they are, in
// either direction. nginx clears only some of these by default; the RFC says
// all, and we follow it.
bool hop_by_hop(std::string_view name);
// A field that one of the Connection fields among `fields` names (RFC 9110
// §7.6.1: hop-by-hop too).
bool named_by_connection(const HeaderField* fields, std::uint32_t n, std::string_view name);

// ---- upstream_ssl.cc ------------------------------------------------------------------
// The connection to the backend is up (fresh or cached): TLS first when the
// conf asks for it and the connection has none yet, then the request.
void connected(Upstream& u);
// The connection to the current server is ready (TLS too): $upstream_connect_time.
void note_connected(Upstream& u);
// A cached keepalive connection fits this location: TLS with the same
// context for https, plain for http (one group may serve both).
bool cached_fits(const Upstream& u, const Connection& c);
// The response is complete: nothing of the backend's is left inside the TLS
// layer (bytes OpenSSL read that no MSG_PEEK could see).
bool tls_drained(const Connection& c);

// ---- upstream_tunnel.cc ---------------------------------------------------------------
void start_tunnel(Upstream& u);
void tunnel(Upstream& u);

// The upstream event handler (both events of the backend connection).
void upstream_handler(Event& ev);

}  // namespace vigil::http::upstream_core
