#pragma once
// Writes a message head into memory sized beforehand (the response and the
// proxy compute the length first, then write at most that many bytes): no
// bounds checks here, the caller's length pass is the bound.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace vigil::http {

// `v` in decimal, written at the end of `tmp`: the digits, as a view into it.
inline std::string_view decimal(std::uint64_t v, char (&tmp)[20]) {
  char* const end = tmp + sizeof tmp;
  char* b = end;
  do {
    *--b = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  return std::string_view(b, static_cast<std::size_t>(end - b));
}

struct HeadWriter {
  char* p;
  void put(std::string_view s) {
    std::memcpy(p, s.data(), s.size());
    p += s.size();
  }
  void put_uint(std::uint64_t v) {
    char tmp[20];
    put(decimal(v, tmp));
  }
  // A path percent-encoding what may not appear raw in a URI reference
  // (RFC 3986 §2, §3.3): controls, space, non-ASCII, and "\"%<>\\^`{|}#?".
  // Up to 3 bytes out per byte in.
  void put_escaped_path(std::string_view s) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    for (unsigned char ch : s) {
      const bool raw = ch > 0x20 && ch < 0x7f && std::strchr("\"%<>\\^`{|}#?", ch) == nullptr;
      if (raw) {
        *p++ = static_cast<char>(ch);
      } else {
        *p++ = '%';
        *p++ = kHex[ch >> 4];
        *p++ = kHex[ch & 0xf];
      }
    }
  }
};

}  // namespace vigil::http
