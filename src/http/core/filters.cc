// send_header: the header filters, then the protocol's head writer (filters.h).
#include "http/core/filters.h"

#include <span>

#include "http/core/request.h"

namespace vigil::http {

std::span<const HeaderFilter> header_filters();  // modules.cc

int send_header(Request& r) {
  for (HeaderFilter f : header_filters()) {
    if (const int rc = f(r); rc != 0) return rc;
  }
  return write_header(r) ? 0 : 500;
}

}  // namespace vigil::http
