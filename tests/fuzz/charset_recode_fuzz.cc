// Feeds arbitrary bytes through the charset filter's recoder
// (http/charset/recode.h): a charset_map built from the input's first
// bytes, then the rest recoded in pieces whose sizes the input chooses into
// output windows as small as one character's worst case. Whatever the
// bytes, the recoder never writes past its window (AddressSanitizer's part),
// always reads or writes when it has a character's room, reads all of its input, keeps
// an 8-bit recoding's length, and what it wrote to UTF-8 comes back from
// UTF-8 with the input's length.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "http/charset/recode.h"

using vigil::fuzz::check;
namespace http = vigil::http;

namespace {

// Runs `data` through `r` in pieces and windows chosen by `sizes`.
std::string recode(http::Recoder& r, std::string_view data, const std::uint8_t* sizes,
                   std::size_t nsizes) {
  std::string out;
  std::size_t k = 0;
  const auto* p = reinterpret_cast<const std::uint8_t*>(data.data());
  const auto* end = p + data.size();
  while (p < end) {
    const std::size_t piece = nsizes > 0 ? 1 + sizes[k++ % nsizes] % 64 : data.size();
    const std::uint8_t* piece_end = end - p < static_cast<std::ptrdiff_t>(piece) ? end : p + piece;
    while (p < piece_end) {
      const std::size_t room = http::kRecodeMaxOut + (nsizes > 0 ? sizes[k++ % nsizes] % 8 : 0);
      std::unique_ptr<char[]> window(new char[room]);  // exact size: ASan sees an overrun
      const std::uint8_t* before = p;
      char* w = r.run(p, piece_end, window.get(), window.get() + room);
      check(p > before || w > window.get(), "a character's room reads or writes");
      check(w >= window.get() && w <= window.get() + room, "output inside the window");
      out.append(window.get(), static_cast<std::size_t>(w - window.get()));
    }
  }
  char last[1];
  char* w = r.finish(last, last + 1);
  out.append(last, static_cast<std::size_t>(w - last));
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const bool utf8 = (data[0] & 1) != 0;
  const bool reverse = (data[0] & 2) != 0;
  const std::size_t lines = data[1] % 16;
  std::size_t at = 2;
  http::CharsetMap map("a", utf8 ? "utf-8" : "b");
  static const char kHex[] = "0123456789ABCDEF";
  for (std::size_t i = 0; i < lines && at + 4 <= size; ++i, at += 4) {
    std::string from = {kHex[data[at] >> 4], kHex[data[at] & 15]};
    std::string to;
    const std::size_t n = utf8 ? 1 + data[at + 1] % 3 : 1;
    for (std::size_t j = 0; j < n; ++j) {
      const std::uint8_t b = data[at + 1 + j];
      to += kHex[b >> 4];
      to += kHex[b & 15];
    }
    std::string_view bad;
    (void)map.add(from, to, bad);  // an invalid line is refused, the map stays usable
  }
  const std::size_t nsizes = at < size ? 1 + data[at] % 8 : 0;
  const std::uint8_t* sizes = data + at;
  at += nsizes;
  if (at > size) return 0;
  const std::string_view body(reinterpret_cast<const char*>(data + at), size - at);

  http::Recoder r;
  r.map = &map;
  if (!utf8) {
    r.kind = http::Recode::kEightBit;
    r.reverse = reverse;
    check(recode(r, body, sizes, nsizes).size() == body.size(), "8-bit keeps the length");
    return 0;
  }
  if (reverse) {
    r.kind = http::Recode::kFromUtf8;
    (void)recode(r, body, sizes, nsizes);
    return 0;
  }
  r.kind = http::Recode::kToUtf8;
  const std::string to = recode(r, body, sizes, nsizes);
  http::Recoder back;
  back.map = &map;
  back.kind = http::Recode::kFromUtf8;
  check(recode(back, to, sizes, nsizes).size() == body.size(), "UTF-8 comes back to one byte each");
  return 0;
}
