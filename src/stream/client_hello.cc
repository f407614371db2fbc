#include "stream/client_hello.h"

#include <algorithm>
#include <cstring>

namespace vigil::stream {

namespace {

constexpr unsigned char kHandshakeRecord = 22;  // ContentType handshake (RFC 8446 §5.1)
constexpr unsigned char kClientHello = 1;       // HandshakeType client_hello
constexpr std::uint32_t kServerNameExtension = 0;
constexpr std::uint32_t kAlpnExtension = 16;
constexpr std::uint32_t kSupportedVersionsExtension = 43;
constexpr unsigned char kHostName = 0;  // NameType host_name (RFC 6066 §3)

}  // namespace

std::uint16_t ClientHelloParser::version() const {
  return best_supported_ != 0 ? best_supported_ : legacy_version_;
}

std::string_view ClientHelloParser::version_name(std::uint16_t version) {
  switch (version) {
    case 0x0002:
      return "SSLv2";
    case 0x0300:
      return "SSLv3";
    case 0x0301:
      return "TLSv1";
    case 0x0302:
      return "TLSv1.1";
    case 0x0303:
      return "TLSv1.2";
    case 0x0304:
      return "TLSv1.3";
    default:
      return {};
  }
}

ClientHelloParser::Result ClientHelloParser::feed(const unsigned char* data, std::size_t n) {
  while (result_ == Result::kAgain && n > 0) {
    if (record_left_ == 0) {
      if (const Result r = feed_record_header(data, n); r != Result::kAgain) return r;
      continue;
    }
    const std::size_t take = std::min<std::size_t>(n, record_left_);
    record_left_ -= static_cast<std::uint32_t>(take);
    const Result r = feed_handshake(data, take);
    data += take;
    n -= take;
    if (r != Result::kAgain) return r;
  }
  return result_;
}

// A record's 5-byte header: ContentType, ProtocolVersion, length (RFC 8446
// §5.1). The first one may instead start an SSL 2.0 ClientHello, whose
// first bytes are a 2-byte length with the high bit set, the message type 1
// and the version (RFC 6101 appendix E.2); that version is all it tells.
ClientHelloParser::Result ClientHelloParser::feed_record_header(const unsigned char*& p,
                                                                std::size_t& n) {
  // Not a handshake is known from the first byte: a protocol whose client
  // sends less than a header is not kept waiting.
  if (record_head_len_ == 0 && first_record_ && p[0] != kHandshakeRecord && (p[0] & 0x80) == 0) {
    return fail();
  }
  const std::size_t take = std::min<std::size_t>(n, sizeof record_head_ - record_head_len_);
  std::memcpy(record_head_ + record_head_len_, p, take);
  record_head_len_ = static_cast<std::uint8_t>(record_head_len_ + take);
  p += take;
  n -= take;
  if (record_head_len_ < sizeof record_head_) return Result::kAgain;
  const unsigned char* h = record_head_;
  record_head_len_ = 0;
  if (first_record_ && (h[0] & 0x80) != 0 && h[2] == kClientHello && (h[3] == 0 || h[3] == 3)) {
    legacy_version_ = static_cast<std::uint16_t>((h[3] << 8) | h[4]);
    return result_ = Result::kDone;
  }
  // Any SSL 3.0 or TLS record version: clients put 3.0 or 3.1 in the first.
  if (h[0] != kHandshakeRecord || h[1] != 3) return fail();
  first_record_ = false;
  record_left_ = (std::uint32_t{h[3]} << 8) | h[4];
  return Result::kAgain;
}

// The handshake bytes of one record: each field is taken whole (into
// scratch_, into out_, or skipped), however many calls bring it.
ClientHelloParser::Result ClientHelloParser::feed_handshake(const unsigned char* p, std::size_t n) {
  for (;;) {
    while (need_ == 0) {
      if (const Result r = field_done(); r != Result::kAgain) return result_ = r;
    }
    if (n == 0) return Result::kAgain;
    const std::uint32_t take = static_cast<std::uint32_t>(std::min<std::size_t>(n, need_));
    if (sink_ == Sink::kScratch) {
      std::memcpy(scratch_ + got_, p, take);
    } else if (sink_ == Sink::kOut) {
      std::memcpy(out_ + out_len_, p, take);
      out_len_ += take;
    }
    got_ += take;
    need_ -= take;
    pos_ += take;
    p += take;
    n -= take;
  }
}

ClientHelloParser::Result ClientHelloParser::expect(State state, std::uint32_t size, Sink sink,
                                                    std::uint32_t limit) {
  if (size > limit || pos_ > limit - size) return fail();  // past its enclosing structure
  if (sink == Sink::kOut && size > out_size_ - out_len_) return fail();
  state_ = state;
  need_ = size;
  got_ = 0;
  sink_ = sink;
  return Result::kAgain;
}

// The current field is complete: what it says, and which field comes next
// (RFC 8446 §4.1.2's ClientHello, RFC 6066 §3, RFC 7301 §3.1).
ClientHelloParser::Result ClientHelloParser::field_done() {
  switch (state_) {
    case State::kHandshakeHead: {
      if (scratch_[0] != kClientHello) return fail();
      const std::uint32_t len =
          (std::uint32_t{scratch_[1]} << 16) | (std::uint32_t{scratch_[2]} << 8) | scratch_[3];
      message_end_ = pos_ + len;
      return expect(State::kLegacyVersion, 2, Sink::kScratch, message_end_);
    }
    case State::kLegacyVersion:
      legacy_version_ = static_cast<std::uint16_t>(scratch16());
      return expect(State::kRandom, 32, Sink::kSkip, message_end_);
    case State::kRandom:
      return expect(State::kSessionIdLength, 1, Sink::kScratch, message_end_);
    case State::kSessionIdLength:
      return expect(State::kSessionId, scratch_[0], Sink::kSkip, message_end_);
    case State::kSessionId:
      return expect(State::kCipherSuitesLength, 2, Sink::kScratch, message_end_);
    case State::kCipherSuitesLength:
      return expect(State::kCipherSuites, scratch16(), Sink::kSkip, message_end_);
    case State::kCipherSuites:
      return expect(State::kCompressionLength, 1, Sink::kScratch, message_end_);
    case State::kCompressionLength:
      return expect(State::kCompression, scratch_[0], Sink::kSkip, message_end_);
    case State::kCompression:
      // A hello of TLS 1.2 and before may end here, without extensions.
      if (pos_ == message_end_) return Result::kDone;
      return expect(State::kExtensionsLength, 2, Sink::kScratch, message_end_);
    case State::kExtensionsLength:
      if (scratch16() > message_end_ - pos_) return fail();
      extensions_end_ = pos_ + scratch16();
      return next_extension();
    case State::kExtensionHead: {
      const std::uint32_t type = scratch16();
      const std::uint32_t len = (std::uint32_t{scratch_[2]} << 8) | scratch_[3];
      // Each list stays inside its extension and each extension inside the
      // extensions (RFC 8446 §4.2): a length that disagrees is malformed.
      if (len > extensions_end_ - pos_) return fail();
      extension_end_ = pos_ + len;
      // A repeated extension (RFC 8446 §4.2 forbids it) is skipped: the
      // first one is the one read.
      if (type == kServerNameExtension && !have_host_) {
        return expect(State::kServerNameListLength, 2, Sink::kScratch, extension_end_);
      }
      if (type == kAlpnExtension && !have_alpn_) {
        return expect(State::kAlpnListLength, 2, Sink::kScratch, extension_end_);
      }
      if (type == kSupportedVersionsExtension) {
        return expect(State::kVersionsLength, 1, Sink::kScratch, extension_end_);
      }
      return expect(State::kExtensionRest, len, Sink::kSkip, extension_end_);
    }
    case State::kExtensionRest:
      return next_extension();
    case State::kServerNameListLength:
      if (scratch16() > extension_end_ - pos_) return fail();
      list_end_ = pos_ + scratch16();
      have_host_ = true;
      return next_server_name();
    case State::kServerNameHead: {
      // host_name is the only type there is, and only one of a type is
      // allowed (RFC 6066 §3): anything else is malformed.
      if (scratch_[0] != kHostName || host_len_ != 0) return fail();
      const std::uint32_t len = (std::uint32_t{scratch_[1]} << 8) | scratch_[2];
      if (len == 0) return fail();  // HostName<1..2^16-1>
      host_off_ = out_len_;
      return expect(State::kServerName, len, Sink::kOut, list_end_);
    }
    case State::kServerName:
      host_len_ = out_len_ - host_off_;
      return next_server_name();
    case State::kAlpnListLength:
      if (scratch16() > extension_end_ - pos_) return fail();
      list_end_ = pos_ + scratch16();
      have_alpn_ = true;
      alpn_off_ = out_len_;
      return next_alpn();
    case State::kAlpnLength:
      if (scratch_[0] == 0) return fail();  // a protocol name is never empty
      if (out_len_ > alpn_off_) {
        if (out_len_ == out_size_) return fail();
        out_[out_len_++] = ',';
      }
      return expect(State::kAlpnName, scratch_[0], Sink::kOut, list_end_);
    case State::kAlpnName:
      return next_alpn();
    case State::kVersionsLength:
      if (scratch_[0] > extension_end_ - pos_) return fail();
      list_end_ = pos_ + scratch_[0];
      return next_version();
    case State::kVersion: {
      auto v = static_cast<std::uint16_t>(scratch16());
      if ((v >> 8) == 0x7f) v = 0x0304;  // a draft of TLS 1.3 (0x7f00 + draft)
      // GREASE values (RFC 8701) and versions unknown here are passed over.
      if (v >= 0x0300 && v <= 0x0304 && v > best_supported_) best_supported_ = v;
      return next_version();
    }
  }
  return fail();
}

ClientHelloParser::Result ClientHelloParser::next_extension() {
  if (pos_ == extensions_end_) return Result::kDone;
  return expect(State::kExtensionHead, 4, Sink::kScratch, extensions_end_);
}

// A list fills its extension: bytes after it are malformed.
ClientHelloParser::Result ClientHelloParser::finish_extension() {
  if (pos_ != extension_end_) return fail();
  return next_extension();
}

ClientHelloParser::Result ClientHelloParser::next_server_name() {
  if (pos_ == list_end_) return finish_extension();
  return expect(State::kServerNameHead, 3, Sink::kScratch, list_end_);
}

ClientHelloParser::Result ClientHelloParser::next_alpn() {
  if (pos_ == list_end_) {
    alpn_len_ = out_len_ - alpn_off_;
    return finish_extension();
  }
  return expect(State::kAlpnLength, 1, Sink::kScratch, list_end_);
}

ClientHelloParser::Result ClientHelloParser::next_version() {
  if (pos_ == list_end_) return finish_extension();
  return expect(State::kVersion, 2, Sink::kScratch, list_end_);
}

}  // namespace vigil::stream
