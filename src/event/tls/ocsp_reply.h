#pragma once
// What an OCSP responder answered over HTTP (nginx's
// ngx_ssl_ocsp_process_status_line / _headers / _body): the whole answer,
// read until the responder closed the connection (the request is HTTP/1.0),
// parsed at once. The grammar is nginx's: "HTTP/" major "." minor SP
// 3DIGIT, then field lines of letters, digits and '-' up to ':', lines ended
// by LF or CRLF; a Content-Type other than application/ocsp-response is an
// error. The body is everything after the empty line (nginx does not honor
// Content-Length either).

#include <string_view>

namespace vigil {

struct OcspReply {
  int status = 0;
  std::string_view body;
  std::string_view content_type;  // when refused: the value, for the log
  // Why the answer was refused ("OCSP responder sent invalid response",
  // "...invalid \"Content-Type\" header"), null when it was not.
  const char* error = nullptr;
};

// True when `in` holds a whole head (and the body after it); false with
// `out.error` set when it is malformed, or with it null when it ends early.
bool ocsp_parse_reply(std::string_view in, OcspReply& out);

}  // namespace vigil
