#pragma once
// The backend's HTTP/2 frames as the gRPC upstream reads them (nginx's
// ngx_http_grpc_process_header and ngx_http_grpc_filter), apart from the
// request and the connection: FrameParser holds the frame and stream state
// and asks its owner, through a few hooks, to log an error, to send the
// control frames it queued, and to keep the decoded fields. GrpcState
// (grpc.h) is its owner in the server; tests/fuzz/grpc_frames_fuzz.cc feeds
// it alone.
//
// parse() takes the bytes as they arrive, whatever the reads cut: frame
// heads, SETTINGS (acknowledged), PING (acknowledged), WINDOW_UPDATE,
// RST_STREAM, GOAWAY; header blocks through nghttp2's HPACK decoder, piece
// by piece; each DATA payload of our stream moved down over the frame heads
// and padding before it, so the buffer ends up holding the body alone.

#include <cstddef>
#include <cstdint>
#include <string_view>

struct nghttp2_hd_inflater;

namespace vigil::http::grpc {

inline constexpr std::int64_t kMaxWindow = 0x7fffffff;
inline constexpr std::int64_t kDefaultWindow = 65535;
inline constexpr std::uint32_t kDefaultFrame = 16384;

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
// kHead: the response head is complete (parse stops after it).
enum class FrameStep : std::uint8_t { kMore, kHead, kError };

class FrameParser {
 public:
  // Parses [p, end): the DATA payload of our stream is moved down to w
  // (w <= p throughout). Stops after the response head (kHead, p after it);
  // kError once the frames are wrong (logged through frame_error).
  FrameStep parse(char*& p, char* end, char*& w);
  // Queues a control frame (false: no room, the connection is in trouble).
  bool queue_frame(std::uint8_t type, std::uint8_t flags, std::uint32_t stream, const void* payload,
                   std::uint32_t len);
  // A new attempt: the frame state of the last one dropped.
  void reset_frames();
  // The HPACK decoder freed.
  void free_inflater();

  GrpcConnState* conn = nullptr;  // set before parse()
  std::uint32_t id = 0;           // the stream
  std::int64_t send_window = kDefaultWindow;
  std::int64_t recv_window = kMaxWindow;

  // Control frames waiting to go (SETTINGS ACK, PING ACK, WINDOW_UPDATE).
  char ctl[256];
  std::uint32_t ctl_len = 0;

  // The response as far as it is parsed.
  int status = 0;                    // :status of the final head
  std::int64_t content_length = -1;  // its Content-Length
  // The body still to come by the Content-Length (-1: no length): more
  // DATA, or an end before it, is an error (nginx's ctx->length).
  std::int64_t body_rest = -1;
  bool head_done = false;
  bool end_stream = false;
  bool trailers_done = false;
  bool frames_done = false;  // the stream ended (END_STREAM seen, or the trailers)
  bool keep_conn = true;     // false after an error or GOAWAY: not kept alive

  // The frame being read.
  FrameStage fstage = FrameStage::kHeader;
  std::uint8_t fh[9];
  std::uint8_t fh_len = 0;

 protected:
  FrameParser() = default;
  virtual ~FrameParser() = default;
  FrameParser(const FrameParser&) = delete;
  FrameParser& operator=(const FrameParser&) = delete;

  // The frames are wrong: `what` is logged (nginx's words).
  virtual void frame_error(const char* what) = 0;
  // Control frames were queued: they should go soon.
  virtual void control_queued() = 0;
  // The stream's or the connection's send window grew.
  virtual void window_opened() = 0;
  // Keeps a decoded field of the head (or, `trailer`, of the trailers);
  // the views die with the call. Null, or the error to log.
  virtual const char* store_field(std::string_view name, std::string_view value, bool trailer) = 0;
  // The fields of an interim response (1xx) are dropped.
  virtual void drop_fields() = 0;

 private:
  FrameStep fail(const char* what);
  FrameStep add_field(std::string_view name, std::string_view value);
  FrameStep inflate(const std::uint8_t* in, std::size_t n, bool final);
  void open_windows(bool stream_too);
  FrameStep setting(std::uint16_t setting_id, std::uint32_t v);
  FrameStep frame_start();
  FrameStep frame_end();

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
  bool status_seen = false;
  bool rst_seen = false;  // RST_STREAM NO_ERROR after the end (a second is an error)
  nghttp2_hd_inflater* inflater = nullptr;
};

}  // namespace vigil::http::grpc
