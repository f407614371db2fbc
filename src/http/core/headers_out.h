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
  // add_header's fields for this response (set by its filter; each field
  // still says whether it applies to the status, `always`).
  const AddHeaderList* add_headers = nullptr;
};

}  // namespace vigil::http
