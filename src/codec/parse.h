#pragma once
// The HTTP/1.1 request-head parser (RFC 9112 §2-§5): an incremental state
// machine over the caller's buffer, resumable at any byte boundary.
//
// The parser never copies and never allocates. It keeps no pointer into the
// caller's memory either: the unfinished line is described by `pending()`, the
// number of bytes of it that precede the next unparsed byte, and offsets inside
// it. A completed item (the request line, one header field) is handed back as
// string_views into the buffer the line completed in.
//
// How the server drives it (nginx's ngx_http_process_request_line/_headers):
//
//   RequestParser p(limits);
//   RequestLine line;
//   for (;;) {                                  // phase 1: the request line
//     std::size_t used;
//     auto st = p.parse_request_line({b.pos, b.last}, used, line);
//     b.pos += used;
//     if (st == ParseStatus::kOk) break;
//     if (st != ParseStatus::kAgain) return finalize(status_code(st));    // 400 / 414 / 505
//     if (b.last == b.end && !p.move_pending(b, large)) return finalize(414);
//     read more into b (or into `large`, which became the buffer) ...
//   }
//   HeaderField f;                              // phase 2: one call per field line
//   for (;;) {
//     auto st = p.parse_header({b.pos, b.last}, used, f);  b.pos += used;
//     kOk: store f (its views stay valid while its buffer lives); kHeadersDone: the body
//     starts at b.pos; kAgain: read more, moving the pending line to a large buffer when
//     this one is full (only the unfinished line moves: completed fields stay where
//     they are, so the old buffer must be kept until the request ends); errors: 400 / 431.
//   }
//   then check_headers() (header_check.h), then the body (chunked.h or Content-Length),
//   then p.reset() and the next pipelined request starts at b.pos.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "codec/tokens.h"
#include "vigil/core/buffer.h"

namespace vigil::http {

// The four forms of request-target (RFC 9112 §3.2).
enum class TargetForm : std::uint8_t { kOrigin, kAbsolute, kAuthority, kAsterisk };

enum class ParseStatus : std::uint8_t {
  kOk,                   // one item completed (the request line, or one header field)
  kAgain,                // every byte was consumed; call again with more
  kHeadersDone,          // the empty line ending the header section was consumed
  kBadRequest,           // 400
  kRequestLineTooLong,   // the request line exceeds ParserLimits::max_request_line: 414
  kHeaderTooLong,        // a field line exceeds ParserLimits::max_header_line: 431 (nginx: 400)
  kVersionNotSupported,  // a well-formed HTTP-version other than 1.x: 505
};

// The response status for an error, 0 for kOk/kAgain/kHeadersDone.
int status_code(ParseStatus s);
inline bool is_error(ParseStatus s) {
  return status_code(s) != 0;
}

struct ParserLimits {
  // Longest request line, counting its line end. The server sets it to the
  // size of one large_client_header_buffers buffer (nginx: 8k).
  std::uint32_t max_request_line = 8192;
  // Longest field line, counting its line end.
  std::uint32_t max_header_line = 8192;
  // The head is an HTTP/2 stream's, written out as a request line and field
  // lines by the HTTP/2 transport (http/v2): "HTTP/2.0" is its version
  // (2000), which no HTTP/1 client may send.
  bool http2 = false;
};

struct RequestLine {
  std::string_view line;  // the request-line without its line end
  std::string_view method_name;
  Method method = Method::kOther;
  TargetForm form = TargetForm::kOrigin;
  std::string_view target;  // the request-target as received
  std::string_view scheme;  // absolute-form only, as received (case not folded)
  // absolute-form and authority-form: the authority's host (IP literals keep
  // their brackets, a trailing '.' is dropped) and port (digits, maybe empty).
  std::string_view host;
  std::string_view port;
  // origin-form and absolute-form: the raw path (not decoded, may be empty in
  // absolute-form, which means "/") and the query after '?', not decoded.
  std::string_view path;
  std::string_view query;
  bool has_query = false;  // a '?' was present (the query may still be empty)
  // 1000 * major + minor: 1000 or 1001 (2000: an HTTP/2 stream's). HTTP/1.x with x > 1 is processed
  // as 1.1 (RFC 9110 §2.5: the highest minor version we implement). 9: HTTP/0.9's simple request
  // ("GET /path", RFC 1945 §4.1), which has no header section (the parser is done after the line)
  // and is answered with the body only.
  int version = 0;
};

struct HeaderField {
  std::string_view name;   // a token, case as received
  std::string_view value;  // leading and trailing OWS removed (RFC 9112 §5.1)
  HeaderId id = HeaderId::kOther;
  bool omit = false;  // left out when a response head is written from a list of fields
};

class RequestParser {
 public:
  explicit RequestParser(ParserLimits limits = {});

  // Forgets the current request, for the next one on a keep-alive connection.
  void reset();

  // Parses the request line from `in`, which continues the input exactly
  // where the previous call stopped. `used` receives the number of bytes
  // consumed: all of them on kAgain, up to and including the line end on kOk
  // (then `line` is filled). On an error it is the offset of the offending
  // octet (past the line end when the whole line was needed to judge), for
  // the log; errors are sticky. Empty lines before the request line are
  // skipped (RFC 9112 §2.2).
  ParseStatus parse_request_line(std::string_view in, std::size_t& used, RequestLine& line);

  // Parses the next field line. On kOk `field` is filled and `used` ends after
  // its line end; on kHeadersDone `used` ends after the empty line, where the
  // body or the next request begins. Errors as for parse_request_line.
  ParseStatus parse_header(std::string_view in, std::size_t& used, HeaderField& field);

  // How many bytes just before the next unparsed byte belong to the unfinished
  // request line or field line. When the server moves data to a larger buffer
  // it must move these too, so the next call finds them right before `in`.
  std::size_t pending() const { return len_; }

  // The move itself (nginx's ngx_http_alloc_large_header_buffer): copies the
  // pending bytes and the unparsed ones, [from.pos - pending(), from.last),
  // to the start of `to` and points to.pos/to.last so that parsing resumes
  // there. `from` keeps its memory (completed fields still point into it) and
  // its pos becomes its last. False when `to` is too small: the server answers
  // 414 in the request line, 431 (or nginx's 400) in the headers.
  bool move_pending(Buf& from, Buf& to) const;

  // Why the last error was reported, for the error log ("" when none).
  const char* error() const { return error_; }

  // True after kHeadersDone.
  bool done() const;

  // Skips the request line: the next call is parse_header. A response's
  // header section has the same grammar (response_parser.h uses this).
  void start_fields();

 private:
  ParseStatus fail(ParseStatus status, const char* why);
  ParseStatus finish_request_line(const char* line_start, RequestLine& line);
  ParseStatus finish_field(const char* next, HeaderField& field);

  ParserLimits limits_;
  std::uint8_t state_ = 0;
  TargetForm form_ = TargetForm::kOrigin;
  Method method_ = Method::kOther;
  std::uint8_t major_ = 0;
  std::uint8_t minor_ = 0;
  bool http09_ = false;  // the request line ended without a version
  ParseStatus error_status_ = ParseStatus::kOk;
  std::uint32_t len_ = 0;      // bytes of the unfinished line consumed so far
  std::uint32_t skipped_ = 0;  // bytes of empty lines before the request line
  // Offsets inside the unfinished line, from its first byte. Request line:
  std::uint32_t method_end_ = 0;       // the SP after the method
  std::uint32_t target_end_ = 0;       // the SP after the target
  std::uint32_t authority_start_ = 0;  // absolute-form and authority-form
  std::uint32_t authority_end_ = 0;
  std::uint32_t path_start_ = 0;
  std::uint32_t query_start_ = 0;  // the '?', 0 when none
  std::uint32_t line_end_ = 0;     // the CR or LF
  // Field line:
  std::uint32_t name_end_ = 0;  // the ':'
  std::uint32_t value_start_ = 0;
  std::uint32_t value_end_ = 0;  // after the last non-OWS octet
  const char* error_ = "";
};

}  // namespace vigil::http
