// The not-modified filter (nginx's ngx_http_not_modified_filter_module):
// the preconditions of RFC 9110 §13.2.2, in its order, against the
// validators the content handler set (r.headers_out.etag, last_modified).
// A failed If-Match or If-Unmodified-Since is 412; a matching If-None-Match
// (or, without one, If-Modified-Since by if_modified_since's rule) turns a
// 200 into a 304 with the validators and no content.
#include "codec/http_date.h"
#include "codec/tokens.h"
#include "http/core/filters.h"
#include "http/core/request.h"
#include "vigil/core/clock.h"

namespace vigil::http {

bool etag_list_matches(std::string_view list, std::string_view etag, bool weak) {
  if (list == "*") return true;
  ListReader reader(list);
  std::string_view tag;
  while (reader.next(tag)) {
    if (tag.starts_with("W/")) {
      if (!weak) continue;
      tag.remove_prefix(2);
    }
    if (tag == etag) return true;
  }
  return false;
}

int not_modified_header_filter(Request& r) {
  HeadersOut& h = r.headers_out;
  if (h.status != 200 || (h.etag.empty() && h.last_modified < 0)) return 0;
  const std::time_t now = clock::now_sec();
  if (!r.if_match.empty()) {
    if (!etag_list_matches(r.if_match, h.etag, false)) return 412;
  } else if (!r.if_unmodified_since.empty() && h.last_modified >= 0) {
    auto t = parse_http_date(r.if_unmodified_since, now);
    if (t && h.last_modified > *t) return 412;
  }
  bool not_modified = false;
  if (!r.if_none_match.empty()) {
    not_modified = !h.etag.empty() && etag_list_matches(r.if_none_match, h.etag, true);
  } else if (!r.if_modified_since.empty() && h.last_modified >= 0 &&
             r.loc->if_modified_since != IfModifiedSince::kOff) {
    auto t = parse_http_date(r.if_modified_since, now);
    if (t) {
      not_modified = r.loc->if_modified_since == IfModifiedSince::kExact
                         ? *t == h.last_modified
                         : h.last_modified <= *t;
    }
  }
  if (!not_modified) return 0;
  // 304 (RFC 9110 §15.4.5): the validators, no content.
  h.status = 304;
  h.content_type = {};
  h.content_length = -1;
  h.accept_ranges = false;
  r.header_only = true;
  return 0;
}

}  // namespace vigil::http
