// empty_gif (nginx's ngx_http_empty_gif_module): a location that answers
// with a 1x1 transparent GIF, the pixel of tracking and spacer images.
//
// It is also the smallest complete HTTP module, the one docs/modules.md
// walks through: an HttpModule with a directive that sets the location's
// content handler, and a handler that reads away any body, fills
// r.headers_out, runs the header filters (so conditional requests, Range and
// add_header apply to it like to a file) and sends its body.
#include "http/empty_gif/empty_gif.h"

#include "http/core/filters.h"
#include "http/core/module.h"
#include "http/core/phases.h"
#include "http/core/request.h"
#include "http/filters/range.h"

namespace vigil::http {
namespace {

// GIF89a, 1x1, one transparent colour, an empty image: 43 bytes.
constexpr unsigned char kGif[] = {
    'G',  'I',  'F',  '8',  '9',  'a',                    // header
    0x01, 0x00, 0x01, 0x00,                               // 1 x 1
    0x80, 0x01, 0x00,                                     // a 2-colour table
    0x00, 0x00, 0x00, 0xff, 0xff, 0xff,                   // black, white
    0x21, 0xf9, 0x04, 0x01, 0x00, 0x00, 0x01, 0x00,       // transparent colour 1
    0x2c, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00,  // the image
    // LZW, 2-bit minimum code size (3-bit codes): clear (4), pixel 1, end
    // of information (5), packed from the low bit: 0x4c 0x01. Byte for byte
    // the image nginx sends, so caches and checksums see the same file.
    0x02, 0x02, 0x4c, 0x01, 0x00,
    0x3b,                                                 // trailer
};
static_assert(sizeof kGif == 43);

// A fixed date, so that browsers can revalidate the pixel (If-Modified-Since
// gets a 304) while the response stays the same everywhere.
constexpr std::time_t kLastModified = 23349600;  // Sep 28 1970, as nginx's

int empty_gif_handler(Request& r) {
  if (r.line.method != Method::kGet && r.line.method != Method::kHead) return 405;
  if (const int rc = discard_request_body(r); rc != kPhaseNext) return rc;
  HeadersOut& h = r.headers_out;
  h = HeadersOut{};
  h.status = 200;
  h.content_type = "image/gif";
  h.content_length = sizeof kGif;
  h.last_modified = kLastModified;
  h.accept_ranges = true;
  r.header_only = r.line.method == Method::kHead;
  if (const int rc = send_header(r); rc != 0) return rc;
  r.bbuf = Buf{};
  if (!r.header_only && h.content_length > 0) {
    // The pixel is never written to: the buffer only reads it. A multipart
    // answer is made of the whole pixel by the range filter.
    const bool whole = range_multipart(r);
    const std::int64_t len = whole ? static_cast<std::int64_t>(sizeof kGif) : h.content_length;
    char* p = const_cast<char*>(reinterpret_cast<const char*>(kGif)) + (whole ? 0 : r.body_offset);
    r.bbuf.reset(p, static_cast<std::size_t>(len));
    r.bbuf.last = p + len;
  }
  send_response(r);
  return kPhaseDone;
}

const ContentHandler kEmptyGif{"empty_gif", empty_gif_handler, false};

}  // namespace

const HttpModule& empty_gif_module() {
  static const HttpModule* module = [] {
    auto* m = new HttpModule("http_empty_gif");  // never destroyed: used until exit
    m->conf().add("empty_gif", kHttpLocConf, Arity::none(),
                  DirectiveBody::handler([](const DirectiveCall& call) {
                    return set_location_content(call, &kEmptyGif);
                  }));
    return m;
  }();
  return *module;
}

}  // namespace vigil::http
