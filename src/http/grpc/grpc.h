#pragma once
// gRPC proxying (nginx's ngx_http_grpc_module): HTTP/2 to the backend on the
// upstream core (http/upstream/upstream.h), one stream per request, framed
// here with nghttp2's HPACK decoder (the encoder is ours: literal fields,
// no dynamic table). The core connects, retries, relays and finishes; this
// module fills its protocol table:
//
//   create_request     the connection preface, then the HEADERS frames
//                      (:method, :scheme, :path, :authority, the client's
//                      fields less the hop-by-hop ones, grpc_set_header)
//                                                           grpc_request.cc
//   attach             the stream id on the connection: 1 on a fresh one,
//                      the next odd one on a kept-alive one (the preface
//                      skipped)                               grpc.cc
//   body_output        the body as DATA frames within the backend's
//                      flow-control windows, with control frames between
//                                                           grpc_request.cc
//   process_header     frames up to the response HEADERS: SETTINGS (acked),
//                      PING (acked), WINDOW_UPDATE, RST_STREAM, GOAWAY
//                                                           grpc_frames.cc
//   input_filter       DATA payload moved down in place (the frame headers
//                      and padding taken off); the trailing HEADERS become
//                      the response's trailers; END_STREAM ends the body
//                                                           grpc_frames.cc
//   control_output     SETTINGS/PING acknowledgements, WINDOW_UPDATE
//                                                           grpc_request.cc
//
// Per connection (kept with it in the keepalive cache, as nginx keeps
// ngx_http_grpc_conn_t in the connection's pool): the last stream id, the
// backend's initial window and frame size, the connection's send window
// (grpc.cc, a table per worker indexed by the connection's slot).
// Per request: a GrpcState from the worker's buffer cache, and two worker
// buffers (the request head, the decoded response fields).

#include <cstddef>
#include <cstdint>

#include "http/core/request.h"
#include "http/grpc/grpc_conf.h"
#include "http/upstream/upstream.h"

struct nghttp2_hd_inflater;

namespace vigil::http::grpc {

using upstream_core::Upstream;

inline constexpr std::size_t kPrefaceLen = 24 + 9 + 18 + 9 + 4;  // preface, SETTINGS, WINDOW_UPDATE
inline constexpr std::int64_t kMaxWindow = 0x7fffffff;
inline constexpr std::int64_t kDefaultWindow = 65535;
inline constexpr std::uint32_t kDefaultFrame = 16384;
inline constexpr std::uint32_t kMaxTrailers = 32;

// What is kept per backend connection.
struct GrpcConnState {
  std::uint64_t number = 0;  // the connection's serial number: this entry is its
  std::uint32_t last_stream_id = 0;
  std::int64_t init_window = kDefaultWindow;  // the backend's SETTINGS_INITIAL_WINDOW_SIZE
  std::int64_t send_window = kDefaultWindow;  // the connection's, to the backend
  std::int64_t recv_window = kMaxWindow;      // the connection's, from the backend
  std::uint32_t max_frame = kDefaultFrame;    // the backend's SETTINGS_MAX_FRAME_SIZE
};

enum class FrameStage : std::uint8_t { kHeader, kPayload };

struct GrpcState : Upstream {
  const GrpcConf& gconf() const { return static_cast<const GrpcConf&>(*conf); }

  GrpcConnState* conn = nullptr;  // attach
  std::uint32_t id = 0;           // the stream
  std::int64_t send_window = kDefaultWindow;
  std::int64_t recv_window = kMaxWindow;
  std::uint32_t headers_off = 0;  // the HEADERS frames in head, after the preface

  // Request body framing.
  char data_head[9];
  Buf data_head_buf;
  Buf data_buf;  // a view of the body buffer: one DATA frame's payload
  bool end_sent = false;

  // Control frames waiting to go (SETTINGS ACK, PING ACK, WINDOW_UPDATE),
  // and the piece of them in flight.
  char ctl[256];
  std::uint32_t ctl_len = 0;
  char ctl_flight[256];
  Buf ctl_buf;

  // The response's frames, parsed as they arrive.
  FrameStage fstage = FrameStage::kHeader;
  std::uint8_t fh[9];
  std::uint8_t fh_len = 0;
  std::uint32_t frame_rest = 0;  // payload bytes of the current frame not yet seen
  std::uint8_t frame_type = 0;
  std::uint8_t frame_flags = 0;
  std::uint32_t frame_stream = 0;
  std::uint32_t skip_head = 0;  // priority / pad-length bytes before the content
  std::uint32_t padding = 0;    // padding bytes at the frame's end
  bool pad_pending = false;     // the pad length byte comes next
  std::uint8_t small[8];        // a control frame's payload, gathered
  std::uint32_t small_len = 0;
  bool in_headers = false;  // a header block is being read (CONTINUATION follows)
  bool head_done = false;
  bool end_stream = false;
  bool trailers_done = false;
  nghttp2_hd_inflater* inflater = nullptr;

  // Decoded fields (u.fields, trailers) point into this worker buffer.
  char* fields_mem = nullptr;
  std::uint32_t fields_cap = 0;
  std::uint32_t fields_used = 0;
  bool status_seen = false;
  HeaderField trailers[kMaxTrailers];
  std::uint32_t ntrailers = 0;

  // grpc_pass with variables: the :authority its URL (in u.url_mem) gives.
  std::string_view authority;
};

// ---- grpc.cc ------------------------------------------------------------------------
extern const ContentHandler kContent;
int start(Request& r);
// The table entry of `c` (a backend connection); `fresh`: it is new, the
// entry is made anew.
GrpcConnState* conn_state(Connection& c, bool fresh);

// ---- grpc_request.cc ----------------------------------------------------------------
int create_request(Upstream& u);
std::size_t body_output(Upstream& u, Chain* out, std::size_t k);
Buf* control_output(Upstream& u);
// Queues a control frame (false: no room, the connection is in trouble).
bool queue_frame(GrpcState& gs, std::uint8_t type, std::uint8_t flags, std::uint32_t stream,
                 const void* payload, std::uint32_t len);

// ---- grpc_frames.cc -----------------------------------------------------------------
upstream_core::HeadResult process_header(Upstream& u, Buf& b);
bool input_filter_init(Upstream& u);
bool input_filter(Upstream& u, Buf& b, char* p, std::size_t n);

}  // namespace vigil::http::grpc
