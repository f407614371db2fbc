// The request line and field line state machines (RFC 9112 §2-§5).
//
// Both loops look at one octet at a time and keep only offsets into the
// unfinished line, so input split anywhere (even between CR and LF) parses
// exactly as if it had arrived whole.

#include "codec/parse.h"

#include <cstring>
#include <limits>

#include "codec/authority.h"
#include "codec/chars.h"

namespace vigil::http {
namespace {

enum State : std::uint8_t {
  // request line
  kStart,    // before the request line: empty lines are skipped here
  kStartLf,  // CR of an empty line seen
  kMethod,
  kTargetStart,
  kPath,
  kQuery,
  kAsterisk,
  kScheme,
  kSchemeSlash1,      // "scheme:" seen
  kSchemeSlash2,      // "scheme:/" seen
  kAuthority,         // absolute-form, after "//"
  kConnectAuthority,  // authority-form
  kVersion,           // inside "HTTP/"
  kSimpleSpaces,      // spaces after an HTTP/0.9 target: only the line end may follow
  kMajor,
  kDot,
  kMinor,
  kLineEnd,  // after the version: CR or LF
  kLf,       // CR seen, LF must follow (a bare CR is an error, RFC 9112 §2.2)
  // field lines
  kFieldStart,
  kFieldName,
  kFieldOws,  // after ':', before the value
  kFieldValue,
  kFieldLf,
  kEndLf,  // CR of the empty line seen
  kDone,
  kError,
};

constexpr char kHttpName[] = "HTTP/";

bool is_scheme_char(char c) {
  return chars::is_alpha(c) || chars::is_digit(c) || c == '+' || c == '-' || c == '.';
}

}  // namespace

int status_code(ParseStatus s) {
  switch (s) {
    case ParseStatus::kBadRequest:
      return 400;
    case ParseStatus::kRequestLineTooLong:
      return 414;
    case ParseStatus::kHeaderTooLong:
      return 431;
    case ParseStatus::kVersionNotSupported:
      return 505;
    case ParseStatus::kOk:
    case ParseStatus::kAgain:
    case ParseStatus::kHeadersDone:
      break;
  }
  return 0;
}

RequestParser::RequestParser(ParserLimits limits) : limits_(limits) {
  // A line always has at least its line end; a zero limit would refuse
  // everything before the first byte could be looked at.
  if (limits_.max_request_line == 0) limits_.max_request_line = 1;
  if (limits_.max_header_line == 0) limits_.max_header_line = 1;
}

void RequestParser::reset() {
  *this = RequestParser(limits_);
}

void RequestParser::start_fields() {
  *this = RequestParser(limits_);
  state_ = kFieldStart;
}

bool RequestParser::done() const {
  return state_ == kDone;
}

ParseStatus RequestParser::fail(ParseStatus status, const char* why) {
  state_ = kError;
  error_status_ = status;
  error_ = why;
  return status;
}

ParseStatus RequestParser::parse_request_line(std::string_view in, std::size_t& used,
                                              RequestLine& line) {
  used = 0;
  if (state_ == kError) return error_status_;
  if (state_ >= kFieldStart) return fail(ParseStatus::kBadRequest, "request line parsed twice");

  const char* p = in.data();
  const std::size_t n = in.size();
  // The line ended at its LF, octet i of `in`.
  auto complete = [&](std::size_t i) {
    used = i + 1;
    ParseStatus st = finish_request_line(p + used - len_, line);
    if (st != ParseStatus::kOk) return st;
    len_ = 0;
    // A simple request has no header section (RFC 1945 §4.1).
    state_ = http09_ ? kDone : kFieldStart;
    return ParseStatus::kOk;
  };
  // HTTP/0.9's simple request, "GET /path" without a version (RFC 1945
  // §4.1): its line ends at octet i, `at` in the line. nginx still answers
  // it, without a status line or header fields. kAgain: a CR, LF follows.
  auto simple_request_end = [&](std::size_t i, std::uint32_t at) {
    line_end_ = at;
    http09_ = true;
    if (p[i] == '\n') return complete(i);
    state_ = kLf;
    return ParseStatus::kAgain;
  };
  for (std::size_t i = 0; i < n; ++i) {
    const char c = p[i];
    used = i;  // on an error: the offset of the offending octet in `in`
    if (state_ >= kMethod) {
      if (len_ >= limits_.max_request_line) {
        return fail(ParseStatus::kRequestLineTooLong, "request line too long");
      }
      ++len_;
    }
    const std::uint32_t at = len_ - 1;  // offset of c in the line (inside the line)

    switch (state_) {
      case kStart:
        // RFC 9112 §2.2: a server SHOULD ignore empty lines received before the
        // request-line. They are bounded by the request line limit, so a
        // client cannot keep us busy with them forever.
        if (c == '\r' || c == '\n') {
          if (++skipped_ > limits_.max_request_line) {
            return fail(ParseStatus::kBadRequest, "too many empty lines before the request line");
          }
          // A bare LF is accepted as a line end (RFC 9112 §2.2).
          if (c == '\r') state_ = kStartLf;
        } else if (chars::is_tchar(c)) {
          len_ = 1;
          state_ = kMethod;
        } else {
          return fail(ParseStatus::kBadRequest, "invalid method");
        }
        break;

      case kStartLf:
        if (c != '\n') return fail(ParseStatus::kBadRequest, "bare CR before the request line");
        state_ = kStart;
        break;

      case kMethod:
        if (c == ' ') {
          method_end_ = at;
          method_ = method_from_token({p + i + 1 - len_, method_end_});
          state_ = kTargetStart;
        } else if (!chars::is_tchar(c)) {
          return fail(ParseStatus::kBadRequest, "invalid method");
        }
        break;

      case kTargetStart:
        if (method_ == Method::kConnect) {
          // CONNECT takes the authority-form and only it (RFC 9112 §3.2.3).
          if (!chars::is_target_char(c) || c == '/' || c == '?') {
            return fail(ParseStatus::kBadRequest, "CONNECT needs an authority-form target");
          }
          form_ = TargetForm::kAuthority;
          authority_start_ = at;
          state_ = kConnectAuthority;
        } else if (c == '/') {
          form_ = TargetForm::kOrigin;
          path_start_ = at;
          state_ = kPath;
        } else if (c == '*') {
          // RFC 9112 §3.2.4: the asterisk-form is only used with OPTIONS.
          if (method_ != Method::kOptions) {
            return fail(ParseStatus::kBadRequest, "asterisk-form target without OPTIONS");
          }
          form_ = TargetForm::kAsterisk;
          state_ = kAsterisk;
        } else if (chars::is_alpha(c)) {
          form_ = TargetForm::kAbsolute;
          state_ = kScheme;
        } else {
          // A second SP lands here too: separators are exactly one SP (we do
          // not take RFC 9112 §3's leniency for other whitespace).
          return fail(ParseStatus::kBadRequest, "invalid request target");
        }
        break;

      case kPath:
      case kQuery:
        if (c == ' ') {
          target_end_ = at;
          state_ = kVersion;
        } else if (c == '?' && state_ == kPath) {
          query_start_ = at;
          state_ = kQuery;
        } else if (c == '\r' || c == '\n') {
          target_end_ = at;
          if (ParseStatus st = simple_request_end(i, at); st != ParseStatus::kAgain) return st;
        } else if (!chars::is_target_char(c)) {
          return fail(ParseStatus::kBadRequest, "invalid character in request target");
        }
        break;

      case kAsterisk:
        if (c != ' ') return fail(ParseStatus::kBadRequest, "invalid asterisk-form target");
        target_end_ = at;
        state_ = kVersion;
        break;

      case kScheme:
        if (c == ':') {
          state_ = kSchemeSlash1;
        } else if (!is_scheme_char(c)) {
          return fail(ParseStatus::kBadRequest, "invalid request target");
        }
        break;

      case kSchemeSlash1:
      case kSchemeSlash2:
        // An http(s) absolute-URI always has an authority (RFC 9110 §4.2).
        if (c != '/') return fail(ParseStatus::kBadRequest, "absolute-form target without //");
        if (state_ == kSchemeSlash2) {
          authority_start_ = at + 1;
          state_ = kAuthority;
        } else {
          state_ = kSchemeSlash2;
        }
        break;

      case kAuthority:
        if (c == '\r' || c == '\n') {
          authority_end_ = at;
          path_start_ = at;
          target_end_ = at;
          if (ParseStatus st = simple_request_end(i, at); st != ParseStatus::kAgain) return st;
        } else if (c == '/' || c == '?' || c == ' ') {
          authority_end_ = at;
          path_start_ = at;
          if (c == '/') {
            state_ = kPath;
          } else if (c == '?') {
            query_start_ = at;
            state_ = kQuery;
          } else {
            target_end_ = at;
            state_ = kVersion;
          }
        } else if (!chars::is_target_char(c)) {
          return fail(ParseStatus::kBadRequest, "invalid character in request target");
        }
        break;

      case kConnectAuthority:
        if (c == ' ') {
          authority_end_ = at;
          target_end_ = at;
          state_ = kVersion;
        } else if (!chars::is_target_char(c) || c == '/' || c == '?') {
          return fail(ParseStatus::kBadRequest, "invalid authority-form target");
        }
        break;

      case kVersion: {
        // HTTP-name is case-sensitive (RFC 9112 §2.3).
        const std::uint32_t k = at - target_end_ - 1;
        if (k == 0 && (c == '\r' || c == '\n')) {
          if (ParseStatus st = simple_request_end(i, at); st != ParseStatus::kAgain) return st;
          break;
        }
        if (k == 0 && c == ' ') {
          state_ = kSimpleSpaces;  // nginx takes "GET /  " as HTTP/0.9 too
          break;
        }
        if (c != kHttpName[k]) return fail(ParseStatus::kBadRequest, "invalid HTTP version");
        if (k == sizeof kHttpName - 2) state_ = kMajor;
        break;
      }

      case kSimpleSpaces:
        if (c == '\r' || c == '\n') {
          if (ParseStatus st = simple_request_end(i, at); st != ParseStatus::kAgain) return st;
        } else if (c != ' ') {
          // A version after more than one SP: one SP separates (RFC 9112 §3).
          return fail(ParseStatus::kBadRequest, "invalid HTTP version");
        }
        break;

      case kMajor:
        if (!chars::is_digit(c)) return fail(ParseStatus::kBadRequest, "invalid HTTP version");
        major_ = static_cast<std::uint8_t>(c - '0');
        state_ = kDot;
        break;

      case kDot:
        if (c != '.') return fail(ParseStatus::kBadRequest, "invalid HTTP version");
        state_ = kMinor;
        break;

      case kMinor:
        if (!chars::is_digit(c)) return fail(ParseStatus::kBadRequest, "invalid HTTP version");
        minor_ = static_cast<std::uint8_t>(c - '0');
        state_ = kLineEnd;
        break;

      case kLineEnd:
        if (c != '\r' && c != '\n') {
          // One DIGIT each side of the dot (RFC 9112 §2.3): "HTTP/1.10" and
          // trailing spaces are garbage.
          return fail(ParseStatus::kBadRequest, "invalid HTTP version");
        }
        line_end_ = at;
        if (c == '\r') {
          state_ = kLf;
          break;
        }
        [[fallthrough]];

      case kLf:
        if (c != '\n') return fail(ParseStatus::kBadRequest, "bare CR in the request line");
        return complete(i);

      default:
        return fail(ParseStatus::kBadRequest, "parser misuse");
    }
  }
  used = n;
  return ParseStatus::kAgain;
}

ParseStatus RequestParser::finish_request_line(const char* start, RequestLine& line) {
  line = RequestLine{};
  line.line = {start, line_end_};
  line.method_name = {start, method_end_};
  line.method = method_;
  line.form = form_;
  const std::uint32_t target_start = method_end_ + 1;
  line.target = {start + target_start, target_end_ - target_start};

  if (form_ == TargetForm::kAbsolute || form_ == TargetForm::kAuthority) {
    if (form_ == TargetForm::kAbsolute) {
      line.scheme = {start + target_start, authority_start_ - 3 - target_start};
    }
    Authority a;
    if (!parse_authority({start + authority_start_, authority_end_ - authority_start_},
                         form_ == TargetForm::kAuthority, a)) {
      return fail(ParseStatus::kBadRequest, "invalid host in request target");
    }
    line.host = a.host;
    line.port = a.port;
  }
  if (form_ == TargetForm::kOrigin || form_ == TargetForm::kAbsolute) {
    const std::uint32_t path_end = query_start_ != 0 ? query_start_ : target_end_;
    line.path = {start + path_start_, path_end - path_start_};
    if (query_start_ != 0) {
      line.has_query = true;
      line.query = {start + query_start_ + 1, target_end_ - query_start_ - 1};
    }
  }
  if (http09_) {
    line.version = 9;
    // Only GET has a simple request (RFC 1945 §4.1); nginx answers another
    // method 400, without a head as it answers HTTP/0.9. The line is filled
    // for that answer and its log.
    if (method_ != Method::kGet) {
      return fail(ParseStatus::kBadRequest, "invalid method in HTTP/0.9 request");
    }
    return ParseStatus::kOk;
  }
  // RFC 9110 §2.5 / §6.2: a 1.x request with a higher minor version is
  // processed as the highest 1.x we implement; another major version is 505.
  if (limits_.http2 && major_ == 2 && minor_ == 0) {
    line.version = 2000;
    return ParseStatus::kOk;
  }
  if (major_ != 1) return fail(ParseStatus::kVersionNotSupported, "unsupported HTTP version");
  line.version = minor_ == 0 ? 1000 : 1001;
  return ParseStatus::kOk;
}

ParseStatus RequestParser::parse_header(std::string_view in, std::size_t& used,
                                        HeaderField& field) {
  used = 0;
  if (state_ == kError) return error_status_;
  if (state_ == kDone) return ParseStatus::kHeadersDone;
  if (state_ < kFieldStart) return fail(ParseStatus::kBadRequest, "header before request line");

  const char* p = in.data();
  const std::size_t n = in.size();
  for (std::size_t i = 0; i < n; ++i) {
    const char c = p[i];
    used = i;  // on an error: the offset of the offending octet in `in`
    if (len_ >= limits_.max_header_line) {
      return fail(ParseStatus::kHeaderTooLong, "header line too long");
    }
    ++len_;

    switch (state_) {
      case kFieldStart:
        if (chars::is_tchar(c)) {
          state_ = kFieldName;
        } else if (c == '\r') {
          state_ = kEndLf;
        } else if (c == '\n') {
          used = i + 1;
          len_ = 0;
          state_ = kDone;
          return ParseStatus::kHeadersDone;
        } else if (chars::is_ows(c)) {
          // obs-fold, or whitespace between the start-line and the first
          // field: both may be rejected (RFC 9112 §5.2, §2.2) and we do.
          return fail(ParseStatus::kBadRequest, "folded header line");
        } else {
          return fail(ParseStatus::kBadRequest, "invalid header name");
        }
        break;

      case kFieldName:
        if (c == ':') {
          name_end_ = len_ - 1;
          value_start_ = value_end_ = len_;
          state_ = kFieldOws;
        } else if (chars::is_ows(c)) {
          // RFC 9112 §5.1: whitespace between name and colon MUST be rejected
          // with 400 (it has been used for request smuggling).
          return fail(ParseStatus::kBadRequest, "whitespace before colon in header");
        } else if (!chars::is_tchar(c)) {
          return fail(ParseStatus::kBadRequest, "invalid header name");
        }
        break;

      case kFieldOws:
      case kFieldValue:
        if (chars::is_ows(c)) {
          if (state_ == kFieldOws) value_start_ = value_end_ = len_;
        } else if (c == '\r') {
          state_ = kFieldLf;
        } else if (c == '\n') {
          used = i + 1;
          return finish_field(p + used, field);
        } else if (chars::is_field_char(c)) {
          // RFC 9110 §5.5: field-vchar; NUL, CR and other CTLs are refused.
          value_end_ = len_;
          state_ = kFieldValue;
        } else {
          return fail(ParseStatus::kBadRequest, "invalid character in header value");
        }
        break;

      case kFieldLf:
        if (c != '\n') return fail(ParseStatus::kBadRequest, "bare CR in header");
        used = i + 1;
        return finish_field(p + used, field);

      case kEndLf:
        if (c != '\n') return fail(ParseStatus::kBadRequest, "bare CR in header");
        used = i + 1;
        len_ = 0;
        state_ = kDone;
        return ParseStatus::kHeadersDone;

      default:
        return fail(ParseStatus::kBadRequest, "parser misuse");
    }
  }
  used = n;
  return ParseStatus::kAgain;
}

// `next` is the octet after the field line's LF.
ParseStatus RequestParser::finish_field(const char* next, HeaderField& field) {
  const char* start = next - len_;
  field.name = {start, name_end_};
  field.value = {start + value_start_, value_end_ - value_start_};
  field.id = header_id(field.name);
  len_ = 0;
  state_ = kFieldStart;
  return ParseStatus::kOk;
}

bool RequestParser::move_pending(Buf& from, Buf& to) const {
  const char* begin = from.pos - len_;
  const auto n = static_cast<std::size_t>(from.last - begin);
  if (n > static_cast<std::size_t>(to.end - to.start)) return false;
  if (n != 0) std::memcpy(to.start, begin, n);
  to.pos = to.start + len_;
  to.last = to.start + n;
  from.pos = from.last;
  return true;
}

}  // namespace vigil::http
