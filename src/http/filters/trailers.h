#pragma once
// The response's trailer section as the chunked filter writes it, for the
// writers that frame trailers themselves (HTTP/2's trailing HEADERS).

namespace vigil::http {

struct Request;

// Writes the trailer fields of `r` (headers_out.trailers, then add_trailer's
// that apply to the status, evaluated now) into r.chunk_frame.trailer_mem,
// one "name: value\r\n" line each, between fields_begin and fields_end
// ($sent_trailer_NAME reads them there). False when no buffer could be had.
bool write_trailer_fields(Request& r);
// Whether `r` has trailers to send: the producer's, or add_trailer's.
bool has_trailers(const Request& r);

}  // namespace vigil::http
