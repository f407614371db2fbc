// libFuzzer target for the mail command parsers (src/mail/parse.h): the
// line framing, the IMAP, POP3 and SMTP command parsers and the base64 of
// AUTH exchanges. Input: one byte choosing the protocol, then the bytes the
// client sends. Aborts when a view handed back lies outside its line, when
// more arguments than kMaxArgs are reported, when a base64 line grows, or
// when encoding and decoding disagree.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "mail/parse.h"

namespace {

using namespace vigil::mail;  // NOLINT
using vigil::fuzz::check;

bool inside(std::string_view v, const char* line, std::size_t len) {
  return v.empty() || (v.data() >= line && v.data() + v.size() <= line + len);
}

void parse_line(std::uint8_t which, char* line, std::size_t len) {
  Command cmd;
  ParseStatus st = which % 3 == 0   ? parse_imap(line, len, cmd)
                   : which % 3 == 1 ? parse_pop3(line, len, cmd)
                                    : parse_smtp(line, len, cmd);
  if (st == ParseStatus::kOk) {
    check(cmd.nargs <= kMaxArgs, "too many arguments reported");
    check(!cmd.name.empty(), "a command without a name");
    check(inside(cmd.name, line, len), "the name lies outside the line");
    check(inside(cmd.tag, line, len), "the tag lies outside the line");
    for (std::size_t i = 0; i < cmd.nargs; ++i) {
      check(inside(cmd.args[i], line, len), "an argument lies outside the line");
    }
    if (which % 3 == 0) check(!cmd.tag.empty(), "an IMAP command without a tag");
  }
  // Every line may also be an AUTH answer.
  std::string copy(line, len);
  std::size_t n = copy.size();
  if (decode_base64_line(copy.data(), n)) {
    check(n <= len, "base64 decoding grew the line");
    std::string enc(((n + 2) / 3) * 4, '\0');
    enc.resize(encode_base64(copy.data(), n, enc.data()));
    std::size_t m = enc.size();
    check(decode_base64_line(enc.data(), m), "our own base64 does not decode");
    check(m == n && std::memcmp(enc.data(), copy.data(), n) == 0, "base64 round trip differs");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint8_t which = data[0];
  std::string buf(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::size_t pos = 0;
  while (pos < buf.size()) {
    // IMAP commands go on past a line that announces a literal, as the
    // session frames them: the literal's bytes, then the next line.
    std::size_t cmd = 0;
    long n = 0;
    for (;;) {
      n = find_line(buf.data() + pos + cmd, buf.size() - pos - cmd);
      if (n <= 0 || which % 3 != 0) break;
      const char* part = buf.data() + pos + cmd;
      std::size_t plen = static_cast<std::size_t>(n) - 1;
      if (plen > 0 && part[plen - 1] == '\r') --plen;
      std::size_t size = 0;
      bool sync = true;
      if (!imap_literal_at_end(part, plen, size, sync)) break;
      check(size <= 9999999999ULL, "a literal size of more than ten digits");
      const std::size_t framed = cmd + static_cast<std::size_t>(n);
      if (size > buf.size() - pos - framed) {
        n = 0;
        break;
      }
      cmd = framed + size;
    }
    if (n <= 0) break;  // incomplete, or refused (bare CR, NUL)
    n += static_cast<long>(cmd);
    check(static_cast<std::size_t>(n) <= buf.size() - pos, "the line ends past the input");
    check(buf[pos + static_cast<std::size_t>(n) - 1] == '\n', "a line that does not end in LF");
    std::size_t len = static_cast<std::size_t>(n) - 1;
    if (len > 0 && buf[pos + len - 1] == '\r') --len;
    // The parser sees exactly the line, in its own allocation (ASan finds overreads).
    std::string line(buf.data() + pos, len);
    parse_line(which, line.data(), line.size());
    pos += static_cast<std::size_t>(n);
  }
  return 0;
}
