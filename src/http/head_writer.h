#pragma once
// Writes a message head into memory sized beforehand (the proxy computes the
// length first, then writes exactly that many bytes): no bounds checks here,
// the caller's length pass is the bound.

#include <cstdint>
#include <cstring>
#include <string_view>

namespace vigil::http {

struct HeadWriter {
  char* p;
  void put(std::string_view s) {
    std::memcpy(p, s.data(), s.size());
    p += s.size();
  }
  void put_uint(std::uint64_t v) {
    char tmp[20];
    int k = 0;
    do {
      tmp[k++] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v != 0);
    while (k > 0) *p++ = tmp[--k];
  }
};

}  // namespace vigil::http
