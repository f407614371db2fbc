#pragma once
// Octet classes of HTTP/1.1 (RFC 9110 §5.6, RFC 9112, RFC 3986), as constexpr
// tables: the parsers test one table entry per byte and never branch on ranges.
// Internal to src/http.

#include <array>
#include <cstdint>

namespace vigil::http::chars {

enum : std::uint8_t {
  kTchar = 1 << 0,      // token character, RFC 9110 §5.6.2
  kFieldChar = 1 << 1,  // field-vchar / SP / HTAB: allowed inside a field value (§5.5)
  kTarget = 1 << 2,     // allowed in a request-target (see target_char below)
  kHex = 1 << 3,        // HEXDIG
  kDigit = 1 << 4,      // DIGIT
  kAlpha = 1 << 5,      // ALPHA
  kRegName = 1 << 6,    // host name characters we accept (alnum "-" "." "_")
};

constexpr std::array<std::uint8_t, 256> make_table() {
  std::array<std::uint8_t, 256> t{};
  for (int c = 0; c < 256; ++c) {
    std::uint8_t v = 0;
    const bool digit = c >= '0' && c <= '9';
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (digit) v |= kDigit | kHex;
    if (alpha) v |= kAlpha;
    if ((c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')) v |= kHex;
    if (digit || alpha) v |= kTchar | kRegName;
    switch (c) {
      case '!':
      case '#':
      case '$':
      case '%':
      case '&':
      case '\'':
      case '*':
      case '+':
      case '-':
      case '.':
      case '^':
      case '_':
      case '`':
      case '|':
      case '~':
        v |= kTchar;
        break;
      default:
        break;
    }
    if (c == '-' || c == '.' || c == '_') v |= kRegName;
    // field-vchar = VCHAR / obs-text; SP and HTAB may appear between them.
    if ((c >= 0x21 && c <= 0x7e) || c >= 0x80 || c == ' ' || c == '\t') v |= kFieldChar;
    // The request-target: every VCHAR except '#'. RFC 3986 allows fewer
    // (no `"<>\^{|}` raw), but browsers send `{|}^` unencoded in paths and
    // queries (WHATWG URL percent-encode sets), so refusing them would break
    // real clients; they are harmless here because the path is decoded and
    // normalized before use. '#' starts a fragment, which is never part of a
    // request-target (RFC 9112 §3.2). CTLs, SP, DEL and octets >= 0x80 are
    // refused: user agents percent-encode them.
    if (c >= 0x21 && c <= 0x7e && c != '#') v |= kTarget;
    t[static_cast<std::size_t>(c)] = v;
  }
  return t;
}

inline constexpr std::array<std::uint8_t, 256> kTable = make_table();

constexpr bool has(char c, std::uint8_t cls) {
  return (kTable[static_cast<unsigned char>(c)] & cls) != 0;
}
constexpr bool is_tchar(char c) {
  return has(c, kTchar);
}
constexpr bool is_field_char(char c) {
  return has(c, kFieldChar);
}
constexpr bool is_target_char(char c) {
  return has(c, kTarget);
}
constexpr bool is_hex(char c) {
  return has(c, kHex);
}
constexpr bool is_digit(char c) {
  return has(c, kDigit);
}
constexpr bool is_alpha(char c) {
  return has(c, kAlpha);
}
constexpr bool is_reg_name_char(char c) {
  return has(c, kRegName);
}
constexpr bool is_ows(char c) {
  return c == ' ' || c == '\t';
}

// Value of a HEXDIG (only meaningful when is_hex(c)).
constexpr int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return c - 'A' + 10;
}

constexpr char to_lower(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c;
}

}  // namespace vigil::http::chars
