#pragma once
// The 9-byte head of an HTTP/2 frame (RFC 9113 §4.1), written where Vigil
// makes frames itself: the server's merged header blocks and the gRPC
// upstream's requests. Internal to src/http.

#include <cstdint>

namespace vigil::http::h2 {

inline constexpr std::uint32_t kFrameHeadSize = 9;

inline void put_frame_head(void* out, std::uint32_t len, std::uint8_t type, std::uint8_t flags,
                           std::uint32_t stream) {
  auto* p = static_cast<std::uint8_t*>(out);
  p[0] = static_cast<std::uint8_t>(len >> 16);
  p[1] = static_cast<std::uint8_t>(len >> 8);
  p[2] = static_cast<std::uint8_t>(len);
  p[3] = type;
  p[4] = flags;
  p[5] = static_cast<std::uint8_t>((stream >> 24) & 0x7f);  // the reserved bit is 0
  p[6] = static_cast<std::uint8_t>(stream >> 16);
  p[7] = static_cast<std::uint8_t>(stream >> 8);
  p[8] = static_cast<std::uint8_t>(stream);
}

}  // namespace vigil::http::h2
