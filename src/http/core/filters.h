#pragma once
// The response pipeline's header side (nginx's header filter chain): a
// content handler fills r.headers_out and calls send_header(), which runs
// every header filter in order (the not-modified, range and add_header
// filters; http/core/modules.cc lists them) and then the protocol's head
// writer. A filter may change the head (304, 206), or refuse the response
// with a status (412, 416) that the handler returns to the phase engine.

namespace vigil::http {

struct Request;

// 0: the head is written (r.header_only may have become true: a 304);
// otherwise the status to answer instead (the handler returns it).
int send_header(Request& r);

// A header filter: 0 to go on, or a status that ends the response.
using HeaderFilter = int (*)(Request& r);

// The filters, in the order they run (modules.cc).
int not_modified_header_filter(Request& r);  // filters/not_modified.cc
int range_header_filter(Request& r);         // filters/range.cc
int add_header_filter(Request& r);           // filters/add_header.cc

}  // namespace vigil::http
