// chunked-body = *chunk last-chunk trailer-section CRLF  (RFC 9112 §7.1)
//
// Framing lines must end in CRLF here. RFC 9112 §2.2 lets a recipient accept a
// bare LF in the start-line and field lines; we do that in the head, but not
// inside a chunked body: disagreeing with an intermediary about where a chunk
// ends is how requests get smuggled, and no real client sends bare LFs here.

#include "codec/chunked.h"

#include "codec/chars.h"

namespace vigil::http {
namespace {

enum State : std::uint8_t {
  kSizeStart,  // first HEXDIG of chunk-size
  kSize,
  kSizeWs,  // BWS after the size: only ';' may follow
  kExt,     // chunk-ext, skipped
  kSizeLf,
  kData,
  kDataCr,
  kDataLf,
  kTrailerStart,
  kTrailerName,
  kTrailerValue,
  kTrailerLf,
  kFinalLf,
  kDone,
  kError,
};

// Chunk sizes are kept below 2^63 so they fit an off_t.
constexpr std::uint64_t kMaxChunkSize = std::numeric_limits<std::int64_t>::max();

}  // namespace

bool ChunkedParser::done() const {
  return state_ == kDone;
}

ChunkStatus ChunkedParser::fail(ChunkStatus status, const char* why) {
  state_ = kError;
  error_status_ = status;
  error_ = why;
  return status;
}

ChunkStatus ChunkedParser::parse(std::string_view in, std::size_t& used, std::string_view& data) {
  used = 0;
  if (state_ == kError) return error_status_;
  if (state_ == kDone) return ChunkStatus::kDone;

  const std::size_t n = in.size();
  std::size_t i = 0;
  while (i < n) {
    if (state_ == kData) {
      const std::size_t take = size_ < n - i ? static_cast<std::size_t>(size_) : n - i;
      data = in.substr(i, take);
      size_ -= take;
      used = i + take;
      if (size_ == 0) state_ = kDataCr;
      return ChunkStatus::kData;
    }

    used = i;  // on an error: the offset of the offending octet in `in`
    const char c = in[i++];
    if (state_ <= kSizeLf && ++line_ > limits_.max_size_line) {
      return fail(ChunkStatus::kBadRequest, "chunk size line too long");
    }
    if (state_ >= kTrailerStart && ++line_ > limits_.max_trailers) {
      return fail(ChunkStatus::kBadRequest, "trailer section too long");
    }

    switch (state_) {
      case kSizeStart:
      case kSize:
        if (chars::is_hex(c)) {
          if (size_ > (kMaxChunkSize >> 4)) {
            return fail(ChunkStatus::kBadRequest, "chunk size overflow");
          }
          size_ = size_ << 4 | static_cast<std::uint64_t>(chars::hex_value(c));
          state_ = kSize;
        } else if (state_ == kSize && c == '\r') {
          state_ = kSizeLf;
        } else if (state_ == kSize && c == ';') {
          state_ = kExt;
        } else if (state_ == kSize && chars::is_ows(c)) {
          state_ = kSizeWs;
        } else {
          return fail(ChunkStatus::kBadRequest, "invalid chunk size");
        }
        break;

      case kSizeWs:
        if (c == ';') {
          state_ = kExt;
        } else if (!chars::is_ows(c)) {
          return fail(ChunkStatus::kBadRequest, "invalid chunk extension");
        }
        break;

      case kExt:
        // chunk-ext is ignored (RFC 9112 §7.1.1: a recipient MUST ignore
        // extensions it does not understand); only its octets are checked.
        if (c == '\r') {
          state_ = kSizeLf;
        } else if (!chars::is_field_char(c)) {
          return fail(ChunkStatus::kBadRequest, "invalid chunk extension");
        }
        break;

      case kSizeLf:
        if (c != '\n') return fail(ChunkStatus::kBadRequest, "bare CR after chunk size");
        if (size_ > limits_.max_body - body_) {
          return fail(ChunkStatus::kTooLarge, "request body too large");
        }
        body_ += size_;
        line_ = 0;
        state_ = size_ == 0 ? kTrailerStart : kData;
        break;

      case kDataCr:
        if (c != '\r') return fail(ChunkStatus::kBadRequest, "no CRLF after chunk data");
        state_ = kDataLf;
        break;

      case kDataLf:
        if (c != '\n') return fail(ChunkStatus::kBadRequest, "no CRLF after chunk data");
        size_ = 0;
        line_ = 0;
        state_ = kSizeStart;
        break;

      // trailer-section = *( field-line CRLF ), discarded: we act on no
      // trailer field (RFC 9110 §6.5.1 lets a recipient drop them).
      case kTrailerStart:
        if (c == '\r') {
          state_ = kFinalLf;
        } else if (chars::is_tchar(c)) {
          state_ = kTrailerName;
        } else {
          return fail(ChunkStatus::kBadRequest, "invalid trailer field");
        }
        break;

      case kTrailerName:
        if (c == ':') {
          state_ = kTrailerValue;
        } else if (!chars::is_tchar(c)) {
          return fail(ChunkStatus::kBadRequest, "invalid trailer field");
        }
        break;

      case kTrailerValue:
        if (c == '\r') {
          state_ = kTrailerLf;
        } else if (!chars::is_field_char(c)) {
          return fail(ChunkStatus::kBadRequest, "invalid trailer field");
        }
        break;

      case kTrailerLf:
        if (c != '\n') return fail(ChunkStatus::kBadRequest, "bare CR in trailer");
        state_ = kTrailerStart;
        break;

      case kFinalLf:
        if (c != '\n') return fail(ChunkStatus::kBadRequest, "bare CR at end of body");
        used = i;
        state_ = kDone;
        return ChunkStatus::kDone;

      default:
        return fail(ChunkStatus::kBadRequest, "parser misuse");
    }
  }
  used = n;
  return ChunkStatus::kAgain;
}

}  // namespace vigil::http
