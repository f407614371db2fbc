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
//                                                           grpc.cc
//   input_filter       DATA payload moved down in place (the frame headers
//                      and padding taken off); the trailing HEADERS become
//                      the response's trailers; END_STREAM ends the body
//                                                           grpc.cc
//                      (both through FrameParser, grpc_frames.h)
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
#include "http/grpc/grpc_frames.h"
#include "http/upstream/upstream.h"

namespace vigil::http::grpc {

using upstream_core::Upstream;

inline constexpr std::size_t kPrefaceLen = 24 + 9 + 18 + 9 + 4;  // preface, SETTINGS, WINDOW_UPDATE
inline constexpr std::uint32_t kMaxTrailers = 32;

// The frame parser's hooks go to the request: errors to its log, control
// frames and opened windows to the core's send, fields to a worker buffer.
struct GrpcState : Upstream, FrameParser {
  GrpcState() = default;
  ~GrpcState() override = default;
  GrpcState(const GrpcState&) = delete;
  GrpcState& operator=(const GrpcState&) = delete;

  const GrpcConf& gconf() const { return static_cast<const GrpcConf&>(*conf); }

  std::uint32_t headers_off = 0;  // the HEADERS frames in head, after the preface

  // Request body framing.
  char data_head[9];
  Buf data_head_buf;
  Buf data_buf;  // a view of the body buffer: one DATA frame's payload
  bool end_sent = false;

  // The piece of the control frames (FrameParser::ctl) in flight.
  char ctl_flight[256];
  Buf ctl_buf;

  // Decoded fields (u.fields, trailers) point into this worker buffer.
  char* fields_mem = nullptr;
  std::uint32_t fields_cap = 0;
  std::uint32_t fields_used = 0;
  HeaderField trailers[kMaxTrailers];
  std::uint32_t ntrailers = 0;

  // grpc_pass with variables: the :authority its URL (in u.url_mem) gives.
  std::string_view authority;

 protected:
  void frame_error(const char* what) override;
  void control_queued() override;
  void window_opened() override;
  const char* store_field(std::string_view name, std::string_view value, bool trailer) override;
  void drop_fields() override;
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

}  // namespace vigil::http::grpc
