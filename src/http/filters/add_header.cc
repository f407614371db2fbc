// add_header (nginx's ngx_http_headers_filter_module, add_header only), a
// module with its own conf at every http level.
//
// As nginx: a level that has no add_header of its own inherits all of its
// parent's; a field is added to responses of status 200, 201, 204, 206, 301,
// 302, 303, 304, 307 and 308, or of any status with `always`; a value that
// is empty (after its variables) adds nothing. The fields are evaluated into
// the response head's own memory (its length is computed first), so nothing
// is allocated per request.
//
// Differences from nginx: the name must be a field name token (RFC 9110
// §5.1; nginx sends whatever it is given), and a CR, LF or NUL a variable
// brings into a value is sent as a space (§5.5; nginx sends it raw, which
// can split the header). As nginx, `add_header ETag` and `add_header
// Last-Modified` replace the field the server (or the backend) set, an empty
// value removes it, and the last of a name wins; every other name adds a
// field. add_trailer's fields are evaluated at the body's end by the chunked
// filter, for a response that goes chunked.
#include "http/filters/add_header.h"
#include "http/core/filters.h"

#include "http/core/servers.h"

#include <cstring>
#include <memory>

#include "codec/chars.h"
#include "codec/http_date.h"
#include "codec/parse.h"
#include "core/conf/values.h"
#include "http/core/conf.h"
#include "http/core/module.h"
#include "http/core/request.h"
#include "vigil/core/clock.h"

namespace vigil::http {

bool success_or_redirect(int status) {
  switch (status) {
    case 200:
    case 201:
    case 204:
    case 206:
    case 301:
    case 302:
    case 303:
    case 304:
    case 307:
    case 308:
      return true;
    default:
      return false;
  }
}

bool adds_for(const AddHeader& h, int status) {
  return h.always || success_or_redirect(status);
}

namespace {

// add_header and add_trailer: one more field in the level's list.
Status add_field(const DirectiveCall& call, std::shared_ptr<const AddHeaderList>& to,
                 bool header) {
  const std::string& name = call.arg(0);
  for (char ch : name) {
    if (!chars::is_tchar(ch)) return call.error("invalid header name \"" + name + "\"");
  }
  if (name.empty()) return call.error("invalid header name \"\"");
  AddHeader h;
  h.name = name;
  if (call.arg_count() == 3) {
    if (call.arg(2) != "always") return call.error("invalid parameter \"" + call.arg(2) + "\"");
    h.always = true;
  }
  auto value = VarTemplate::compile(call.arg(1));
  if (!value) return call.error(value.status().message());
  h.value = std::move(value.value());
  if (header && conf::iequals(name, "etag")) h.sets = AddHeader::Sets::kEtag;
  if (header && conf::iequals(name, "last-modified")) h.sets = AddHeader::Sets::kLastModified;
  // The list is shared with the levels that inherit it: a new one per field
  // (load time only).
  auto list = std::make_shared<AddHeaderList>();
  if (to != nullptr) *list = *to;
  list->headers.push_back(std::move(h));
  to = std::move(list);
  return Status::ok();
}

// A later field of `list` that applies to `status` sets the same field.
bool superseded(const AddHeaderList& list, std::size_t i, int status) {
  for (std::size_t k = i + 1; k < list.headers.size(); ++k) {
    if (list.headers[k].sets == list.headers[i].sets && adds_for(list.headers[k], status)) {
      return true;
    }
  }
  return false;
}

}  // namespace

const HttpModule& add_header_module() {
  static const HttpModule* module = [] {
    auto* m = new HttpModule("http_headers");  // never destroyed: used until exit
    auto conf = m->add_loc_conf<AddHeaderConf>(
        {}, [](const ConfInit& ctx, const AddHeaderConf& parent, AddHeaderConf& child) {
          if (!ctx.is_set("add_header")) child.list = parent.list;
          if (!ctx.is_set("add_trailer")) child.trailers = parent.trailers;
          return Status::ok();
        });
    m->conf()
        .add("add_header", kHttpMainConf | kHttpSrvConf | kHttpLocConf, Arity::between(2, 3),
             conf.custom([](const DirectiveCall& call, AddHeaderConf& c) {
               return add_field(call, c.list, true);
             }))
        .multiple = true;
    m->conf()
        .add("add_trailer", kHttpMainConf | kHttpSrvConf | kHttpLocConf, Arity::between(2, 3),
             conf.custom([](const DirectiveCall& call, AddHeaderConf& c) {
               return add_field(call, c.trailers, false);
             }))
        .multiple = true;
    return m;
  }();
  return *module;
}

const AddHeaderList* add_header_list(const HttpLocConf& loc) {
  return loc_conf<AddHeaderConf>(loc, add_header_module()).list.get();
}

const AddHeaderList* add_trailer_list(const HttpLocConf& loc) {
  return loc_conf<AddHeaderConf>(loc, add_header_module()).trailers.get();
}

bool add_headers_set(const AddHeaderList* list, int status, AddHeader::Sets what) {
  if (list == nullptr) return false;
  for (const AddHeader& h : list->headers) {
    if (h.sets == what && adds_for(h, status)) return true;
  }
  return false;
}

namespace {

// The date of the Last-Modified that add_header sends for `status` (the
// last of the name wins); -1 when it is empty or not a date. The Range
// filter, after this one, compares If-Range with it, as nginx's does.
std::time_t added_last_modified(const Request& r, const AddHeaderList& list, int status) {
  const AddHeader* last = nullptr;
  for (const AddHeader& h : list.headers) {
    if (h.sets == AddHeader::Sets::kLastModified && adds_for(h, status)) last = &h;
  }
  char text[64];
  if (last == nullptr || last->value.length(r) >= sizeof text) return -1;
  const char* end = last->value.write(r, text);
  auto t = parse_http_date(std::string_view(text, static_cast<std::size_t>(end - text)),
                           clock::now_sec());
  return t ? *t : -1;
}

}  // namespace

int add_header_filter(Request& r) {
  if (r.loc == nullptr) return 0;
  HeadersOut& out = r.headers_out;
  const AddHeaderConf& level = loc_conf<AddHeaderConf>(*r.loc, add_header_module());
  out.add_headers = level.list.get();
  out.add_trailers = level.trailers.get();
  // A proxied response's ETag and Last-Modified give way to add_header's.
  const bool etag = add_headers_set(out.add_headers, out.status, AddHeader::Sets::kEtag);
  const bool modified = add_headers_set(out.add_headers, out.status, AddHeader::Sets::kLastModified);
  if (modified) out.last_modified = added_last_modified(r, *out.add_headers, out.status);
  for (std::uint32_t i = 0; (etag || modified) && i < out.nfields; ++i) {
    HeaderField& f = out.fields[i];
    if ((etag && conf::iequals(f.name, "etag")) ||
        (modified && conf::iequals(f.name, "last-modified"))) {
      f.omit = true;
    }
  }
  out.expect_trailers = false;
  if (out.add_trailers != nullptr) {
    for (const AddHeader& t : out.add_trailers->headers) {
      if (adds_for(t, out.status)) out.expect_trailers = true;
    }
  }
  return 0;
}

std::size_t add_headers_length(const Request& r, const AddHeaderList* list, int status) {
  if (list == nullptr) return 0;
  std::size_t n = 0;
  for (std::size_t i = 0; i < list->headers.size(); ++i) {
    const AddHeader& h = list->headers[i];
    if (!adds_for(h, status)) continue;
    if (h.sets != AddHeader::Sets::kNone && superseded(*list, i, status)) continue;
    n += h.name.size() + 4 + h.value.length(r);
  }
  return n;
}

char* write_add_headers(const Request& r, const AddHeaderList* list, int status, char* p) {
  if (list == nullptr) return p;
  for (std::size_t i = 0; i < list->headers.size(); ++i) {
    const AddHeader& h = list->headers[i];
    if (!adds_for(h, status)) continue;
    if (h.sets != AddHeader::Sets::kNone && superseded(*list, i, status)) continue;
    char* const start = p;
    std::memcpy(p, h.name.data(), h.name.size());
    p += h.name.size();
    *p++ = ':';
    *p++ = ' ';
    char* const value = p;
    p = h.value.write(r, p);
    if (p == value) {
      p = start;  // empty: not added
      continue;
    }
    for (char* q = value; q != p; ++q) {
      if (*q == '\r' || *q == '\n' || *q == '\0') *q = ' ';
    }
    *p++ = '\r';
    *p++ = '\n';
  }
  return p;
}

bool uses_add_header(const HttpServers& servers) {
  for (const HttpLocConf* loc : servers.locations) {
    const AddHeaderList* list = add_header_list(*loc);
    if (list != nullptr && !list->headers.empty()) return true;
    const AddHeaderList* trailers = add_trailer_list(*loc);
    if (trailers != nullptr && !trailers->headers.empty()) return true;
  }
  return false;
}

}  // namespace vigil::http
