// send_header: the header filters, then the protocol's head writer; the body
// filter chain and output_filter (filters.h).
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

int BodyFilterNext::operator()(Request& r, Chain* in) const {
  if (index_ < chain_->n_)
    return chain_->filters_[index_](r, in, BodyFilterNext(*chain_, index_ + 1));
  return chain_->writer_(r, in);
}

bool BodyFilterChain::add(BodyFilter f) {
  if (n_ == kMaxFilters) return false;
  filters_[n_++] = f;
  return true;
}

int output_filter(Request& r, Chain* in) {
  // Built on first use, before any request (a worker's first response);
  // read-only afterwards, so every loop thread may share it.
  static const BodyFilterChain chain = [] {
    BodyFilterChain c(write_filter);
    register_body_filters(c);
    return c;
  }();
  return chain.run(r, in);
}

}  // namespace vigil::http
