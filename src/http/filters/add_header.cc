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
// can split the header).
//
// As nginx, `add_header Last-Modified` replaces the server's field rather
// than adding a second one: its date becomes the response's (the Range
// filter, after this one, compares If-Range with it; the preconditions,
// before, saw the file's), and an empty value removes the field. nginx's
// other special cases (Cache-Control, Link, ETag) are not made.
#include "http/filters/add_header.h"
#include "http/core/filters.h"

#include "http/core/servers.h"

#include <cstring>
#include <memory>

#include "codec/chars.h"
#include "codec/http_date.h"
#include "codec/tokens.h"
#include "http/core/conf.h"
#include "http/core/module.h"
#include "http/core/request.h"
#include "vigil/core/clock.h"

namespace vigil::http {
namespace {

bool adds_for(const AddHeader& h, int status) {
  if (h.always) return true;
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

Status set_add_header(const DirectiveCall& call, AddHeaderConf& conf) {
  const std::string& name = call.arg(0);
  for (char ch : name) {
    if (!chars::is_tchar(ch)) return call.error("invalid header name \"" + name + "\"");
  }
  if (name.empty()) return call.error("invalid header name \"\"");
  AddHeader h;
  h.name = name;
  h.last_modified = iequals(name, "Last-Modified");
  if (call.arg_count() == 3) {
    if (call.arg(2) != "always") return call.error("invalid parameter \"" + call.arg(2) + "\"");
    h.always = true;
  }
  auto value = VarTemplate::compile(call.arg(1));
  if (!value) return call.error(value.status().message());
  h.value = std::move(value.value());
  // The list is shared with the levels that inherit it: a new one per field
  // (load time only).
  auto list = std::make_shared<AddHeaderList>();
  if (conf.list != nullptr) *list = *conf.list;
  list->headers.push_back(std::move(h));
  conf.list = std::move(list);
  return Status::ok();
}

}  // namespace

const HttpModule& add_header_module() {
  static const HttpModule* module = [] {
    auto* m = new HttpModule("http_headers");  // never destroyed: used until exit
    auto conf = m->add_loc_conf<AddHeaderConf>(
        {}, [](const ConfInit& ctx, const AddHeaderConf& parent, AddHeaderConf& child) {
          if (!ctx.is_set("add_header")) child.list = parent.list;
          return Status::ok();
        });
    m->conf()
        .add("add_header", kHttpMainConf | kHttpSrvConf | kHttpLocConf, Arity::between(2, 3),
             conf.custom(set_add_header))
        .multiple = true;
    return m;
  }();
  return *module;
}

const AddHeaderList* add_header_list(const HttpLocConf& loc) {
  return loc_conf<AddHeaderConf>(loc, add_header_module()).list.get();
}

int add_header_filter(Request& r) {
  const AddHeaderList* list = r.loc != nullptr ? add_header_list(*r.loc) : nullptr;
  HeadersOut& out = r.headers_out;
  out.add_headers = list;
  if (list == nullptr) return 0;
  for (const AddHeader& h : list->headers) {
    if (!h.last_modified || !adds_for(h, out.status)) continue;
    // A date the head writer writes from out.last_modified; other text is
    // written as given by write_add_headers (and leaves no date).
    char text[64];
    out.last_modified = -1;
    if (h.value.length(r) < sizeof text) {
      const char* end = h.value.write(r, text);
      auto t = parse_http_date(std::string_view(text, static_cast<std::size_t>(end - text)),
                               clock::now_sec());
      if (t) out.last_modified = *t;
    }
  }
  return 0;
}

std::size_t add_headers_length(const Request& r, const AddHeaderList* list, int status) {
  if (list == nullptr) return 0;
  std::size_t n = 0;
  for (const AddHeader& h : list->headers) {
    if (adds_for(h, status)) n += h.name.size() + 4 + h.value.length(r);
  }
  return n;
}

char* write_add_headers(const Request& r, const AddHeaderList* list, int status, char* p) {
  if (list == nullptr) return p;
  for (const AddHeader& h : list->headers) {
    if (!adds_for(h, status)) continue;
    if (h.last_modified && r.headers_out.last_modified >= 0) continue;  // written as a date
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
  }
  return false;
}

}  // namespace vigil::http
