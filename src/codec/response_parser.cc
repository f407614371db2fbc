// The status line machine and the framing rules of a response (RFC 9112
// §4, §6.1, §6.3); field lines go through the request parser's field machine.
#include "codec/response_parser.h"

#include "codec/chars.h"
#include "codec/header_check.h"
#include "codec/tokens.h"

namespace vigil::http {
namespace {

enum State : std::uint8_t {
  kName,  // inside "HTTP/"
  kMajor,
  kDot,
  kMinor,
  kSp,  // the SP after the version
  kStatus1,
  kStatus2,
  kStatus3,
  kAfterStatus,  // SP before the reason, or the line end
  kReason,
  kLf,
  kFields,
  kDone,
  kError,
};

constexpr char kHttpName[] = "HTTP/";

}  // namespace

ResponseParser::ResponseParser(std::uint32_t max_line)
    : max_line_(max_line == 0 ? 1 : max_line), fields_(ParserLimits{max_line_, max_line_}) {
  fields_.start_fields();
}

void ResponseParser::reset() {
  *this = ResponseParser(max_line_);
}

ResponseParse ResponseParser::fail(const char* why) {
  state_ = kError;
  error_ = why;
  return ResponseParse::kInvalid;
}

ResponseParse ResponseParser::parse_status_line(std::string_view in, std::size_t& used,
                                                ResponseHead& head) {
  used = 0;
  if (state_ == kError) return ResponseParse::kInvalid;
  if (state_ >= kFields) return fail("status line parsed twice");
  const char* p = in.data();
  const std::size_t n = in.size();
  for (std::size_t i = 0; i < n; ++i) {
    const char c = p[i];
    used = i;
    if (len_ >= max_line_) return fail("too long status line");
    ++len_;
    switch (state_) {
      case kName:
        if (c != kHttpName[len_ - 1]) return fail("invalid status line");
        if (len_ == sizeof kHttpName - 1) state_ = kMajor;
        break;
      case kMajor:
        if (!chars::is_digit(c)) return fail("invalid HTTP version");
        major_ = c - '0';
        state_ = kDot;
        break;
      case kDot:
        if (c != '.') return fail("invalid HTTP version");
        state_ = kMinor;
        break;
      case kMinor:
        if (!chars::is_digit(c)) return fail("invalid HTTP version");
        minor_ = c - '0';
        state_ = kSp;
        break;
      case kSp:
        if (c != ' ') return fail("invalid status line");
        state_ = kStatus1;
        break;
      case kStatus1:
      case kStatus2:
      case kStatus3:
        if (!chars::is_digit(c)) return fail("invalid status code");
        status_ = status_ * 10 + (c - '0');
        state_ = static_cast<State>(state_ + 1);
        break;
      case kAfterStatus:
        // "HTTP/1.1 200\r\n" (no SP, no reason) is common enough to accept:
        // the reason phrase carries no meaning (RFC 9112 §4).
        if (c == ' ') {
          reason_start_ = len_;
          state_ = kReason;
        } else if (c == '\r') {
          reason_start_ = len_ - 1;
          state_ = kLf;
        } else if (c == '\n') {
          reason_start_ = len_ - 1;
          used = i + 1;
          goto done;
        } else {
          return fail("invalid status code");
        }
        break;
      case kReason:
        if (c == '\r') {
          state_ = kLf;
        } else if (c == '\n') {
          used = i + 1;
          goto done;
        } else if (c != '\t' && !chars::is_field_char(c)) {
          return fail("invalid character in reason phrase");
        }
        break;
      case kLf:
        if (c != '\n') return fail("bare CR in status line");
        used = i + 1;
        goto done;
      default:
        return fail("parser misuse");
    }
  }
  used = n;
  return ResponseParse::kAgain;

done : {
  const char* line = p + used - len_;
  // The line end is one or two octets; the reason runs up to it.
  std::uint32_t end = len_ - 1;
  if (end > 0 && line[end - 1] == '\r') --end;
  if (reason_start_ > end) reason_start_ = end;
  if (major_ != 1) return fail("unsupported HTTP version");
  if (status_ < 100 || status_ > 599) return fail("invalid status code");
  head = ResponseHead{};
  head.version = minor_ == 0 ? 1000 : 1001;
  head.status = status_;
  head.reason = {line + reason_start_, end - reason_start_};
  len_ = 0;
  state_ = kFields;
  return ResponseParse::kOk;
}
}

ResponseParse ResponseParser::parse_header(std::string_view in, std::size_t& used,
                                           HeaderField& field) {
  used = 0;
  if (state_ == kError) return ResponseParse::kInvalid;
  if (state_ == kDone) return ResponseParse::kHeadersDone;
  if (state_ != kFields) return fail("header before status line");
  ParseStatus st = fields_.parse_header(in, used, field);
  switch (st) {
    case ParseStatus::kAgain:
      return ResponseParse::kAgain;
    case ParseStatus::kHeadersDone:
      state_ = kDone;
      return ResponseParse::kHeadersDone;
    case ParseStatus::kOk:
      break;
    case ParseStatus::kHeaderTooLong:
      return fail("too long header line");
    default:
      return fail(fields_.error());
  }
  switch (field.id) {
    case HeaderId::kContentLength:
      if (has_content_length_) return fail("duplicate Content-Length");
      has_content_length_ = true;
      content_length_ = parse_content_length(field.value);
      if (content_length_ < 0) return fail("invalid Content-Length");
      break;
    case HeaderId::kTransferEncoding: {
      has_transfer_encoding_ = true;
      ListReader r(field.value);
      std::string_view coding;
      while (r.next(coding)) {
        const bool chunked = iequals(coding, "chunked");
        if (chunked && te_chunked_) te_chunked_twice_ = true;
        te_chunked_ = te_chunked_ || chunked;
        te_last_chunked_ = chunked;
        te_other_ = te_other_ || !chunked;
      }
      break;
    }
    case HeaderId::kConnection: {
      ListReader r(field.value);
      std::string_view option;
      while (r.next(option)) {
        if (iequals(option, "close")) close_ = true;
        if (iequals(option, "keep-alive")) keep_alive_ = true;
        if (iequals(option, "upgrade")) upgrade_token_ = true;
      }
      break;
    }
    case HeaderId::kUpgrade:
      upgrade_field_ = true;
      break;
    default:
      break;
  }
  return ResponseParse::kOk;
}

ResponseParse ResponseParser::finish(ResponseHead& head, bool head_request) {
  if (state_ != kDone) return fail("header section not complete");
  if (has_content_length_ && has_transfer_encoding_) {
    // RFC 9112 §6.3 (3) would let Transfer-Encoding win; a proxy that
    // forwards such a response lets the next hop choose otherwise.
    return fail("both Content-Length and Transfer-Encoding");
  }
  if (te_chunked_twice_) return fail("chunked applied twice");
  // A coding other than chunked would reach the client still applied, its
  // name (hop-by-hop) gone: the body taken for the content (nginx: 502).
  if (te_other_ || (has_transfer_encoding_ && !te_last_chunked_)) {
    return fail("unknown Transfer-Encoding");
  }
  head.connection_close = close_;
  head.connection_upgrade = upgrade_token_;
  head.has_upgrade = upgrade_field_;
  head.content_length = content_length_;
  // RFC 9112 §9.3: 1.1 persists unless "close"; 1.0 only with "keep-alive".
  head.keep_alive = head.version == 1001 ? !close_ : keep_alive_ && !close_;

  const int s = head.status;
  if (head_request || (s >= 100 && s < 200) || s == 204 || s == 304) {
    head.body = BodyKind::kNone;
  } else if (has_transfer_encoding_) {
    head.body = BodyKind::kChunked;  // exactly "chunked" (any other coding is refused above)
  } else if (has_content_length_) {
    head.body = BodyKind::kLength;
  } else {
    head.body = BodyKind::kClose;
  }
  if (head.body == BodyKind::kClose) head.keep_alive = false;
  return ResponseParse::kOk;
}

}  // namespace vigil::http
