// The gRPC upstream's frame parser alone (http/grpc/grpc_frames.h): a
// backend's frames fed whole and cut at every byte give the same head,
// fields, body and trailers; padding is taken off whatever the cuts.
#include "http/grpc/grpc_frames.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace vigil::http::grpc {
namespace {

std::string frame(std::uint8_t type, std::uint8_t flags, std::uint32_t sid,
                  std::string_view payload) {
  std::string f;
  const auto len = static_cast<std::uint32_t>(payload.size());
  f.push_back(static_cast<char>(len >> 16));
  f.push_back(static_cast<char>(len >> 8));
  f.push_back(static_cast<char>(len));
  f.push_back(static_cast<char>(type));
  f.push_back(static_cast<char>(flags));
  f.push_back(static_cast<char>(sid >> 24));
  f.push_back(static_cast<char>(sid >> 16));
  f.push_back(static_cast<char>(sid >> 8));
  f.push_back(static_cast<char>(sid));
  f.append(payload);
  return f;
}

// ":status: 200" indexed, then "content-type: application/grpc" with the
// static table's name and a plain value.
const std::string kHead = std::string("\x88\x5f\x10", 3) + "application/grpc";
const std::string kTrailers = std::string("\x00\x0bgrpc-status\x01", 14) + "0";

class Parser final : public FrameParser {
 public:
  Parser() {
    conn = &cs_;
    id = 1;
  }
  ~Parser() override { free_inflater(); }
  Parser(const Parser&) = delete;
  Parser& operator=(const Parser&) = delete;

  std::string fields;
  std::string trailers;
  std::string errors;
  GrpcConnState cs_;

 protected:
  void frame_error(const char* what) override { errors += what; }
  void control_queued() override {}
  void window_opened() override {}
  const char* store_field(std::string_view name, std::string_view value, bool trailer) override {
    (trailer ? trailers : fields).append(name).append(": ").append(value).append("\n");
    return nullptr;
  }
  void drop_fields() override { fields.clear(); }
};

struct Result {
  std::string fields, body, trailers, errors;
  int status = 0;
  bool done = false;
};

// Feeds `in` in pieces of `step` bytes (0: at once), as the upstream does:
// the body is what parse() moves down.
Result feed(const std::string& in, std::size_t step) {
  Parser ps;
  Result res;
  std::vector<char> buf(in.begin(), in.end());
  std::size_t pos = 0;
  while (pos < buf.size()) {
    const std::size_t n = step == 0 ? buf.size() - pos : std::min(step, buf.size() - pos);
    char* p = buf.data() + pos;
    char* const end = p + n;
    while (p < end) {
      char* const from = p;
      char* w = p;
      const FrameStep st = ps.parse(p, end, w);
      res.body.append(from, static_cast<std::size_t>(w - from));
      if (st == FrameStep::kError) {
        res.errors = ps.errors;
        return res;
      }
    }
    pos += n;
  }
  res.fields = ps.fields;
  res.trailers = ps.trailers;
  res.status = ps.status;
  res.done = ps.frames_done;
  return res;
}

TEST(GrpcFrames, PaddingIsTakenOffWhereverTheReadsCut) {
  const std::string pad_headers = std::string(1, '\x04') + std::string("\x00\x00\x00\x00\x10", 5) +
                                  kHead + std::string(4, '\0');
  const std::string pad_data = std::string(1, '\x03') + "hello" + std::string(3, '\0');
  const std::string in =
      frame(0x1, 0x4 | 0x8 | 0x20, 1, pad_headers) + frame(0x0, 0x8, 1, pad_data) +
      frame(0x0, 0x8, 3, pad_data) +
      frame(0x1, 0x5 | 0x8, 1, std::string(1, '\x02') + kTrailers + std::string(2, '\0'));
  for (std::size_t step = 0; step <= in.size(); ++step) {
    const Result r = feed(in, step);
    EXPECT_EQ(r.errors, "") << "step " << step;
    EXPECT_EQ(r.status, 200) << "step " << step;
    EXPECT_EQ(r.fields, "content-type: application/grpc\n") << "step " << step;
    EXPECT_EQ(r.body, "hello") << "step " << step;
    EXPECT_EQ(r.trailers, "grpc-status: 0\n") << "step " << step;
    EXPECT_TRUE(r.done) << "step " << step;
  }
}

TEST(GrpcFrames, ATooLongPaddingIsAnError) {
  const std::string in =
      frame(0x1, 0x4, 1, kHead) + frame(0x0, 0x8, 1, std::string(1, '\x05') + "abcd");
  const Result r = feed(in, 0);
  EXPECT_EQ(r.errors, "upstream sent http2 frame with too long padding");
}

// RFC 9113 §6.9.1: a window past 2^31-1 is an error, and the window stays
// as it was (the connection's state is not left beyond the largest).
TEST(GrpcFrames, AWindowPastTheLargestIsAnErrorAndIsNotTaken) {
  for (std::uint32_t sid : {0u, 1u}) {
    Parser ps;
    std::string in = frame(0x8, 0, sid, std::string("\x7f\xff\xff\xff", 4));
    char* p = in.data();
    char* w = p;
    EXPECT_EQ(ps.parse(p, in.data() + in.size(), w), FrameStep::kError);
    EXPECT_EQ(ps.errors, "upstream sent too large window update");
    EXPECT_EQ(ps.cs_.send_window, kDefaultWindow);
    EXPECT_EQ(ps.send_window, kDefaultWindow);
  }
  // A SETTINGS_INITIAL_WINDOW_SIZE that takes the stream's window past it.
  Parser ps;
  std::string in = frame(0x8, 0, 1, std::string("\x7f\xff\x00\x00", 4)) +
                   frame(0x4, 0, 0, std::string("\x00\x04\x00\x01\x00\x00", 6));
  char* p = in.data();
  char* w = p;
  EXPECT_EQ(ps.parse(p, in.data() + in.size(), w), FrameStep::kError);
  EXPECT_EQ(ps.errors, "upstream sent too large initial window size");
  EXPECT_LE(ps.send_window, kMaxWindow);
}

}  // namespace
}  // namespace vigil::http::grpc
