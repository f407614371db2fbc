// libFuzzer target for the gRPC upstream's frame parser (http/grpc/
// grpc_frames.h): the input is what a backend sends on its connection after
// our preface, parsed for stream 1 as the upstream does — up to the
// response head, then the body — fed whole and in pieces (the first byte
// chooses the piece size). Traps when the pieces change the outcome (the
// head, the fields, the body, the trailers, the error), when the body moved
// down overtakes the input, when the body is not the DATA payload of stream
// 1, or when a window or the control-frame queue goes out of bounds.
//
// Seeds: tests/fuzz/corpus/grpc_frames_fuzz/ (made by make_grpc_seeds.py).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.h"
#include "http/grpc/grpc_frames.h"

namespace {

using vigil::fuzz::check;
using vigil::http::grpc::FrameParser;
using vigil::http::grpc::FrameStep;
using vigil::http::grpc::GrpcConnState;

struct Outcome {
  bool error = false;
  bool head = false;
  int status = 0;
  std::int64_t content_length = -1;
  bool end_stream = false;
  bool frames_done = false;
  bool keep_conn = true;
  std::string fields;    // "name: value\n" each
  std::string trailers;  // the same
  std::string body;
  std::string ctl;  // every control frame queued, in order
  std::uint32_t errors = 0;
  bool operator==(const Outcome&) const = default;
};

class Parser final : public FrameParser {
 public:
  explicit Parser(Outcome& out) : out_(out) {
    conn = &cs_;
    id = 1;
    cs_.last_stream_id = 1;
  }
  ~Parser() override { free_inflater(); }
  Parser(const Parser&) = delete;
  Parser& operator=(const Parser&) = delete;

  void take_ctl() {
    out_.ctl.append(ctl, ctl_len);
    ctl_len = 0;
  }
  void check_bounds() const {
    check(ctl_len <= sizeof ctl, "control queue within its buffer");
    check(send_window <= vigil::http::grpc::kMaxWindow, "stream send window at most 2^31-1");
    check(cs_.send_window <= vigil::http::grpc::kMaxWindow, "conn send window at most 2^31-1");
    check(cs_.max_frame >= 16384 && cs_.max_frame <= 16777215, "max frame size in range");
  }

 protected:
  void frame_error(const char* what) override {
    check(what != nullptr && *what != '\0', "an error says what");
    ++out_.errors;
  }
  void control_queued() override {}
  void window_opened() override {}
  const char* store_field(std::string_view name, std::string_view value, bool trailer) override {
    std::string& to = trailer ? out_.trailers : out_.fields;
    if (to.size() > 65536) return "upstream sent too big header";
    to.append(name).append(": ").append(value).push_back('\n');
    return nullptr;
  }
  void drop_fields() override { out_.fields.clear(); }

 private:
  Outcome& out_;
  GrpcConnState cs_;
};

Outcome run(std::string_view in, std::size_t step) {
  Outcome out;
  Parser ps(out);
  std::vector<char> buf(in.begin(), in.end());
  char* const base = buf.data();
  std::size_t pos = 0;
  while (pos < buf.size() && !out.error) {
    const std::size_t n = step == 0 ? buf.size() - pos : std::min(step, buf.size() - pos);
    char* p = base + pos;
    char* const end = p + n;
    while (p < end) {
      char* const from = p;
      char* w = p;
      const FrameStep st = ps.parse(p, end, w);
      check(p >= from && p <= end, "parse stays in its input");
      check(w >= from && w <= p, "the body moved down stays behind the input");
      if (!out.head) check(w == from, "no body before the head");
      out.body.append(from, static_cast<std::size_t>(w - from));
      ps.check_bounds();
      if (st == FrameStep::kError) {
        check(out.errors > 0, "an error is reported");
        out.error = true;
        break;
      }
      if (st == FrameStep::kHead) {
        check(!out.head, "one head");
        check(ps.head_done && ps.status >= 200, "a final head has a status");
        out.head = true;
        out.status = ps.status;
        out.content_length = ps.content_length;
        continue;
      }
      check(p == end, "parse takes all it is given unless it stops");
    }
    pos += n;
  }
  // The queue is left to fill (the server's drains it as the sends go,
  // which depends on the socket): the cuts must not change it.
  ps.take_ctl();
  out.end_stream = ps.end_stream;
  out.frames_done = ps.frames_done;
  out.keep_conn = ps.keep_conn;
  if (out.frames_done) check(out.head && ps.end_stream, "the stream ends after its head");
  if (ps.trailers_done) check(out.frames_done, "trailers end the stream");
  return out;
}

// The DATA payload of stream 1 after the head, read independently of the
// parser from well-formed input (frames of length <= 16384 only).
std::string data_of_stream1(std::string_view in, bool& simple) {
  std::string body;
  simple = true;
  bool head = false;
  std::size_t pos = 0;
  while (pos + 9 <= in.size()) {
    const auto* h = reinterpret_cast<const unsigned char*>(in.data() + pos);
    const std::uint32_t len = (std::uint32_t{h[0]} << 16) | (std::uint32_t{h[1]} << 8) | h[2];
    const std::uint32_t sid = ((std::uint32_t{h[5]} << 24) | (std::uint32_t{h[6]} << 16) |
                               (std::uint32_t{h[7]} << 8) | h[8]) &
                              0x7fffffff;
    if (pos + 9 + len > in.size()) {
      simple = false;  // a frame cut short: part of its payload may be taken
      return body;
    }
    std::string_view payload = in.substr(pos + 9, len);
    if (h[3] == 0x1 && sid == 1) head = true;
    if (h[3] == 0x0 && sid == 1 && head) {
      if (h[4] & 0x8) {
        if (payload.empty() ||
            std::size_t{static_cast<unsigned char>(payload[0])} + 1 > payload.size()) {
          simple = false;
          return body;
        }
        payload = payload.substr(1, payload.size() - 1 - static_cast<unsigned char>(payload[0]));
      }
      body.append(payload);
    }
    pos += 9 + len;
  }
  return body;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::size_t step = data[0] % 64;  // 0: all at once
  std::string_view in(reinterpret_cast<const char*>(data + 1), size - 1);
  const Outcome whole = run(in, 0);
  const Outcome pieces = run(in, step == 0 ? 1 : step);
  check(whole == pieces, "the reads' cuts do not change the outcome");
  if (!whole.error) {
    bool simple = false;
    const std::string expect = data_of_stream1(in, simple);
    if (simple) check(whole.body == expect, "the body is stream 1's DATA payload");
  }
  return 0;
}
