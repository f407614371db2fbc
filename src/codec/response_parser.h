#pragma once
// A strict parser of HTTP/1.x response heads (RFC 9112 §4-§6), for what a
// backend sends the proxy. Like the request parser (parse.h) it is
// incremental over the caller's buffer, keeps no pointer into it, and hands
// back views into the buffer where an item completed; the field lines are
// parsed by the request parser's field machine (same grammar: obs-fold,
// whitespace before the colon, bare CR and control characters are refused).
//
//   ResponseParser p;  ResponseHead h;
//   status line:  p.parse_status_line(in, used, h)  kOk | kAgain | kInvalid
//   fields:       p.parse_header(in, used, f)       kOk (f filled) | kAgain | kHeadersDone |
//   kInvalid then:         p.finish(h, head_request)         kOk (h.body says how the body ends) |
//   kInvalid A 1xx other than 101 is followed by the real response: p.reset(), parse again.
//
// The framing checks are the ones a proxy needs against response smuggling:
// a second Content-Length (even an equal one), a Content-Length that is not
// 1*DIGIT, Content-Length with Transfer-Encoding, "chunked" twice, and any
// transfer coding other than "chunked" are all invalid (502 at the proxy).
// RFC 9112 §6.3 (4) would read a body whose codings do not end in chunked
// until the close; a proxy cannot take such a coding off, and the field
// naming it is hop-by-hop, so the client would get coded bytes as the
// content. nginx refuses it too.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "codec/parse.h"

namespace vigil::http {

enum class ResponseParse : std::uint8_t { kOk, kAgain, kHeadersDone, kInvalid };

enum class BodyKind : std::uint8_t {
  kNone,     // HEAD, 1xx, 204, 304: no body whatever the fields say
  kLength,   // Content-Length bytes
  kChunked,  // the chunked coding (chunked.h)
  kClose,    // until the backend closes the connection
};

struct ResponseHead {
  int version = 0;  // 1000 or 1001
  int status = 0;
  std::string_view reason;  // may be empty
  // Filled by finish():
  BodyKind body = BodyKind::kClose;
  std::int64_t content_length = -1;  // -1: none
  bool keep_alive = false;           // the connection may carry another request afterwards
  bool connection_close = false;
  bool connection_upgrade = false;  // "Connection: upgrade"
  bool has_upgrade = false;         // an Upgrade field
};

class ResponseParser {
 public:
  // `max_line`: longest status line or field line.
  explicit ResponseParser(std::uint32_t max_line = 65536);

  void reset();

  ResponseParse parse_status_line(std::string_view in, std::size_t& used, ResponseHead& head);
  ResponseParse parse_header(std::string_view in, std::size_t& used, HeaderField& field);
  // After kHeadersDone: decides how the body is delimited. `head_request`:
  // the request was HEAD (the response has no body).
  ResponseParse finish(ResponseHead& head, bool head_request);

  // Why kInvalid was returned, for the error log.
  const char* error() const { return error_; }

 private:
  ResponseParse fail(const char* why);

  std::uint32_t max_line_;
  std::uint8_t state_ = 0;
  std::uint32_t len_ = 0;
  std::uint32_t reason_start_ = 0;
  int status_ = 0;
  int major_ = 0;
  int minor_ = 0;
  RequestParser fields_;
  // Framing seen in the fields.
  std::int64_t content_length_ = -1;
  bool has_content_length_ = false;
  bool has_transfer_encoding_ = false;
  bool te_last_chunked_ = false;
  bool te_chunked_twice_ = false;
  bool te_chunked_ = false;
  bool te_other_ = false;  // a coding other than chunked
  bool close_ = false;
  bool keep_alive_ = false;
  bool upgrade_token_ = false;
  bool upgrade_field_ = false;
  const char* error_ = "";
};

}  // namespace vigil::http
