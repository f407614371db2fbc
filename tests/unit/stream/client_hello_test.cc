// The ClientHello parser of ssl_preread (stream/client_hello.cc): real
// ClientHellos of TLS 1.2 and 1.3 with and without SNI and ALPN, whole, cut
// at every byte, fed a byte at a time and re-framed into many records; the
// SSL 2.0 hello; inputs that are not TLS or are malformed.
#include "stream/client_hello.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "client_hello_samples.h"

namespace vigil::stream {
namespace {

using R = ClientHelloParser::Result;

struct Parsed {
  R result = R::kAgain;
  std::string version;
  std::string server_name;
  std::string alpn;
};

// Feeds `input` in pieces cut at `cuts` (offsets, increasing).
Parsed parse(std::string_view input, const std::vector<std::size_t>& cuts = {},
             std::size_t out_size = 0) {
  std::vector<char> out(out_size != 0 ? out_size : input.size() + 1);
  ClientHelloParser p(out.data(), out.size());
  std::size_t from = 0;
  std::vector<std::size_t> ends = cuts;
  ends.push_back(input.size());
  R r = R::kAgain;
  for (std::size_t end : ends) {
    r = p.feed(reinterpret_cast<const unsigned char*>(input.data()) + from, end - from);
    from = end;
  }
  EXPECT_EQ(r, p.result());
  return {r, std::string(ClientHelloParser::version_name(p.version())),
          r == R::kDone ? std::string(p.server_name()) : "",
          r == R::kDone ? std::string(p.alpn_protocols()) : ""};
}

struct Sample {
  std::string_view bytes;
  const char* version;
  const char* server_name;
  const char* alpn;
};

const Sample kSamples[] = {
    {samples::kTls13SniAlpn, "TLSv1.3", "example.com", "h2,http/1.1"},
    {samples::kTls13Plain, "TLSv1.3", "", ""},
    {samples::kTls12SniAlpn, "TLSv1.2", "backend.test", "http/1.1"},
    {samples::kTls12Plain, "TLSv1.2", "", ""},
    {samples::kTls13Sni, "TLSv1.3", "a.example.org", ""},
    {samples::kTls12Alpn, "TLSv1.2", "", "foo,bar,baz"},
};

void expect_sample(const Parsed& got, const Sample& s) {
  EXPECT_EQ(got.result, R::kDone);
  EXPECT_EQ(got.version, s.version);
  EXPECT_EQ(got.server_name, s.server_name);
  EXPECT_EQ(got.alpn, s.alpn);
}

TEST(ClientHello, CapturedHellosWhole) {
  for (const Sample& s : kSamples) {
    SCOPED_TRACE(s.server_name);
    expect_sample(parse(s.bytes), s);
  }
}

TEST(ClientHello, CapturedHellosSplitAtEveryByte) {
  for (const Sample& s : kSamples) {
    for (std::size_t i = 1; i < s.bytes.size(); ++i) {
      SCOPED_TRACE(testing::Message() << s.server_name << " cut at " << i);
      expect_sample(parse(s.bytes, {i}), s);
    }
  }
}

TEST(ClientHello, CapturedHellosByteAtATime) {
  for (const Sample& s : kSamples) {
    std::vector<std::size_t> cuts;
    for (std::size_t i = 1; i < s.bytes.size(); ++i) cuts.push_back(i);
    expect_sample(parse(s.bytes, cuts), s);
  }
}

// Every prefix asks for more: a hello is never judged before it is whole.
TEST(ClientHello, EveryPrefixAsksForMore) {
  for (const Sample& s : kSamples) {
    for (std::size_t n = 1; n < s.bytes.size(); ++n) {
      ASSERT_EQ(parse(s.bytes.substr(0, n)).result, R::kAgain) << n;
    }
  }
}

// The handshake message of a captured hello, carried by records of `size`
// bytes each (RFC 8446 §5.1 lets a handshake message span records).
std::string reframe(std::string_view hello, std::size_t size) {
  const std::string_view message = hello.substr(5);
  std::string out;
  for (std::size_t i = 0; i < message.size(); i += size) {
    const std::string_view part = message.substr(i, size);
    out += std::string{0x16, 0x03, 0x01, static_cast<char>(part.size() >> 8),
                       static_cast<char>(part.size() & 0xff)};
    out += part;
  }
  return out;
}

TEST(ClientHello, HelloSpanningManyRecords) {
  for (const Sample& s : kSamples) {
    for (std::size_t size : {1, 2, 3, 7, 16, 100}) {
      const std::string framed = reframe(s.bytes, size);
      SCOPED_TRACE(testing::Message() << s.server_name << " records of " << size);
      expect_sample(parse(framed), s);
      expect_sample(parse(framed, {framed.size() / 3, framed.size() / 2}), s);
    }
  }
}

TEST(ClientHello, NotTlsIsKnownFromTheFirstByte) {
  EXPECT_EQ(parse("G").result, R::kNotHello);
  EXPECT_EQ(parse("GET / HTTP/1.1\r\n\r\n").result, R::kNotHello);
  EXPECT_EQ(parse(std::string(1000, 'x')).result, R::kNotHello);
  // An alert record, or a handshake record of no SSL 3/TLS version.
  EXPECT_EQ(parse(std::string("\x15\x03\x01\x00\x02", 5)).result, R::kNotHello);
  EXPECT_EQ(parse(std::string("\x16\x02\x00\x00\x02", 5)).result, R::kNotHello);
}

// What nginx's stream_ssl_preread*.t send by hand.
std::string be32(std::initializer_list<unsigned> words) {
  std::string out;
  for (unsigned w : words) {
    out += std::string{static_cast<char>(w >> 24), static_cast<char>(w >> 16),
                       static_cast<char>(w >> 8), static_cast<char>(w)};
  }
  return out;
}

TEST(ClientHello, ServerNameSplitAcrossRecords) {
  std::string r = be32({0x16030100, 0x3b010000, 0x380303ac, 0x8c8678a0, 0xaa1e7eed, 0x3644eed6,
                        0xc3bd2c69, 0x7bc7deda, 0x249db0e3, 0x0c339eba, 0xa80b7600, 0x00020000,
                        0x0100000d, 0x00000009, 0x00070000, 0x04666f6f, 0x16030100});
  r += std::string{0x01, 0x66};
  const Parsed p = parse(r);
  EXPECT_EQ(p.result, R::kDone);
  EXPECT_EQ(p.server_name, "foof");
}

std::string legacy_hello(unsigned record_version, unsigned hello_version) {
  std::string r{0x16,
                static_cast<char>(record_version >> 8),
                static_cast<char>(record_version),
                0x00,
                0x38,
                0x01,
                0x00,
                0x00,
                0x34,
                static_cast<char>(hello_version >> 8),
                static_cast<char>(hello_version),
                static_cast<char>(0xeb)};
  r += be32({0x6357cdba, 0xa6b8d853, 0xf1f6ac0f, 0xdf03178c, 0x0ae41824, 0xe7643682, 0x3c1b273f,
             0xbfde4b00, 0x00000000});
  r += '\x0c';
  r += be32({0x00000008, 0x00060000, 0x03666f6f});
  return r;
}

TEST(ClientHello, LegacyVersions) {
  EXPECT_EQ(parse(legacy_hello(0x0300, 0x0300)).version, "SSLv3");
  EXPECT_EQ(parse(legacy_hello(0x0301, 0x0301)).version, "TLSv1");
  EXPECT_EQ(parse(legacy_hello(0x0301, 0x0302)).version, "TLSv1.1");
  const Parsed p = parse(legacy_hello(0x0301, 0x0303));
  EXPECT_EQ(p.result, R::kDone);
  EXPECT_EQ(p.version, "TLSv1.2");
  EXPECT_EQ(p.server_name, "foo");
  // An SSL 3.0 record version carries a newer hello.
  EXPECT_EQ(parse(legacy_hello(0x0300, 0x0303)).server_name, "foo");
}

// The hello's length is shorter than its extensions say: malformed, and
// nothing of the server name is reported.
TEST(ClientHello, ShortHelloLength) {
  std::string r = be32({0x16030100, 0x38010000, 0x330303eb, 0x6357cdba, 0xa6b8d853, 0xf1f6ac0f,
                        0xdf03178c, 0x0ae41824, 0xe7643682, 0x3c1b273f, 0xbfde4b00, 0x00000000});
  r += '\x0c';
  r += be32({0x00000008, 0x00060000, 0x03666f6f});
  const Parsed p = parse(r);
  EXPECT_NE(p.result, R::kDone);
  EXPECT_EQ(p.server_name, "");
}

// supported_versions with a draft of TLS 1.3 (0x7f1c).
std::string draft_hello(unsigned extension_length) {
  std::string r = be32({0x16030100, 0x33010000, 0x2f0303eb, 0x6357cdba, 0xa6b8d853, 0xf1f6ac0f,
                        0xdf03178c, 0x0ae41824, 0xe7643682, 0x3c1b273f, 0xbfde4b00, 0x00000000});
  r += std::string{0x07, 0x00, 0x2b, 0x00, static_cast<char>(extension_length), 0x02, 0x7f, 0x1c};
  return r;
}

TEST(ClientHello, SupportedVersionsDraftIsTls13) {
  const Parsed p = parse(draft_hello(3));
  EXPECT_EQ(p.result, R::kDone);
  EXPECT_EQ(p.version, "TLSv1.3");
}

// nginx-tests' stream_ssl_preread_protocol.t sends this hello with the
// extension's length 7, though 3 bytes follow: malformed (RFC 8446 §4.2),
// so no version is reported, as the nginx 1.22 that checks extensions
// (CVE-2026-123640) answers too.
TEST(ClientHello, ExtensionLongerThanItsData) {
  EXPECT_EQ(parse(draft_hello(7)).result, R::kNotHello);
}

TEST(ClientHello, SslVersion2Hello) {
  const std::string v2{static_cast<char>(0x80), 0x1c, 0x01, 0x00, 0x02, 0x00, 0x03};
  EXPECT_EQ(parse(v2).result, R::kDone);
  EXPECT_EQ(parse(v2).version, "SSLv2");
  const std::string tls1{static_cast<char>(0x80), 0x1c, 0x01, 0x03, 0x01, 0x00, 0x03};
  EXPECT_EQ(parse(tls1, {1, 2, 3, 4}).version, "TLSv1");
}

// A minimal hello with the given extensions block.
std::string hello_with(const std::string& extensions) {
  std::string body{0x03, 0x03};
  body += std::string(32, '\x11');
  body += std::string{0x00, 0x00, 0x02, 0x13, 0x01, 0x01, 0x00};
  body += static_cast<char>(extensions.size() >> 8);
  body += static_cast<char>(extensions.size());
  body += extensions;
  std::string msg{0x01, 0x00, static_cast<char>(body.size() >> 8), static_cast<char>(body.size())};
  msg += body;
  std::string r{0x16, 0x03, 0x01, static_cast<char>(msg.size() >> 8),
                static_cast<char>(msg.size())};
  return r + msg;
}

std::string ext(unsigned type, const std::string& data) {
  return std::string{static_cast<char>(type >> 8), static_cast<char>(type),
                     static_cast<char>(data.size() >> 8), static_cast<char>(data.size())} +
         data;
}

TEST(ClientHello, Malformed) {
  // An empty ALPN protocol name (RFC 7301 §3.1).
  EXPECT_EQ(parse(hello_with(ext(16, std::string{0x00, 0x01, 0x00}))).result, R::kNotHello);
  // A server name longer than its list.
  EXPECT_EQ(
      parse(hello_with(ext(0, std::string{0x00, 0x06, 0x00, 0x00, 0x09, 'a', 'b', 'c'}))).result,
      R::kNotHello);
  // A name type other than host_name.
  EXPECT_EQ(parse(hello_with(ext(0, std::string{0x00, 0x04, 0x01, 0x00, 0x01, 'a'}))).result,
            R::kNotHello);
  // An extension longer than the extensions.
  std::string e = ext(5, "abc");
  e[3] = 9;
  EXPECT_EQ(parse(hello_with(e)).result, R::kNotHello);
  // A list shorter than its extension: bytes left over.
  EXPECT_EQ(parse(hello_with(ext(43, std::string{0x02, 0x03, 0x04, 0x00}))).result, R::kNotHello);
  // An odd supported_versions list.
  EXPECT_EQ(parse(hello_with(ext(43, std::string{0x03, 0x03, 0x04, 0x03}))).result, R::kNotHello);
  // A record that is not a handshake after the first.
  std::string two = reframe(samples::kTls12Plain, 50);
  two[55] = 0x17;
  EXPECT_EQ(parse(two).result, R::kNotHello);
}

TEST(ClientHello, WellFormedBuiltHellos) {
  const Parsed p =
      parse(hello_with(ext(0, std::string{0x00, 0x04, 0x00, 0x00, 0x01, 'z'}) +
                       ext(16, std::string{0x00, 0x06, 0x02, 'h', '2', 0x02, 'h', '3'}) +
                       ext(43, std::string{0x04, 0x0a, 0x0a, 0x03, 0x03})));
  EXPECT_EQ(p.result, R::kDone);
  EXPECT_EQ(p.server_name, "z");
  EXPECT_EQ(p.alpn, "h2,h3");
  EXPECT_EQ(p.version, "TLSv1.2");  // the GREASE entry is passed over
  // No extensions at all.
  std::string bare = hello_with("");
  bare.resize(bare.size() - 2);
  bare[4] = static_cast<char>(bare[4] - 2);
  bare[8] = static_cast<char>(bare[8] - 2);
  EXPECT_EQ(parse(bare).result, R::kDone);
  // What comes after the hello is not looked at.
  EXPECT_EQ(parse(std::string(samples::kTls13SniAlpn) + "\x17garbage").result, R::kDone);
}

// The output memory bounds what is kept: too small is malformed, never an overflow.
TEST(ClientHello, OutputMemoryIsBounded) {
  EXPECT_EQ(parse(samples::kTls13SniAlpn, {}, 4).result, R::kNotHello);
  EXPECT_EQ(parse(samples::kTls13SniAlpn, {}, 11 + 11).result, R::kDone);
  EXPECT_EQ(parse(samples::kTls13SniAlpn, {}, 11 + 10).result, R::kNotHello);
}

}  // namespace
}  // namespace vigil::stream
