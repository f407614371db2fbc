#include "http/charset/recode.h"

#include <cstdio>
#include <string>

#include "codec/tokens.h"

namespace vigil::http {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

int hex_value(std::string_view s) {
  if (s.empty() || s.size() > 6) return -1;
  int v = 0;
  for (char c : s) {
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      d = c - 'A' + 10;
    } else {
      return -1;
    }
    v = v * 16 + d;
  }
  return v;
}

// The length of a UTF-8 sequence starting with `lead` (0: not a lead byte).
std::size_t utf8_length(std::uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xc2 && lead <= 0xdf) return 2;
  if (lead >= 0xe0 && lead <= 0xef) return 3;
  if (lead >= 0xf0 && lead <= 0xf4) return 4;
  return 0;
}

// The code point of the complete UTF-8 sequence [p, p + n), or -1 when it
// is not a valid one (a lead byte of another length, overlong, a
// surrogate, past U+10FFFF).
std::int32_t utf8_decode(const std::uint8_t* p, std::size_t n) {
  if (n == 0 || utf8_length(p[0]) != n) return -1;
  std::uint32_t cp;
  std::uint32_t min;
  if (n == 2) {
    cp = p[0] & 0x1fu;
    min = 0x80;
  } else if (n == 3) {
    cp = p[0] & 0x0fu;
    min = 0x800;
  } else if (n == 4) {
    cp = p[0] & 0x07u;
    min = 0x10000;
  } else {
    return n == 1 && p[0] < 0x80 ? p[0] : -1;
  }
  for (std::size_t i = 1; i < n; ++i) {
    if ((p[i] & 0xc0u) != 0x80u) return -1;
    cp = (cp << 6) | (p[i] & 0x3fu);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return -1;
  return static_cast<std::int32_t>(cp);
}

}  // namespace

bool is_utf8_name(std::string_view name) {
  return iequals(name, "utf-8");
}

CharsetMap::CharsetMap(std::string_view from_name, std::string_view to_name)
    : from(lower(from_name)), to(lower(to_name)), utf8(is_utf8_name(to_name)) {
  for (int i = 0; i < 256; ++i) {
    const auto b = static_cast<std::uint8_t>(i < 0x80 ? i : '?');
    from_to[i] = b;
    to_from[i] = b;
    from_utf8[i] = {1, b, 0, 0};
  }
}

bool CharsetMap::add(std::string_view from_hex, std::string_view to_hex, std::string_view& bad) {
  const int b = hex_value(from_hex);
  if (b < 0 || b > 255) {
    bad = from_hex;
    return false;
  }
  bad = to_hex;
  if (!utf8) {
    const int v = hex_value(to_hex);
    if (v < 0 || v > 255) return false;
    from_to[b] = static_cast<std::uint8_t>(v);
    to_from[v] = static_cast<std::uint8_t>(b);
    return true;
  }
  if (to_hex.empty() || to_hex.size() % 2 != 0 || to_hex.size() / 2 > kUtf8Entry - 1) return false;
  std::array<std::uint8_t, kUtf8Entry> seq{};
  seq[0] = static_cast<std::uint8_t>(to_hex.size() / 2);
  for (std::size_t i = 0; i < seq[0]; ++i) {
    const int v = hex_value(to_hex.substr(i * 2, 2));
    if (v < 0) return false;
    seq[i + 1] = static_cast<std::uint8_t>(v);
  }
  const std::int32_t cp = utf8_decode(seq.data() + 1, seq[0]);
  if (cp < 0) return false;
  from_utf8[b] = seq;
  utf8_from[static_cast<std::uint32_t>(cp)] = static_cast<std::uint8_t>(b);
  return true;
}

char* Recoder::run(const std::uint8_t*& in, const std::uint8_t* in_end, char* out, char* end) {
  const CharsetMap& m = *map;
  switch (kind) {
    case Recode::kEightBit: {
      const auto& table = reverse ? m.to_from : m.from_to;
      while (in < in_end && out < end) *out++ = static_cast<char>(table[*in++]);
      return out;
    }
    case Recode::kToUtf8:
      while (in < in_end) {
        const auto& seq = m.from_utf8[*in];
        if (static_cast<std::size_t>(end - out) < seq[0]) break;
        for (std::size_t i = 1; i <= seq[0]; ++i) *out++ = static_cast<char>(seq[i]);
        ++in;
      }
      return out;
    case Recode::kFromUtf8:
      break;
  }
  while (in < in_end && static_cast<std::size_t>(end - out) >= kRecodeMaxOut) {
    const std::uint8_t c = *in;
    if (saved_len == 0 && c < 0x80) {
      *out++ = static_cast<char>(c);
      ++in;
      continue;
    }
    if (saved_len > 0 && (c & 0xc0u) != 0x80u) {
      // A sequence cut short: '?' for it, and this byte starts over.
      *out++ = '?';
      saved_len = 0;
      continue;
    }
    if (saved_len == 0 && utf8_length(c) == 0) {
      *out++ = '?';
      ++in;
      continue;
    }
    saved[saved_len++] = c;
    ++in;
    const std::size_t need = utf8_length(saved[0]);
    if (saved_len < need) continue;
    const std::int32_t cp = utf8_decode(saved, need);
    saved_len = 0;
    if (cp < 0) {
      *out++ = '?';
      continue;
    }
    auto found = m.utf8_from.find(static_cast<std::uint32_t>(cp));
    if (found != m.utf8_from.end()) {
      *out++ = static_cast<char>(found->second);
    } else {
      char entity[kRecodeMaxOut + 1];
      const int n = std::snprintf(entity, sizeof entity, "&#%d;", static_cast<int>(cp));
      for (int i = 0; i < n; ++i) *out++ = entity[i];
    }
  }
  return out;
}

char* Recoder::finish(char* out, char* end) {
  if (saved_len > 0 && out < end) {
    *out++ = '?';
    saved_len = 0;
  }
  return out;
}

}  // namespace vigil::http
