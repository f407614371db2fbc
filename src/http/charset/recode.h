#pragma once
// The charset tables of charset_map and the recoding of bytes through them
// (charset.h), apart from requests and buffers so a fuzzer can drive them.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

namespace vigil::http {

inline constexpr std::size_t kUtf8Entry = 4;  // a UTF-8 entry: its length, then up to 3 bytes
// The most bytes one input character becomes ("&#1114111;").
inline constexpr std::size_t kRecodeMaxOut = sizeof("&#1114111;") - 1;

// One charset_map: between `from` (8-bit) and `to` (8-bit, or UTF-8). Bytes
// below 0x80 map to themselves, the others to '?' until a line maps them.
struct CharsetMap {
  std::string from;  // lower case
  std::string to;
  bool utf8 = false;
  std::array<std::uint8_t, 256> from_to{};  // 8-bit to 8-bit, both ways
  std::array<std::uint8_t, 256> to_from{};
  std::array<std::array<std::uint8_t, kUtf8Entry>, 256> from_utf8{};  // [0] = length
  std::unordered_map<std::uint32_t, std::uint8_t> utf8_from;          // code point -> byte

  CharsetMap(std::string_view from_name, std::string_view to_name);
  // A line of the block: byte `from` (hex) to byte `to` (hex), or to the
  // UTF-8 bytes `to` (hex) of one character. False when either is invalid
  // (`bad` names which).
  bool add(std::string_view from_hex, std::string_view to_hex, std::string_view& bad);
};

enum class Recode : std::uint8_t { kEightBit, kToUtf8, kFromUtf8 };

// Recodes a stream through a map, one direction; a UTF-8 sequence split
// between two inputs is kept for the next.
struct Recoder {
  const CharsetMap* map = nullptr;
  Recode kind = Recode::kEightBit;
  bool reverse = false;  // 8-bit: from the map's `to` to its `from`
  std::uint8_t saved[4] = {};
  std::uint32_t saved_len = 0;

  // Recodes [in, in_end) into [out, end) as far as both allow; moves `in`
  // on and returns the new output end. A character is written whole or not
  // at all: with kRecodeMaxOut bytes of room, at least one byte is read or
  // written ('?' for a sequence the next byte cuts short).
  char* run(const std::uint8_t*& in, const std::uint8_t* in_end, char* out, char* end);
  // The input is over: a sequence cut short becomes '?' (1 byte of room).
  char* finish(char* out, char* end);
};

bool is_utf8_name(std::string_view name);

}  // namespace vigil::http
