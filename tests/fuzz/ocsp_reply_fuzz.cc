// Feeds arbitrary bytes to the two parsers of the OCSP client (event/tls):
// the responder's answer (ocsp_parse_reply: status line, field lines, body)
// and a responder URL (ocsp_parse_responder, without resolving names).
// What the answer parser hands back must lie inside the input, a body only
// with a status, an error only without one; a parsed URL must name a host,
// a port and a path that starts with '/'. The first byte chooses the parser.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "event/tls/ocsp.h"
#include "event/tls/ocsp_reply.h"
#include "fuzz_check.h"

using vigil::fuzz::check;

namespace {

bool inside(std::string_view v, std::string_view in) {
  return v.empty() || (v.data() >= in.data() && v.data() + v.size() <= in.data() + in.size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 1) {
    vigil::OcspResponder r;
    if (!vigil::ocsp_parse_responder(in, false, r)) return 0;
    check(!r.host.empty(), "a host");
    check(r.port != 0, "a port");
    check(!r.uri.empty() && r.uri.front() == '/', "a path");
    check(!r.numeric || r.addrs.size() == 1, "an address for a numeric host");
    return 0;
  }
  vigil::OcspReply a;
  const bool whole = vigil::ocsp_parse_reply(in, a);
  check(inside(a.body, in) && inside(a.content_type, in), "views inside the input");
  check(!(whole && a.error != nullptr), "no error in a whole answer");
  check(!whole || (a.status >= 0 && a.status <= 999), "a three-digit status");
  check(whole || a.body.empty(), "a body only after a whole head");
  if (whole)
    check(a.body.data() + a.body.size() == in.data() + in.size(), "the body runs to the end");
  return 0;
}
