#pragma once
// The start of a TLS connection read without terminating it (nginx's
// ngx_stream_ssl_preread_module): a parser fed the client's first bytes as
// they arrive, however the reads and the TLS records cut them, that finds
// the ClientHello's highest protocol version, its server name (SNI, RFC 6066
// §3) and its ALPN protocols (RFC 7301 §3.1). It copies nothing but those
// names, into memory the caller gives (the ClientHello is at most as long as
// what was read, so that memory the size of the read buffer always has
// room), and keeps no pointer to the input. No server dependencies: the
// preread phase (ssl_preread.cc), the tests and the fuzzer drive it alike.
//
//   ClientHelloParser p(out, out_size);
//   switch (p.feed(bytes, n)) {    // again with the next bytes while kAgain
//     case ClientHelloParser::Result::kDone: p.server_name(); p.alpn_protocols(); ...
//     case ClientHelloParser::Result::kNotHello: not TLS, or malformed
//   }

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace vigil::stream {

class ClientHelloParser {
 public:
  enum class Result : std::uint8_t {
    kAgain,     // every byte fed was taken; the ClientHello goes on
    kDone,      // the ClientHello is complete (bytes after it are not looked at)
    kNotHello,  // not a TLS handshake, or a malformed ClientHello
  };

  // `out` receives the server name and the ALPN list; `out_size` bytes.
  ClientHelloParser(char* out, std::size_t out_size) : out_(out), out_size_(out_size) {}
  ClientHelloParser(const ClientHelloParser&) = delete;
  ClientHelloParser& operator=(const ClientHelloParser&) = delete;

  // The next `n` bytes from the client. After kDone or kNotHello, more
  // bytes change nothing and the same result comes back.
  Result feed(const unsigned char* data, std::size_t n);

  Result result() const { return result_; }
  // The highest version the client offers: supported_versions (RFC 8446
  // §4.2.1) when it lists a known one, else the ClientHello's
  // legacy_version; 0x0002 for an SSL 2.0 hello. 0 while none is known.
  std::uint16_t version() const;
  // "TLSv1.2" for 0x0303 and so on (SSL_get_version()'s names); empty for
  // an unknown version.
  static std::string_view version_name(std::uint16_t version);
  // The DNS host name of the server_name extension (empty without one).
  std::string_view server_name() const { return {out_ + host_off_, host_len_}; }
  // The ALPN protocols, in the client's order, joined by commas.
  std::string_view alpn_protocols() const { return {out_ + alpn_off_, alpn_len_}; }

 private:
  enum class State : std::uint8_t {
    kHandshakeHead,  // msg_type, length
    kLegacyVersion,
    kRandom,
    kSessionIdLength,
    kSessionId,
    kCipherSuitesLength,
    kCipherSuites,
    kCompressionLength,
    kCompression,
    kExtensionsLength,
    kExtensionHead,  // extension_type, extension_data length
    kExtensionRest,  // skipped
    kServerNameListLength,
    kServerNameHead,  // name_type, length
    kServerName,
    kAlpnListLength,
    kAlpnLength,
    kAlpnName,
    kVersionsLength,
    kVersion,
  };
  // Where the bytes of the current field go.
  enum class Sink : std::uint8_t { kScratch, kOut, kSkip };

  Result feed_record_header(const unsigned char*& p, std::size_t& n);
  Result feed_handshake(const unsigned char* p, std::size_t n);
  Result field_done();
  Result next_extension();
  Result next_server_name();
  Result next_alpn();
  Result next_version();
  Result finish_extension();
  // Expects the next field: `size` bytes that must end by `limit`.
  Result expect(State state, std::uint32_t size, Sink sink, std::uint32_t limit);
  Result fail() { return result_ = Result::kNotHello; }
  std::uint32_t scratch16() const { return (std::uint32_t{scratch_[0]} << 8) | scratch_[1]; }

  char* out_;
  std::size_t out_size_;
  std::size_t out_len_ = 0;
  std::size_t host_off_ = 0;
  std::size_t host_len_ = 0;
  std::size_t alpn_off_ = 0;
  std::size_t alpn_len_ = 0;

  Result result_ = Result::kAgain;
  // The record layer: its 5-byte header, then `record_left_` bytes of body.
  unsigned char record_head_[5] = {};
  std::uint8_t record_head_len_ = 0;
  bool first_record_ = true;
  std::uint32_t record_left_ = 0;

  // The handshake message, counted in bytes of its body (after its 4-byte
  // header); the ends of the enclosing structures in the same count.
  State state_ = State::kHandshakeHead;
  Sink sink_ = Sink::kScratch;
  std::uint32_t need_ = 4;  // bytes of the current field still to come
  std::uint32_t got_ = 0;   // of the current field, taken so far
  std::uint32_t pos_ = 0;
  std::uint32_t message_end_ = 0;
  std::uint32_t extensions_end_ = 0;
  std::uint32_t extension_end_ = 0;
  std::uint32_t list_end_ = 0;
  unsigned char scratch_[4] = {};

  bool have_host_ = false;
  bool have_alpn_ = false;
  std::uint16_t legacy_version_ = 0;
  std::uint16_t best_supported_ = 0;  // the highest known supported_versions entry
};

}  // namespace vigil::stream
