// `return code [text];`, `return code URL;`, `return URL;` (nginx's
// ngx_http_rewrite_return and ngx_http_send_response).
//
// A server-level `return` answers in the server-rewrite phase, before a
// location is chosen; a location's in the rewrite phase, before the limits,
// allow/deny, try_files and the content handler (phases.h). The text and
// URL may hold variables; they are evaluated into a worker buffer (reused
// once warm), and a literal text is sent straight from the configuration.
//
// Differences from nginx, both RFC 9110 rules: codes outside 200-599 are
// refused (nginx takes 0-999; a 1xx cannot end a request, §15.2), and the
// Location of a redirect has its spaces, controls and non-ASCII bytes
// percent-encoded (a URI reference has none, §10.2.2; nginx sends them raw).
// A relative URL stays relative, as the 301 of a directory does here (nginx
// makes it absolute with absolute_redirect on; §10.2.2 allows either).
#include "http/rewrite/rewrite.h"

#include <cstring>
#include <memory>

#include "http/core/conf.h"
#include "http/core/filters.h"
#include "http/core/module.h"
#include "http/core/phases.h"
#include "http/core/request.h"
#include "http/core/worker.h"
#include "codec/uri.h"

namespace vigil::http {
namespace {

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char ch : s) {
    if (ch < '0' || ch > '9') return false;
  }
  return true;
}

bool is_url(std::string_view s) {
  return (s.size() > 7 && s.starts_with("http://")) ||
         (s.size() > 8 && s.starts_with("https://")) || s.starts_with("$scheme");
}

}  // namespace

Result<std::shared_ptr<const ReturnConf>> parse_return(const DirectiveCall& call) {
  auto ret = std::make_shared<ReturnConf>();
  ret->where = call.where();
  const std::string& first = call.arg(0);
  std::string_view text;
  if (all_digits(first)) {
    int code = 0;
    for (char ch : first) {
      code = code * 10 + (ch - '0');
      if (code > 999) break;
    }
    if (code < 200 || code > 599) return call.error("invalid return code \"" + first + "\"");
    ret->code = code;
    if (call.arg_count() == 2) {
      ret->has_text = true;
      text = call.arg(1);
    }
  } else if (is_url(first)) {
    if (call.arg_count() == 2) return call.error("invalid parameter \"" + call.arg(1) + "\"");
    ret->code = 302;
    ret->has_text = true;
    text = first;
  } else {
    return call.error("invalid return code \"" + first + "\"");
  }
  if (ret->has_text) {
    auto t = VarTemplate::compile(text);
    if (!t) return call.error(t.status().message());
    ret->text = std::move(t.value());
  }
  return std::shared_ptr<const ReturnConf>(std::move(ret));
}

namespace {

// A buffer of at least `size` bytes for the response, kept as r.obuf until
// the request ends.
char* response_memory(Request& r, std::size_t size) {
  if (r.obuf != nullptr) return nullptr;  // in use (never, before a handler ran)
  const std::size_t cap = (size + 4095) & ~std::size_t{4095};
  char* mem = r.hc->worker->buffers().get(cap);
  if (mem == nullptr) return nullptr;
  r.obuf = mem;
  r.obuf_size = static_cast<std::uint32_t>(cap);
  return mem;
}

// Percent-encodes what a URI reference may not hold raw (RFC 3986 §2):
// spaces, controls and non-ASCII bytes. `out` has room for 3 * in.size().
std::size_t escape_url(std::string_view in, char* out) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  char* p = out;
  for (unsigned char ch : in) {
    if (ch > 0x20 && ch < 0x7f) {
      *p++ = static_cast<char>(ch);
    } else {
      *p++ = '%';
      *p++ = kHex[ch >> 4];
      *p++ = kHex[ch & 0xf];
    }
  }
  return static_cast<std::size_t>(p - out);
}

void set_body(Request& r, std::string_view body) {
  r.bbuf = Buf{};
  if (body.empty() || r.header_only) return;
  char* p = const_cast<char*>(body.data());  // only read by the writer
  r.bbuf.reset(p, body.size());
  r.bbuf.last = p + body.size();
}

}  // namespace

bool set_redirect_location(Request& r, std::string_view url) {
  // The escaped URL is written from the start of the buffer, the raw one
  // (already there, or copied) kept past the room it may need.
  const std::size_t n = url.size();
  char* mem = location_memory(r, 4 * n + 1);
  if (mem == nullptr) return false;
  char* raw = mem + 3 * n;
  if (url.data() != raw) std::memmove(raw, url.data(), n);
  HeadersOut& h = r.headers_out;
  h.location = std::string_view(mem, escape_url(std::string_view(raw, n), mem));
  h.location_query = {};
  h.location_as_is = true;
  return true;
}

int send_return(Request& r, std::string_view extension) {
  return send_return(r, *location_return(*r.loc), extension);
}

int send_return(Request& r, const ReturnConf& ret, std::string_view extension) {
  if (ret.code == kStatusClose) {
    terminate_request(r, kStatusClose);
    return 0;
  }
  if (!ret.has_text && ret.code >= 400) return ret.code;

  HeadersOut& h = r.headers_out;
  if (is_redirect(ret.code)) {
    // As nginx's: the Location is set and the request ends with the code,
    // so that an error_page for it applies, else the built-in page (which
    // keeps the Location), whatever status an error_page brought here.
    h.location = {};
    h.location_query = {};
    h.location_as_is = false;
    if (ret.has_text) {
      const std::size_t n = ret.text.length(r);
      char* mem = location_memory(r, 4 * n + 1);
      if (mem == nullptr) return 500;
      // The raw URL after the room its escaped form may need.
      char* raw = mem + 3 * n;
      const std::size_t len = static_cast<std::size_t>(ret.text.write(r, raw) - raw);
      if (!set_redirect_location(r, std::string_view(raw, len))) return 500;
    }
    return ret.code;
  }
  // Reached through error_page: the error's status stays (nginx's err_status).
  h.status = r.status != 0 ? r.status : ret.code;
  r.header_only = r.line.method == Method::kHead;
  std::string_view body;
  if (ret.text.is_literal()) {
    body = ret.text.literal_text();
  } else if (ret.has_text) {
    const std::size_t n = ret.text.length(r);
    char* mem = response_memory(r, n + 1);
    if (mem == nullptr) return 500;
    body = std::string_view(mem, static_cast<std::size_t>(ret.text.write(r, mem) - mem));
  }
  if (h.status == 204 || h.status == 304) {
    r.header_only = true;
    body = {};
  } else {
    h.content_type = content_type_for(*r.loc, extension);
  }
  if (h.status != 204 && h.status != 304) h.content_length = static_cast<std::int64_t>(body.size());
  if (const int rc = send_header(r); rc != 0) return rc;
  set_body(r, body);
  send_response(r);
  return 0;
}

// 444 closes at once; anything else reads the body first (so the
// connection can be kept), then answers.
int run_return(Request& r, const ReturnConf& ret) {
  if (ret.code == kStatusClose) {
    terminate_request(r, kStatusClose);  // no need to read a body first
    return kPhaseDone;
  }
  if (const int rc = discard_request_body(r); rc != kPhaseNext) return rc;
  return send_return(r, ret, path_extension(r.uri));
}

}  // namespace vigil::http
