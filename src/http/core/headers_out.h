#pragma once
// The response head as the request sees it (nginx's r->headers_out),
// protocol-neutral: the content handler fills it, send_header() runs the
// header filters over it (filters.h), and the protocol's head writer
// serialises it (HTTP/1: http/v1/response.cc).

#include <cstdint>
#include <ctime>
#include <string_view>

namespace vigil::http {

struct AddHeaderList;
struct HeaderField;  // codec/parse.h

// The statuses whose response names a Location (a `return` takes its text as
// the URL; the built-in page of one keeps the Location set before it).
constexpr bool is_redirect(int code) {
  return code == 301 || code == 302 || code == 303 || code == 307 || code == 308;
}

struct HeadersOut {
  int status = 200;
  std::string_view content_type;
  std::int64_t content_length = -1;  // -1: not known
  std::time_t last_modified = -1;    // validators: the not-modified and range filters use them
  std::string_view etag;
  bool accept_ranges = false;      // the range filter may answer a Range (r->allow_ranges)
  std::string_view content_range;  // whole field value
  std::string_view location;       // path, escaped when written
  std::string_view location_query;
  bool location_as_is = false;  // `location` is a whole URL, already escaped (return.cc)
  bool allow = false;           // "Allow: GET, HEAD" (405)
  // The server's own Content-Encoding (gzip, gzip_static); a proxied
  // response's stays among `fields`.
  std::string_view content_encoding;
  // auth_basic's challenge ("Basic realm=..."), or auth_request's (those of
  // its subrequest, '\n'-separated, one field each): kept for an error page,
  // as nginx keeps it, so a 401 answered by error_page still carries it.
  std::string_view www_authenticate;
  // add_header's fields for this response (set by its filter; each field
  // still says whether it applies to the status, `always`).
  const AddHeaderList* add_headers = nullptr;
  // add_trailer's fields (evaluated at the body's end by the chunked
  // filter), and whether one applies to this status: an HTTP/1.1 body then
  // goes chunked even when its length is known.
  const AddHeaderList* add_trailers = nullptr;
  bool expect_trailers = false;
  // The body keeps its Content-Length framing whatever expect_trailers says
  // (a file the writer reads in pieces after the body filters).
  bool length_only = false;
  // expires (filters/expires.cc): the Expires field's time (-1: none) and
  // Cache-Control's max-age (kNoCacheControl: none; kNoCache: "no-cache").
  static constexpr std::int64_t kNoCacheControl = -1;
  static constexpr std::int64_t kNoCache = -2;
  std::time_t expires = -1;
  std::int64_t cache_max_age = kNoCacheControl;

  // A relayed response (the upstream core): the backend's reason phrase
  // (empty: the standard one), and its remaining fields, written as they are
  // after the ones above, in order; a field marked `omit` is left out.
  // The producer has taken out what the fields above say (Content-Length,
  // Content-Type) and what must not pass (hop-by-hop, hidden fields). The
  // views (and content_type's) are valid until the head is written: the
  // backend's head buffer is reused for the body afterwards.
  std::string_view reason;
  // A header filter may mark a field `omit` (expires replaces Expires).
  HeaderField* fields = nullptr;
  std::uint32_t nfields = 0;
  bool own_server = true;  // our Server: field (false: the backend's passes, proxy_pass_header)
  bool own_date = true;    // our Date: field
  bool upgrade = false;    // a 101 to a tunnel: "Connection: upgrade", no body, no keep-alive

  // Fields sent after the body (RFC 9110 §6.5: a checksum or a status known
  // only at its end), set by the producer before it passes the last buffer;
  // a field marked `omit` is left out. HTTP/1 writes them in the chunked
  // coding's trailer section (RFC 9112 §7.1.2, the chunked body filter); a
  // body that is not chunked goes without them, which §6.5.1 allows a
  // recipient to do anyway. A field whose value holds a CR or LF is left out.
  const HeaderField* trailers = nullptr;
  std::uint32_t ntrailers = 0;

  // Starts the head over for a page answering `page_status` (an error page, the
  // built-in page): a redirect keeps the Location set before it (a `return`,
  // auto_redirect, an error_page's location), everything else is dropped.
  void restart_for(int page_status) {
    HeadersOut fresh;
    fresh.www_authenticate = www_authenticate;
    if (is_redirect(page_status)) {
      fresh.location = location;
      fresh.location_query = location_query;
      fresh.location_as_is = location_as_is;
    }
    *this = fresh;
  }
};

}  // namespace vigil::http
