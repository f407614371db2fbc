// libFuzzer target for the response head parser (what a backend sends the
// proxy) and the chunked decoder behind it. Input: one control byte (the
// piece size), then the bytes. Traps when feeding in pieces disagrees with
// feeding everything at once, or when a view handed back lies outside the input.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "codec/chunked.h"
#include "codec/response_parser.h"

namespace {

using namespace vigil;        // NOLINT
using namespace vigil::http;  // NOLINT

void check(bool ok) {
  if (!ok) __builtin_trap();
}

struct Outcome {
  ResponseParse result = ResponseParse::kAgain;
  int status = 0;
  BodyKind body = BodyKind::kClose;
  std::int64_t length = -1;
  std::size_t fields = 0;
  std::size_t body_offset = 0;
  bool operator==(const Outcome&) const = default;
};

bool inside(std::string_view v, std::string_view in) {
  return v.empty() || (v.data() >= in.data() && v.data() + v.size() <= in.data() + in.size());
}

Outcome run(std::string_view in, std::size_t step, bool head_request) {
  Outcome out;
  ResponseParser p(1024);
  ResponseHead head;
  std::size_t pos = 0;
  std::size_t avail = step == 0 ? in.size() : std::min(step, in.size());
  bool line_done = false;
  for (;;) {
    std::string_view view = in.substr(pos, avail - pos);
    std::size_t used = 0;
    ResponseParse st;
    if (!line_done) {
      st = p.parse_status_line(view, used, head);
      check(used <= view.size());
      pos += used;
      if (st == ResponseParse::kOk) {
        check(inside(head.reason, in));
        out.status = head.status;
        line_done = true;
        continue;
      }
    } else {
      HeaderField f;
      st = p.parse_header(view, used, f);
      check(used <= view.size());
      pos += used;
      if (st == ResponseParse::kOk) {
        check(inside(f.name, in) && inside(f.value, in) && !f.name.empty());
        ++out.fields;
        continue;
      }
      if (st == ResponseParse::kHeadersDone) {
        out.result = p.finish(head, head_request);
        out.body = head.body;
        out.length = head.content_length;
        out.body_offset = pos;
        return out;
      }
    }
    if (st == ResponseParse::kInvalid) {
      out.result = st;
      return out;
    }
    if (avail == in.size()) return out;
    avail = std::min(in.size(), avail + step);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::size_t step = (data[0] & 0x1f) + 1;
  const bool head_request = (data[0] & 0x80) != 0;
  std::string copy(reinterpret_cast<const char*>(data + 1), size - 1);
  std::string_view in(copy);
  Outcome whole = run(in, 0, head_request);
  Outcome split = run(in, step, head_request);
  check(whole == split);
  if (whole.result == ResponseParse::kOk && whole.body == BodyKind::kChunked) {
    ChunkedParser cp;
    std::string_view rest = in.substr(whole.body_offset);
    while (!rest.empty()) {
      std::size_t used = 0;
      std::string_view d;
      ChunkStatus st = cp.parse(rest, used, d);
      check(used <= rest.size());
      if (st == ChunkStatus::kData) check(inside(d, rest) && !d.empty());
      rest.remove_prefix(used);
      if (st != ChunkStatus::kData) break;
    }
  }
  return 0;
}
