// libFuzzer target for the variable syntax of configuration strings
// (VarTemplate::compile) and the evaluation of what compiles: every escape
// mode must stay within the length() bound, on a request with a few fields.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "http/core/request.h"
#include "http/core/variables.h"

namespace {

using namespace vigil;        // NOLINT
using namespace vigil::http;  // NOLINT

void check(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto t = VarTemplate::compile(in);
  if (!t) return 0;
  static Connection c;
  static auto r = std::make_unique<Request>();
  c.addr_text = "127.0.0.1";
  r->c = &c;
  r->fields = r->field_inline;
  r->nfields = 0;
  // The input itself doubles as header values, with bytes that need escaping.
  r->fields[r->nfields++] = HeaderField{"User-Agent", in, HeaderId::kUserAgent};
  r->fields[r->nfields++] = HeaderField{"X-Forwarded-For", in, HeaderId::kOther};
  r->fields[r->nfields++] = HeaderField{"Cookie", in, HeaderId::kOther};
  r->line.line = in;
  r->line.target = in;
  r->uri = in;
  // $arg_NAME and $is_args parse the query: the input again.
  r->line.query = in;
  r->line.has_query = true;
  for (VarEscape esc : {VarEscape::kNone, VarEscape::kDefault, VarEscape::kJson}) {
    for (bool dash : {false, true}) {
      const std::size_t n = t->length(*r, esc, dash);
      auto buf = std::make_unique<char[]>(n + 1);
      char* end = t->write(*r, buf.get(), esc, dash);
      check(end >= buf.get() && static_cast<std::size_t>(end - buf.get()) <= n);
    }
  }
  if (t->is_literal()) check(t->literal_text() == in);
  return 0;
}
