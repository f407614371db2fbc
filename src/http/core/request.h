#pragma once
// The per-connection and per-request state of the HTTP/1.1 server (nginx's
// ngx_http_connection_t and ngx_http_request_t), and the functions that move
// a request through its life:
//
//   accept -> init_connection -> wait_request_handler (first byte)
//     -> process_request_line -> process_request_headers -> process_request
//     -> run_phases (phases.h: rewrite, limits, access, try_files, content;
//        the content handler reads or discards the body, request_body.h)
//     -> send_header (header filters, write_header)
//     -> output_filter (body filters, write_filter as the socket drains) -> finalize_request
//     -> keep-alive (wait_request_handler again), lingering close, or close.
//
// HttpConnection lives in the connection's arena for the connection's life
// and is small, because idle keep-alive connections keep nothing else: the
// header buffer and the Request are taken from the worker's free lists when
// the first byte arrives and given back when the request ends (nginx frees
// its header buffer and request pool while idle for the same reason).

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string_view>

#include "codec/header_check.h"
#include "codec/parse.h"
#include "http/core/conf.h"
#include "http/core/headers_out.h"
#include "http/core/module.h"
#include "http/core/request_body.h"
#include "http/core/request_vars.h"
#include "http/core/servers.h"
#include "vigil/core/buffer.h"
#include "vigil/event/connection.h"

namespace vigil::http {

struct Request;
struct SubrequestHooks;
class HttpWorker;
struct CachedFile;
struct OpenFileInfo;
struct FileRef;

namespace h2 {
struct Session;
struct Stream;
}  // namespace h2

struct HttpConnection {
  Connection* c = nullptr;
  HttpWorker* worker = nullptr;
  const HttpAddress* addr = nullptr;
  const HttpSrvConf* srv = nullptr;  // the address's default server: buffer sizes, header timeout
  Buf buffer;                        // the header buffer; start == nullptr while released
  Request* request = nullptr;        // the request in progress, if any
  Msec lingering_deadline = 0;
  Msec lingering_timeout = 0;
  Msec start_msec = 0;  // when it was accepted (keepalive_time, $connection_time)
  bool large = false;       // `buffer` is a large_client_header_buffers buffer
  bool waiting = false;     // counted in stub_status "Waiting" (reusable: idle or not yet read)
  bool keepalive = false;   // idle between requests (vs. a new connection)
  bool plain_http = false;  // plain text on a TLS port: answered with 400 (nginx's 497)
  bool pipelined = false;   // the next request's first bytes came with the previous one's
  // HTTP/2 (http/v2/h2.h): on the client connection, its session once the
  // connection speaks HTTP/2; on a stream's own HttpConnection (whose `c` is
  // the stream's connection), the stream.
  h2::Session* h2 = nullptr;
  h2::Stream* stream = nullptr;
};

enum class Phase : std::uint8_t { kRequestLine, kHeaders, kBody, kWriting, kDone };

// Bytes of response kept inside the Request: the header, and the body of a
// small file right after it (one segment, one send; see serve_file). Longer
// headers (a long Location) take a buffer from the worker's cache. Requests
// come from a free list and exist only while in progress, so an idle
// connection does not pay for this.
inline constexpr std::size_t kHeaderInline = 2048;

// Header fields kept inside the Request (for $http_NAME and the proxy, which
// forwards them); a request with more takes a buffer for kMaxFields from the
// worker's cache, and one with more than that is refused with 431.
inline constexpr std::uint32_t kInlineFields = 32;
inline constexpr std::uint32_t kMaxFields = 512;

// One upstream attempt, for $upstream_addr, $upstream_status and the
// $upstream_*_time variables (nginx lists every attempt, ", "-separated).
struct UpstreamTry {
  char addr[64];
  std::uint8_t addr_len = 0;
  bool connected = false;   // connect_time is set (else written as "-")
  bool has_header = false;  // header_time is set
  int status = 0;  // 0: no response (written as "-"), else the backend's status or 502/504
  bool has_time = false;  // `time` is set: the attempt ended (else written as "-")
  Msec time = 0;   // from the connect to the end of the attempt (response, failure, close)
  Msec connect_time = 0;  // from the connect to the connection ready (TLS included)
  Msec header_time = 0;   // from the connect to the end of the response header
  std::uint64_t bytes_sent = 0;      // request bytes that went to the server
  std::uint64_t bytes_received = 0;  // response bytes read from it, head and body
  std::uint64_t response_length = 0;  // of which the body (as the server framed it)
};
inline constexpr std::uint32_t kMaxUpstreamTries = 8;

// limit_conn directives one location may have (limit_conn.cc).
inline constexpr std::uint32_t kMaxLimitConn = 8;

// What limit_req and limit_conn decided for a request ($limit_req_status,
// $limit_conn_status; kNone: the location has no such limit).
enum class LimitStatus : std::uint8_t {
  kNone,
  kPassed,
  kDelayed,
  kRejected,
  kDelayedDryRun,
  kRejectedDryRun,
};

namespace upstream_core {
struct Upstream;
}

// The size line and CRLFs around the chunk the chunked filter has in flight.
struct ChunkFrame {
  char line[20];  // hex size, CRLF
  Buf head;
  Buf tail;  // CRLF, or CRLF and the last chunk (with the trailer section)
  Chain head_link;
  Chain tail_link;
  // The last chunk and the trailer section when headers_out has trailers: a
  // worker buffer, given back when the request ends.
  char* trailer_mem = nullptr;
  std::uint32_t trailer_size = 0;
  // The trailer fields written so far, [fields_begin, fields_end) of
  // trailer_mem ($sent_trailer_NAME).
  std::uint32_t fields_begin = 0;
  std::uint32_t fields_end = 0;
};

// How HTTP/1 delimits a response body (RFC 9112 §6.3).
enum class BodyFraming : std::uint8_t { kLength, kChunked, kClose };

// Room for N objects of T that a request writes before it reads them (a
// count, or a flag set with them, says what is in use): not cleared when a
// request starts. It reads as a T[N] (it converts to T*).
template <typename T, std::size_t N>
struct Uncleared {
  Uncleared() {}               // NOLINT(modernize-use-equals-default): leaves the room as it was
  operator T*() { return v; }  // NOLINT(google-explicit-constructor)
  operator const T*() const { return v; }  // NOLINT(google-explicit-constructor)
  union {
    T v[N];
  };
};

// The request's state: all of it is zeroed, then given its initialisers,
// when a request starts (Request's constructor value-initialises it).
struct RequestState {
  HttpConnection* hc = nullptr;
  Connection* c = nullptr;
  const HttpSrvConf* srv = nullptr;  // chosen by Host once the header is complete
  const HttpLocConf* loc = nullptr;
  // The content handler of the conf an `if` block took over from when that
  // block has none of its own (nginx keeps r->content_handler): used while
  // r.loc's is null; cleared when find-config chooses a location.
  const ContentHandler* if_content = nullptr;
  // What an X-Accel-Redirect kept of the backend's head (the fields not
  // marked omit, and its Content-Type) for the response the redirect makes:
  // send_header adds them to a head that has no fields of its own. They
  // live in the upstream's head buffer, until upstream_core::release.
  HeaderField* accel_fields = nullptr;
  std::uint32_t naccel = 0;
  std::string_view accel_content_type;

  RequestParser parser;
  RequestLine line;
  std::optional<HeaderChecker> checker;
  HeaderCheck check;
  Phase phase = Phase::kRequestLine;

  // The fields the server acts on (views into the header buffers).
  std::string_view if_modified_since;
  std::string_view if_unmodified_since;
  std::string_view if_none_match;
  std::string_view if_match;
  std::string_view range;
  std::string_view if_range;
  std::string_view user_agent;
  std::string_view referer;

  // Header buffers this request moved away from (Request::retired): the
  // first nretired are in use.
  std::uint32_t nretired = 0;
  std::uint32_t nlarge = 0;  // large buffers taken by this request

  int status = 0;
  bool keepalive = false;
  bool header_only = false;  // HEAD, 304: no body
  bool lingering = false;    // close with lingering (error, or unread input)
  bool stat_reading = false;
  bool stat_writing = false;
  bool logged = false;
  bool continue_sent = false;

  RequestBody body;  // the request body as it is read or thrown away (request_body.h)

  // The response: header, then the body (memory or file range), as a chain.
  Buf hbuf;
  Buf bbuf;
  Chain out[2];
  Chain* pending = nullptr;  // what is left to send
  char* big_header = nullptr;
  std::uint32_t big_header_size = 0;
  int fd = -1;                       // the file being sent
  CachedFile* file_entry = nullptr;  // fd is this open_file_cache entry's (not ours to close)
  off_t file_pos = 0;                // read position when sendfile is off
  off_t file_end = 0;
  char* obuf = nullptr;  // read buffer (sendfile off) or generated body (metrics)
  std::uint32_t obuf_size = 0;
  // The Location a `return` made (return.cc): apart from obuf, because it
  // stays for the error_page of a redirect while that page's handler takes
  // obuf for its own body.
  char* location_mem = nullptr;
  std::uint32_t location_mem_size = 0;
  // auth_basic's WWW-Authenticate value when its realm has variables.
  char* auth_mem = nullptr;
  std::uint32_t auth_mem_size = 0;
  bool use_sendfile = false;
  bool chunked_out = false;      // the body goes out chunked (write_header chose it)
  ChunkFrame chunk_frame;        // the chunked filter's framing in flight (filters/chunked.cc)
  off_t header_size = 0;         // bytes of header in the response, for $body_bytes_sent
  off_t sent_start = 0;          // c->sent when the request started
  int redirects = 0;             // internal redirects (try_files, error_page)
  std::uint16_t phase_step = 0;  // where the request is in the phase engine (phases.h)
  bool uri_redirected = false;   // r.uri is an internal redirect's (try_files), not the client's
  bool uri_changed = false;      // a location's rewrite changed r.uri (post-rewrite: find it again)
  bool error_page = false;       // an error_page took the request (no second one)
  // The request reached its location by an internal redirect, a rewrite, a
  // named location or an error_page: an `internal` location may answer it.
  bool internal = false;
  bool add_uri_to_alias = false;  // try_files found r.uri under a regex location's alias
  // This response's limit_rate / limit_rate_after ($limit_rate): the
  // location's, worked out when the first byte is sent, unless `set
  // $limit_rate` chose before (nginx's limit_rate_set).
  std::uint64_t limit_rate = 0;
  std::uint64_t limit_rate_after = 0;
  bool limit_rate_set = false;
  bool limit_rate_after_set = false;
  // `set` variables, regex captures and the memory they live in (request_vars.h).
  RequestVars vars;
  // A body filter changes the bytes (gzip, gunzip): the producer passes the
  // whole body through the filters, none of it in the head's buffer nor read
  // by the writer after them (nginx's main_filter_need_in_memory).
  bool body_changed = false;
  // The response depends on Accept-Encoding: "Vary: Accept-Encoding" when
  // the location has gzip_vary on (nginx's r->gzip_vary; set by gzip,
  // gzip_static and gunzip, kept across internal redirects).
  bool gzip_vary = false;
  // Each HttpModule's per-request state (module.h), null until it sets it:
  // memory the module owns for the request's life (a worker buffer, given
  // back by the module when the request ends), or a pointer into the request.
  void* ctx[kMaxHttpModules] = {};
  HeadersOut headers_out;        // the response head (send_header, filters.h)
  std::int64_t body_offset = 0;  // the first byte of the representation sent (a 206's)
  std::uint8_t content_range_len = 0;  // of Request::content_range

  // Every header field, in order (views into the header buffers).
  HeaderField* fields = nullptr;  // field_inline, or a cache buffer of kMaxFields
  std::uint32_t nfields = 0;
  bool fields_big = false;
  // The normalised path ($uri), when it differs from the raw one: kept in a
  // cache buffer of uri_mem_size until the request ends.
  std::string_view uri;
  char* uri_mem = nullptr;
  std::uint32_t uri_mem_size = 0;
  Msec start_msec = 0;  // when the first byte of the request was read ($request_time)
  // Bytes of the request received: its head, and its body as sent (framing
  // included) as far as it was read or discarded ($request_length).
  std::uint64_t request_length = 0;
  bool pipelined = false;  // its first bytes came with the previous request ($pipe)

  // Request limits (limit_req.cc, limit_conn.cc): checked once, before the
  // handler; the limit_conn entries this request holds, released with it.
  std::uint8_t limits_stage = 0;  // 0: none yet, 1: limit_req passed, 2: all passed
  LimitStatus limit_req_status = LimitStatus::kNone;   // $limit_req_status
  LimitStatus limit_conn_status = LimitStatus::kNone;  // $limit_conn_status
  std::uint8_t nlimit_conn = 0;
  ShmZone* limit_conn_zone[kMaxLimitConn] = {};
  void* limit_conn_node[kMaxLimitConn] = {};

  // realip (access/realip.cc): the client address a trusted proxy named
  // replaces the connection's for this request (peer_addr and addr_text
  // point here); the connection's own are kept in realip_saved_* and put
  // back when the request ends. realip_saved_addr non-null: replaced.
  // (realip_addr and realip_text are Request's.)
  ::sockaddr* realip_saved_addr = nullptr;
  socklen_t realip_saved_len = 0;
  std::string_view realip_saved_text;

  std::uint32_t nupstream = 0;  // Request::upstream_tries in use
  // The upstream request while it runs (http/upstream/upstream.h; the
  // protocol's state, proxy::ProxyState, derives from it).
  upstream_core::Upstream* upstream = nullptr;

  // Subrequests (subrequest.h). In a subrequest: its parent, the parent's
  // hooks for its response, and its depth (1 for a main request's). In a
  // parent: the subrequest it waits for, and the event posted to resume it
  // once that subrequest has ended (the subrequest's memory stays until the
  // parent has read its result and releases it).
  Request* parent = nullptr;
  const SubrequestHooks* sub_hooks = nullptr;
  Request* waiting_on = nullptr;
  Event sub_done;
  std::uint32_t sub_generation = 0;  // c->generation when sub_done was armed
  std::uint8_t sub_depth = 0;
  bool sub_header_sent = false;  // the subrequest's head reached its parent's hook
  bool sub_failed = false;       // it was terminated (no complete response)

  // The request's own event handlers (nginx's r->read_event_handler and
  // r->write_event_handler). The transport owns the client connection's
  // handlers and calls these when the request's side of it can be read or
  // written, or its timer fired (the flags are on r.c->read and r.c->write);
  // request-level code sets these, never the connection's.
  void (*read_event_handler)(Request& r) = nullptr;
  void (*write_event_handler)(Request& r) = nullptr;
};

// A request: its state, and its buffers, which are written before they are
// read and so are not cleared when a request starts. An HTTP/2 connection
// keeps hundreds of requests in flight; clearing these 5 KB of each (most
// of it never touched by a small request) cost more than any other step of
// starting one, in cache misses.
struct Request : RequestState {
  Request() : RequestState() {}

  // Header buffers this request moved away from: completed fields still point
  // into them, so they are given back only when the request ends.
  // One small buffer, the large ones, and the one a body is read into.
  Uncleared<char*, kMaxLargeBuffers + 2> retired;
  Uncleared<std::uint32_t, kMaxLargeBuffers + 2> retired_size;
  char content_range[64];  // "bytes a-b/size" (206) or "bytes */size" (416)
  // realip (see RequestState::realip_saved_addr).
  ::sockaddr_storage realip_addr;
  char realip_text[INET6_ADDRSTRLEN];
  // Each attempt is cleared when it is added (upstream.cc add_try).
  Uncleared<UpstreamTry, kMaxUpstreamTries> upstream_tries;
  Uncleared<HeaderField, kInlineFields> field_inline;
  char header_mem[kHeaderInline];
};

// ---- connection.cc ------------------------------------------------------------
void init_connection(Connection& c);        // Listening::handler
// A Request from the worker's free list for hc (counted, hc.request set);
// its head is then read from hc.buffer (process_request_line). Null when
// none could be had (logged).
Request* begin_request(HttpConnection& hc);
void wait_request_handler(Event& rev);      // first byte of a request
void close_connection(HttpConnection& hc);  // frees everything, closes fd
void set_keepalive(HttpConnection& hc, const HttpLocConf& loc);
void set_lingering_close(HttpConnection& hc, const HttpLocConf& loc);
// stub_status' "Waiting", and whether the pool may close the connection
// when it runs short (an idle one).
void set_reusable(HttpConnection& hc, bool on);
void empty_handler(Event& ev);
// The client connection's handler for both events while a request runs
// (nginx's ngx_http_request_handler): it calls the request's
// read_event_handler or write_event_handler.
void request_handler(Event& ev);
// While the request reads nothing from its client (a proxied request whose
// body is read): whether the client went away (nginx's
// ngx_http_upstream_check_broken_connection), `err` the error if any.
// Pipelined input is not a close: it waits for the next request.
bool client_gone(Request& r, int& err);
// Gives the request's memory back to the worker (buffers, file, counters).
void release_request(Request& r);
// close(2) of a file being served, logged if it fails.
void close_file(Connection& c, int fd);
// Gives back the file the response sends (r.fd): closed, or its
// open_file_cache entry released.
void release_file(Request& r);

// ---- read_request.cc ------------------------------------------------------------
void process_request_line(Request& r);
void read_request_handler(Event& rev);

// ---- request.cc --------------------------------------------------------------------
void process_request(Request& r);
// Ends the request once its response is sent (or it failed): access log,
// counters, then keep-alive / lingering close / close.
void finalize_request(Request& r);
// Answers `status` with the built-in (or error_page) response.
void finalize_error(Request& r, int status);
// Closes the connection because of `status` without answering (408, 499...):
// the access log records it.
void terminate_request(Request& r, int status);
// Sets r.uri to `uri` (which must not lie in the request's URI buffer),
// keeping the arguments: the URI of an internal redirect. False when it does
// not fit large_client_header_buffers' size or no buffer could be had.
bool set_request_uri(Request& r, std::string_view uri);
// The same for "uri[?args]": the arguments become those after its '?' (none
// without one, as nginx's internal redirects).
bool set_request_uri_and_args(Request& r, std::string_view target);
// A buffer of at least `size` bytes for the Location the request answers
// with (a `return` redirect, auto_redirect), kept as r.location_mem until the
// request ends; the Location it held before is being replaced. Null when no
// buffer could be had.
char* location_memory(Request& r, std::size_t size);
// The engine's own steps (phases.h): the location for r.uri, and the
// location's content handler.
int find_config_handler(Request& r);
// The connection writes its error messages to the error_log of `loc`'s level
// (nginx's ngx_http_set_connection_log): the server's once the server is
// chosen, the location's once the location is.
void use_error_log(Connection& c, const HttpLocConf& loc);
int location_content_handler(Request& r);
// The request's read handler while a response is written (nginx's
// ngx_http_block_reading).
void block_reading(Request& r);

// nginx's internal statuses for TLS clients, answered as 400 with a page
// that says why, and the connection closed.
inline constexpr int kStatusCertError = 495;  // the client certificate failed verification
inline constexpr int kStatusNoCert = 496;     // ssl_verify_client on, none sent
inline constexpr int kStatusPlainHttp = 497;  // plain HTTP on a TLS port

// ---- response.cc ------------------------------------------------------------------
// Statuses after which the connection is closed (nginx's special responses).
bool status_closes(int status);
std::string_view reason_phrase(int status);
// The "Server:" line (with its CRLF) every HTTP/1 response head carries,
// with the version unless server_tokens is off.
std::string_view server_field(const HttpLocConf& loc);
// Sends "100 Continue" when the client asked for it (Expect: 100-continue)
// and it was not sent yet: the one place it is written, for the discarded
// body and the proxied one alike. False when the client connection failed.
bool send_continue(Request& r);
// Memory for a response head of at most `need` bytes, set as r.hbuf (empty):
// the request's inline buffer, or a worker buffer kept in r.big_header;
// nullptr if none could be had.
char* head_memory(Request& r, std::size_t need);
// HTTP/1's head writer, the end of the header filter chain (filters.h):
// formats the status line and r.headers_out into r.hbuf (keep-alive decided
// here); false if no buffer could be had.
bool write_header(Request& r);
// The framing of a body of `length` bytes (-1: unknown) to this client:
// Content-Length, chunked (HTTP/1.1, chunked_transfer_encoding on), or the
// end of the connection. The one place it is chosen: the head writer and the
// proxy both ask.
BodyFraming body_framing(const Request& r, std::int64_t length);

// ---- writer.cc ----------------------------------------------------------------------
// The static and generated responses' producer: r.bbuf (memory, or a file
// range; empty for none) goes through output_filter as the whole body; the
// request is finished when it is sent.
void send_response(Request& r);
// The request's write handler while such a response drains.
void write_handler(Request& r);
// limit_rate / limit_rate_after for every response HTTP/1 writes (static,
// generated, proxied): the bytes it may send now, -1 when unlimited. 0: none
// yet; the client's write event is then `delayed` with a timer for when the
// next byte is due, and only that timer resumes the writer (a write event
// that comes meanwhile is ignored, and a send_timeout must not be set).
off_t rate_allowance(Request& r);
// The built-in error page body for `status` ("" for statuses without one).
// `tokens` false: the page without the version (server_tokens off).
std::string_view special_body(int status, bool tokens = true);
// Prepares and sends the built-in page for `status` (no error_page lookup).
void send_special(Request& r, int status);

// ---- static_file.cc ----------------------------------------------------------------
int static_handler(Request& r, std::string_view path, std::string_view extension);
class PhaseEngine;
// The static module's content phase handler.
void add_static_phase(PhaseEngine& engine);
// The media type of `ext` by the location's types, else its default_type.
std::string_view content_type_for(const HttpLocConf& loc, std::string_view ext);
// Opens `name` (NUL-terminated) through loc's open_file_cache when it has
// one, else directly (disable_symlinks applies either way); `drop` gives
// back what it handed out.
void open_file(Request& r, const HttpLocConf& loc, std::string_view name, OpenFileInfo& info,
               FileRef& ref);
void drop(Request& r, FileRef& ref);

// ---- status.cc ------------------------------------------------------------------
// The content handlers of stub_status and metrics.
extern const ContentHandler kStubStatusContent;
extern const ContentHandler kMetricsContent;

}  // namespace vigil::http
