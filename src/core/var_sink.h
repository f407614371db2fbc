#pragma once
// Where a variable's value is written: into memory when the caller has given
// some, else only counted. Complex values are evaluated in two passes, as
// nginx's scripts are: the length first (a sink without memory), then the
// bytes into memory of that size the caller chose (a log buffer, an arena),
// so nothing is allocated per value. Used by the stream variables
// (stream/variables.h) and http (http/core/variables.h).

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace vigil {

class VarSink {
 public:
  explicit VarSink(char* out) : p_(out) {}
  void put(std::string_view s) {
    if (p_ != nullptr && !s.empty()) std::memcpy(p_ + n_, s.data(), s.size());
    n_ += s.size();
  }
  void put_char(char c) {
    if (p_ != nullptr) p_[n_] = c;
    ++n_;
  }
  void put_uint(std::uint64_t v) {
    char tmp[20];
    const auto r = std::to_chars(tmp, tmp + sizeof tmp, v);
    put(std::string_view(tmp, static_cast<std::size_t>(r.ptr - tmp)));
  }
  // "1.234": milliseconds as seconds with three decimals.
  void put_msec(std::uint64_t ms) {
    put_uint(ms / 1000);
    put_char('.');
    put_char(static_cast<char>('0' + ms % 1000 / 100));
    put_char(static_cast<char>('0' + ms % 100 / 10));
    put_char(static_cast<char>('0' + ms % 10));
  }
  std::size_t size() const { return n_; }
  // Where the next byte goes (null in the length pass), for a writer that
  // fills it itself and then advance()s.
  char* at() const { return p_ != nullptr ? p_ + n_ : nullptr; }
  void advance(std::size_t n) { n_ += n; }

 private:
  char* p_;
  std::size_t n_ = 0;
};

}  // namespace vigil
