// brotli and zstd beside gzip over real sockets: the coding Accept-Encoding's
// q-values choose, bodies decoded back by the libraries' own decoders (the
// test links libbrotlidec and libzstd's decompressor) and compared with the
// file or the proxied response, precompressed .br/.zst files, HEAD, ranges,
// Vary, and the directives' effect.
#include <brotli/decode.h>
#include <brotli/encode.h>
#include <gtest/gtest.h>
#include <zlib.h>
#include <zstd.h>

#include <initializer_list>
#include <string>

#include "integration/http_harness.h"
#include "test_process.h"

namespace vigil::test {
namespace {

std::string unbrotli(const std::string& in) {
  BrotliDecoderState* s = BrotliDecoderCreateInstance(nullptr, nullptr, nullptr);
  if (s == nullptr) return "<no brotli>";
  std::string out;
  const auto* next_in = reinterpret_cast<const std::uint8_t*>(in.data());
  std::size_t avail_in = in.size();
  BrotliDecoderResult rc;
  do {
    std::uint8_t buf[16384];
    std::uint8_t* next_out = buf;
    std::size_t avail_out = sizeof buf;
    rc = BrotliDecoderDecompressStream(s, &avail_in, &next_in, &avail_out, &next_out, nullptr);
    out.append(reinterpret_cast<char*>(buf), sizeof buf - avail_out);
  } while (rc == BROTLI_DECODER_RESULT_NEEDS_MORE_OUTPUT);
  BrotliDecoderDestroyInstance(s);
  if (rc != BROTLI_DECODER_RESULT_SUCCESS || avail_in != 0) return "<bad brotli>";
  return out;
}

std::string unzstd(const std::string& in) {
  ZSTD_DCtx* d = ZSTD_createDCtx();
  if (d == nullptr) return "<no zstd>";
  std::string out;
  ZSTD_inBuffer input = {in.data(), in.size(), 0};
  std::size_t rc = 1;
  while (input.pos < input.size || rc != 0) {
    char buf[16384];
    ZSTD_outBuffer output = {buf, sizeof buf, 0};
    const std::size_t before = input.pos;
    rc = ZSTD_decompressStream(d, &output, &input);
    if (ZSTD_isError(rc)) {
      out = "<bad zstd>";
      break;
    }
    out.append(buf, output.pos);
    if (output.pos == 0 && input.pos == before) {
      if (rc != 0) out = "<truncated zstd>";
      break;
    }
  }
  ZSTD_freeDCtx(d);
  return out;
}

std::string gunzip(const std::string& in) {
  z_stream zs{};
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) return "<no zlib>";
  std::string out;
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  int rc = Z_OK;
  while (rc == Z_OK) {
    char buf[16384];
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof buf;
    rc = inflate(&zs, Z_NO_FLUSH);
    out.append(buf, sizeof buf - zs.avail_out);
  }
  inflateEnd(&zs);
  return rc == Z_STREAM_END ? out : "<bad gzip>";
}

// Decodes a body by its Content-Encoding.
std::string decode(const Response& r) {
  const std::string ce = r.header("content-encoding");
  if (ce == "br") return unbrotli(r.body);
  if (ce == "zstd") return unzstd(r.body);
  if (ce == "gzip") return gunzip(r.body);
  if (ce.empty()) return r.body;
  return "<unknown coding " + ce + ">";
}

std::string page(std::size_t size) {
  std::string s;
  for (int i = 0; s.size() < size; ++i) s += "<p>line " + std::to_string(i * 7919 % 100003) + "</p>\n";
  s.resize(size);
  return s;
}

std::string ae(const std::string& value) { return "Accept-Encoding: " + value + "\r\n"; }

class HttpBrotliZstd : public ::testing::Test {
 protected:
  bool start(const std::string& server_body, const std::string& http = "") {
    port_ = free_port();
    return server_.start(http + "\nserver { listen 127.0.0.1:" + std::to_string(port_) +
                         "; root html; access_log off;\n" + server_body + "\n}");
  }
  Response request(const std::string& target, const std::string& extra = "") {
    return get(port_, simple_get(target, "localhost", extra));
  }
  VigilServer server_;
  int port_ = 0;
};

TEST_F(HttpBrotliZstd, EachCodingDecodesBackToTheFile) {
  ASSERT_TRUE(start("location /br/ { brotli on; }\n"
                    "location /zstd/ { zstd on; }\n"
                    "location /br9/ { brotli on; brotli_comp_level 9; brotli_window 64k; "
                    "brotli_buffers 2 1k; sendfile off; output_buffers 1 4k; }\n"
                    "location /zstd19/ { zstd on; zstd_comp_level 19; zstd_buffers 2 1k; }"))
      << server_.output();
  for (std::size_t size : {100, 3000, 300 * 1024}) {
    const std::string body = page(size);
    for (const char* dir : {"br", "zstd", "br9", "zstd19"}) {
      server_.write(std::string("html/") + dir + "/p.html", body);
      const std::string coding = dir[0] == 'b' ? "br" : "zstd";
      Response r = request(std::string("/") + dir + "/p.html", ae("gzip, deflate, br, zstd"));
      ASSERT_TRUE(r.complete) << dir << " " << size;
      EXPECT_EQ(r.status, 200);
      EXPECT_EQ(r.header("content-encoding"), coding) << dir << " " << size;
      EXPECT_EQ(r.header("vary"), "Accept-Encoding");
      EXPECT_FALSE(r.has("content-length"));
      EXPECT_FALSE(r.has("accept-ranges"));
      EXPECT_EQ(r.header("etag").substr(0, 3), "W/\"");
      EXPECT_LT(r.body.size(), body.size()) << dir << " " << size;
      EXPECT_EQ(decode(r), body) << dir << " " << size;
    }
  }
  // Keep-alive: several coded responses on one connection.
  Client c(port_);
  ASSERT_TRUE(c.ok());
  const std::string body = page(300 * 1024);
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(c.send(simple_get(i % 2 ? "/br9/p.html" : "/zstd19/p.html", "localhost",
                                  ae("br, zstd"))));
    Response r = c.read_response();
    ASSERT_TRUE(r.complete) << i;
    EXPECT_EQ(decode(r), body) << i;
  }
}

TEST_F(HttpBrotliZstd, QValuesChooseTheCoding) {
  ASSERT_TRUE(start("location / { gzip on; brotli on; zstd on; }\n"
                    "location /gz/ { gzip on; brotli off; zstd off; }\n"
                    "location /nobr/ { gzip on; zstd on; }"))
      << server_.output();
  const std::string body = page(5000);
  server_.write("html/q.html", body);
  server_.write("html/gz/q.html", body);
  server_.write("html/nobr/q.html", body);
  const std::pair<const char*, const char*> cases[] = {
      {"gzip, deflate, br, zstd", "br"},  // a tie: br first
      {"gzip, zstd", "zstd"},             // a tie: zstd before gzip
      {"gzip", "gzip"},
      {"br;q=0.5, gzip;q=0.8", "gzip"},
      {"br;q=0.5, zstd;q=0.9, gzip;q=0.8", "zstd"},
      {"br;q=0, zstd;q=0, gzip", "gzip"},
      {"br;q=0, zstd;q=0", ""},
      {"BR;Q=1.0", "br"},
      {"br;q=0.001, gzip;q=0.000", "br"},
      {"*", ""},  // as nginx's gzip: only named codings count
      {"identity", ""},
      {"br;q=2", ""},  // a malformed q refuses
  };
  for (const auto& [value, want] : cases) {
    Response r = request("/q.html", ae(value));
    ASSERT_TRUE(r.complete) << value;
    EXPECT_EQ(r.header("content-encoding"), want) << value;
    EXPECT_EQ(decode(r), body) << value;
    EXPECT_EQ(r.header("vary"), "Accept-Encoding") << value;
  }
  Response r = request("/q.html");
  EXPECT_FALSE(r.has("content-encoding"));
  EXPECT_EQ(r.body, body);
  r = request("/gz/q.html", ae("br, zstd, gzip;q=0.1"));
  EXPECT_EQ(r.header("content-encoding"), "gzip");
  EXPECT_EQ(decode(r), body);
  EXPECT_FALSE(r.has("vary")) << "gzip alone: gzip_vary decides";
  r = request("/nobr/q.html", ae("br, gzip;q=0.5"));
  EXPECT_EQ(r.header("content-encoding"), "gzip");
  EXPECT_EQ(decode(r), body);
}

TEST_F(HttpBrotliZstd, TypesMinLengthHeadRangesAndErrors) {
  ASSERT_TRUE(start("location / { brotli on; zstd on; brotli_min_length 1000; "
                    "zstd_types text/plain; zstd_min_length 10; }"))
      << server_.output();
  const std::string small = page(500);
  const std::string big = page(4000);
  server_.write("html/small.html", small);
  server_.write("html/big.html", big);
  server_.write("html/t.txt", big);
  const std::string both = ae("br, zstd");
  // 500 bytes: under brotli_min_length, so zstd.
  Response r = request("/small.html", both);
  EXPECT_EQ(r.header("content-encoding"), "zstd");
  EXPECT_EQ(decode(r), small);
  r = request("/big.html", both);
  EXPECT_EQ(r.header("content-encoding"), "br");
  // text/plain: in zstd_types only.
  r = request("/t.txt", both);
  EXPECT_EQ(r.header("content-encoding"), "zstd");
  EXPECT_EQ(decode(r), big);
  r = request("/t.txt", ae("br"));
  EXPECT_FALSE(r.has("content-encoding"));
  EXPECT_EQ(r.body, big);

  // HEAD: the head a GET gets, no body.
  r = get(port_, "HEAD /big.html HTTP/1.1\r\nHost: x\r\n" + both + "\r\n", true);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("content-encoding"), "br");
  EXPECT_FALSE(r.has("content-length"));
  // No range of a coded body: 200 and all of it.
  r = request("/big.html", both + "Range: bytes=0-9\r\n");
  EXPECT_EQ(r.status, 200);
  EXPECT_FALSE(r.has("content-range"));
  EXPECT_EQ(decode(r), big);
  r = request("/big.html", "Range: bytes=0-9\r\n");
  EXPECT_EQ(r.status, 206);
  EXPECT_EQ(r.body, big.substr(0, 10));
  // A 404 page is coded (zstd: it is shorter than brotli_min_length); a 304 is not.
  r = request("/missing.html", both);
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.header("content-encoding"), "zstd");
  EXPECT_NE(decode(r).find("404 Not Found"), std::string::npos);
  const std::string etag = request("/big.html").header("etag");
  r = request("/big.html", both + "If-None-Match: " + etag + "\r\n");
  EXPECT_EQ(r.status, 304);
  EXPECT_FALSE(r.has("content-encoding"));
}

TEST_F(HttpBrotliZstd, ProxiedResponses) {
  port_ = free_port();
  const std::string p = std::to_string(port_);
  ASSERT_TRUE(server_.start("server { listen 127.0.0.1:" + p + "; root html; access_log off;\n"
                            "location /proxy/ { brotli on; zstd on; gzip on; gzip_proxied any;\n"
                            "  proxy_pass http://127.0.0.1:" + p + "/local/; }\n"
                            "location /local/ { }\n}"))
      << server_.output();
  const std::string body = page(200 * 1024);
  server_.write("html/local/p.html", body);
  for (const char* coding : {"br", "zstd", "gzip"}) {
    Response r = request("/proxy/p.html", ae(coding));
    ASSERT_TRUE(r.complete) << coding;
    EXPECT_EQ(r.header("content-encoding"), coding);
    EXPECT_EQ(decode(r), body) << coding;
  }
  // Through a proxy (Via): gzip_proxied applies to every coding.
  Response r = request("/proxy/p.html", ae("br") + "Via: 1.1 cache\r\n");
  EXPECT_EQ(r.header("content-encoding"), "br") << "gzip_proxied any";
}

TEST_F(HttpBrotliZstd, PrecompressedFiles) {
  ASSERT_TRUE(start("location /on/ { brotli_static on; zstd_static on; gzip_static on; }\n"
                    "location /always/ { brotli_static always; }\n"
                    "location /off/ { }"))
      << server_.output();
  const std::string body = page(6000);
  for (const char* d : {"on", "always", "off"}) {
    const std::string base = std::string("html/") + d + "/s.html";
    server_.write(base, body);
    server_.write(base + ".br", "BR-BYTES");
    server_.write(base + ".zst", "ZST-BYTES");
    server_.write(base + ".gz", "GZ-BYTES");
  }
  const std::tuple<const char*, const char*, const char*> cases[] = {
      {"br, zstd, gzip", "br", "BR-BYTES"},
      {"zstd, gzip", "zstd", "ZST-BYTES"},
      {"gzip;q=0.9, zstd;q=0.5", "gzip", "GZ-BYTES"},
      {"br;q=0.1, zstd;q=0.2", "zstd", "ZST-BYTES"},
      {"deflate", "", nullptr},
  };
  for (const auto& [value, coding, bytes] : cases) {
    Response r = request("/on/s.html", ae(value));
    ASSERT_TRUE(r.complete) << value;
    EXPECT_EQ(r.header("content-encoding"), coding) << value;
    EXPECT_EQ(r.body, bytes != nullptr ? std::string(bytes) : body) << value;
    EXPECT_EQ(r.header("content-type"), "text/html") << value;
  }
  Response r = request("/on/s.html", ae("br"));
  EXPECT_EQ(r.header("content-length"), "8");
  EXPECT_EQ(r.header("vary"), "Accept-Encoding");
  // HEAD of a precompressed file: its length, no body.
  r = get(port_, "HEAD /on/s.html HTTP/1.1\r\nHost: x\r\n" + ae("zstd") + "\r\n", true);
  EXPECT_EQ(r.header("content-encoding"), "zstd");
  EXPECT_EQ(r.header("content-length"), "9");
  // always: whatever the client says.
  r = request("/always/s.html");
  EXPECT_EQ(r.header("content-encoding"), "br");
  EXPECT_EQ(r.body, "BR-BYTES");
  r = request("/off/s.html", ae("br, zstd, gzip"));
  EXPECT_FALSE(r.has("content-encoding"));
  EXPECT_EQ(r.body, body);
  // No .br: the next the client takes.
  server_.write("html/on/only.html", body);
  server_.write("html/on/only.html.zst", "ZST-ONLY");
  r = request("/on/only.html", ae("br, zstd"));
  EXPECT_EQ(r.header("content-encoding"), "zstd");
  EXPECT_EQ(r.body, "ZST-ONLY");
}

TEST_F(HttpBrotliZstd, BadValuesStopTheLoad) {
  for (const char* bad : {"brotli_comp_level 12;", "zstd_comp_level 0;", "brotli_window 3000;",
                          "brotli_window 32m;", "brotli maybe;", "zstd_static sometimes;",
                          "brotli_buffers 0 4k;"}) {
    server_.write("conf/bad.conf", std::string("events {}\nhttp {\nserver {\n") + bad + "\n}\n}\n");
    auto [rc, out] = run({VIGIL_BINARY, "-p", server_.dir(), "-c", "conf/bad.conf", "-t"});
    EXPECT_NE(rc, 0) << bad;
    EXPECT_NE(out.find("[emerg]"), std::string::npos) << bad << ": " << out;
    EXPECT_NE(out.find("invalid value"), std::string::npos) << bad << ": " << out;
    EXPECT_NE(out.find("bad.conf:4"), std::string::npos) << bad << ": " << out;
  }
}

}  // namespace
}  // namespace vigil::test
