// libFuzzer target for the stream variables (stream::VarTemplate::compile)
// and the evaluation of what compiles: every escape mode must stay within
// the length() bound, on a session with a client address and two upstream
// attempts whose address is the input itself.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "stream/session.h"
#include "stream/variables.h"

namespace {

using namespace vigil;          // NOLINT
using namespace vigil::stream;  // NOLINT

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto t = VarTemplate::compile(in);
  if (!t) return 0;
  static Connection c;
  static auto s = std::make_unique<Session>();
  c.addr_text = in;  // bytes that need escaping
  s->client = &c;
  s->ntries = 2;
  s->tries[0].addr = in;
  s->tries[1].addr = "127.0.0.1:80";
  s->tries[1].connect_time = 1234;
  for (LogEscape esc : {LogEscape::kNone, LogEscape::kDefault, LogEscape::kJson}) {
    for (bool dash : {false, true}) {
      const std::size_t n = t->length(*s, esc, dash);
      auto buf = std::make_unique<char[]>(n + 1);
      char* end = t->write(*s, buf.get(), esc, dash);
      fuzz::check(end >= buf.get() && static_cast<std::size_t>(end - buf.get()) <= n,
                  "write() within length()");
    }
  }
  if (t->is_literal()) fuzz::check(t->literal_text() == in, "a literal is its text");
  return 0;
}
