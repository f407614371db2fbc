// send_header: the header filters, then the protocol's head writer; the body
// filter chain and output_filter (filters.h).
#include "http/core/filters.h"

#include "http/core/request.h"
#include "http/core/subrequest.h"
#include "http/v2/h2.h"

namespace vigil::http {

bool HeaderFilterChain::add(HeaderFilter f) {
  if (n_ == kMaxFilters) return false;
  filters_[n_++] = f;
  return true;
}

int HeaderFilterChain::run(Request& r) const {
  for (std::uint32_t i = 0; i < n_; ++i) {
    if (const int rc = filters_[i](r); rc != 0) return rc;
  }
  return 0;
}

bool HeaderFilterChain::contains(HeaderFilter f) const {
  for (std::uint32_t i = 0; i < n_; ++i) {
    if (filters_[i] == f) return true;
  }
  return false;
}

int send_header(Request& r) {
  // A subrequest's head goes to its parent's hook, not to the client (the
  // built-in header filters leave subrequests alone, as nginx's do).
  if (r.parent != nullptr) return r.sub_hooks->header(r);
  if (r.accel_fields != nullptr && r.headers_out.fields == nullptr) {
    // An X-Accel-Redirect's kept fields (nginx copies them to headers_out,
    // and its handlers set a Content-Type only where none is).
    HeadersOut& h = r.headers_out;
    h.fields = r.accel_fields;
    h.nfields = r.naccel;
    if (!r.accel_content_type.empty()) h.content_type = r.accel_content_type;
  }
  if (const int rc = r.hc->srv->filters->header.run(r); rc != 0) return rc;
  const bool written = r.hc->stream != nullptr ? h2::write_header(r) : write_header(r);
  return written ? 0 : 500;
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

bool BodyFilterChain::contains(BodyFilter f) const {
  for (std::uint32_t i = 0; i < n_; ++i) {
    if (filters_[i] == f) return true;
  }
  return false;
}

int output_filter(Request& r, Chain* in) {
  if (r.parent != nullptr) return r.sub_hooks->body(r, in);
  return r.hc->srv->filters->body.run(r, in);
}

}  // namespace vigil::http
