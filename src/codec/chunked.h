#pragma once
// The chunked transfer coding of a request body (RFC 9112 §7.1), decoded
// incrementally over the caller's buffer: the parser hands back ranges of the
// input that are body data and copies nothing.
//
//   ChunkedParser cp({.max_body = client_max_body_size});
//   for (;;) {
//     std::size_t used; std::string_view data;
//     auto st = cp.parse({b.pos, b.last}, used, data);
//     b.pos += used;
//     kData: keep or discard `data` (it lies inside [old b.pos, b.pos)); loop
//     kAgain: read more (all input was consumed; nothing of it is needed again)
//     kDone: the body and its trailer section are over; the next pipelined
//            request starts at b.pos
//     kBadRequest: 400; kTooLarge: 413
//   }

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string_view>

namespace vigil::http {

enum class ChunkStatus : std::uint8_t {
  kData,        // `data` holds body bytes
  kAgain,       // every byte consumed, more needed
  kDone,        // last-chunk, trailer section and the final CRLF consumed
  kBadRequest,  // 400
  kTooLarge,    // the chunk sizes add up to more than max_body: 413
};

struct ChunkedLimits {
  // Largest body (sum of chunk sizes); the server's client_max_body_size.
  std::uint64_t max_body = std::numeric_limits<std::uint64_t>::max();
  // Longest chunk-size line with its extensions, which we skip: an unbounded
  // extension would be a free way to keep the server reading.
  std::uint32_t max_size_line = 4096;
  // Total bytes of the trailer section, parsed and discarded.
  std::uint32_t max_trailers = 8192;
};

class ChunkedParser {
 public:
  explicit ChunkedParser(ChunkedLimits limits = {}) : limits_(limits) {}

  void reset() { *this = ChunkedParser(limits_); }

  // Decodes from `in`, which continues exactly where the last call stopped.
  // `used` is the number of bytes consumed. On kData, `data` is a non-empty
  // range of `in` ending at in.data() + used.
  ChunkStatus parse(std::string_view in, std::size_t& used, std::string_view& data);

  // Sum of the chunk sizes announced so far.
  std::uint64_t body_size() const { return body_; }
  bool done() const;
  const char* error() const { return error_; }

 private:
  ChunkStatus fail(ChunkStatus status, const char* why);

  ChunkedLimits limits_;
  std::uint8_t state_ = 0;
  ChunkStatus error_status_ = ChunkStatus::kBadRequest;
  std::uint32_t line_ = 0;  // bytes of the current size line / trailer section
  std::uint64_t size_ = 0;  // the chunk size being read, then what is left of the chunk
  std::uint64_t body_ = 0;
  const char* error_ = "";
};

}  // namespace vigil::http
