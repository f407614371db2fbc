// gzip, gzip_static and gunzip over real sockets: what the head says, and a
// body that zlib (in the test) decodes back to the file or the proxied
// response, for static files (sendfile on and off, small and large), proxied
// responses, and each directive's effect; which coder (zlib streaming or
// libdeflate on a whole body) made a body, told by its bytes.
#include <gtest/gtest.h>
#include <libdeflate.h>
#include <zlib.h>

#include <initializer_list>
#include <string>

#include "integration/http_harness.h"

namespace vigil::test {
namespace {

// Decodes a gzip body (every member of it); "<bad gzip>" when it is not one.
std::string gunzip(const std::string& in) {
  z_stream zs{};
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) return "<no zlib>";
  std::string out;
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  char buf[16384];
  int rc = Z_OK;
  while (zs.avail_in > 0 || rc == Z_OK) {
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof buf;
    rc = inflate(&zs, Z_NO_FLUSH);
    out.append(buf, sizeof buf - zs.avail_out);
    if (rc == Z_STREAM_END) {
      if (zs.avail_in == 0) break;
      inflateReset(&zs);
      rc = Z_OK;
      continue;
    }
    if (rc != Z_OK) {
      out = "<bad gzip>";
      break;
    }
  }
  inflateEnd(&zs);
  return out;
}

// The same bytes gzip-compressed, by the test.
std::string gzip(const std::string& in) {
  z_stream zs{};
  if (deflateInit2(&zs, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) return {};
  std::string out(deflateBound(&zs, in.size()) + 32, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

// Text that compresses, but not to nothing: numbered lines.
std::string page(std::size_t size) {
  std::string s;
  for (int i = 0; s.size() < size; ++i) s += "<p>line " + std::to_string(i * 7919 % 100003) + "</p>\n";
  s.resize(size);
  return s;
}

constexpr char kAe[] = "Accept-Encoding: gzip, deflate\r\n";

class HttpGzip : public ::testing::Test {
 protected:
  bool start(const std::string& server_body, const std::string& http = "") {
    port_ = free_port();
    return server_.start(http + "\nserver { listen 127.0.0.1:" + std::to_string(port_) +
                         "; root html; access_log off;\n" + server_body + "\n}");
  }
  Response request(const std::string& target, const std::string& extra = "") {
    return get(port_, simple_get(target, "localhost", extra));
  }
  // The file html/DIR/name for each DIR (a location per directory).
  void put(std::initializer_list<const char*> dirs, const std::string& name,
           const std::string& content) {
    for (const char* d : dirs) server_.write(std::string("html/") + d + "/" + name, content);
  }
  VigilServer server_;
  int port_ = 0;
};

TEST_F(HttpGzip, CompressesAStaticPageForAClientThatTakesGzip) {
  ASSERT_TRUE(start("location / { gzip on; }")) << server_.output();
  const std::string body = page(3000);
  server_.write("html/index.html", body);
  Response r = request("/index.html", kAe);
  ASSERT_TRUE(r.complete);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("content-encoding"), "gzip");
  EXPECT_FALSE(r.has("content-length"));
  EXPECT_EQ(r.header("transfer-encoding"), "chunked");
  EXPECT_FALSE(r.has("accept-ranges"));
  EXPECT_EQ(r.header("etag").substr(0, 3), "W/\"") << "the ETag is weakened";
  EXPECT_FALSE(r.has("vary")) << "gzip_vary is off";
  EXPECT_LT(r.body.size(), body.size());
  EXPECT_EQ(gunzip(r.body), body);

  // Not for a client that does not take it, or refuses it with q=0.
  for (const char* ae : {"", "Accept-Encoding: deflate, br\r\n", "Accept-Encoding: gzip;q=0\r\n",
                         "Accept-Encoding: x-gzip\r\n", "Accept-Encoding: gzip; q=0.000\r\n"}) {
    r = request("/index.html", ae);
    EXPECT_FALSE(r.has("content-encoding")) << ae;
    EXPECT_EQ(r.header("content-length"), std::to_string(body.size())) << ae;
    EXPECT_EQ(r.body, body) << ae;
  }
  r = request("/index.html", "Accept-Encoding: br;q=1, GZIP;q=0.5\r\n");
  EXPECT_EQ(r.header("content-encoding"), "gzip");
  EXPECT_EQ(gunzip(r.body), body);
}

TEST_F(HttpGzip, LargeFilesWithSendfileOnAndOffAndSmallBuffers) {
  ASSERT_TRUE(start(
      "location /on/ { gzip on; sendfile on; }\n"
      "location /off/ { gzip on; sendfile off; output_buffers 1 4k; }\n"
      "location /small/ { gzip on; gzip_buffers 2 1k; gzip_comp_level 9; }"))
      << server_.output();
  const std::string body = page(700 * 1024);
  put({"on", "off", "small"}, "big.html", body);
  for (const char* where : {"/on/big.html", "/off/big.html", "/small/big.html"}) {
    Response r = request(where, kAe);
    ASSERT_TRUE(r.complete) << where;
    EXPECT_EQ(r.header("content-encoding"), "gzip") << where;
    EXPECT_EQ(gunzip(r.body), body) << where;
  }
  // Keep-alive: the next request on the same connection is answered too.
  Client c(port_);
  ASSERT_TRUE(c.ok());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(c.send(simple_get("/small/big.html", "localhost", kAe)));
    Response r = c.read_response();
    ASSERT_TRUE(r.complete) << i;
    EXPECT_EQ(gunzip(r.body), body) << i;
  }
}

TEST_F(HttpGzip, TypesMinLengthAndHttpVersion) {
  ASSERT_TRUE(start(
      "gzip on;\n"
      "location /plain/ { }\n"
      "location /typed/ { gzip_types text/plain; }\n"
      "location /any/ { gzip_types *; }\n"
      "location /min/ { gzip_min_length 2k; }\n"
      "location /v10/ { gzip_http_version 1.0; }"))
      << server_.output();
  const std::string text = page(1500);
  const auto all = {"plain", "typed", "any", "min", "v10"};
  put(all, "a.txt", text);
  put(all, "a.html", text);
  put(all, "tiny.html", "0123456789");
  EXPECT_FALSE(request("/plain/a.txt", kAe).has("content-encoding")) << "text/html only";
  EXPECT_EQ(request("/plain/a.html", kAe).header("content-encoding"), "gzip");
  EXPECT_FALSE(request("/plain/tiny.html", kAe).has("content-encoding")) << "under 20 bytes";
  Response r = request("/typed/a.txt", kAe);
  EXPECT_EQ(r.header("content-encoding"), "gzip");
  EXPECT_EQ(gunzip(r.body), text);
  EXPECT_EQ(request("/typed/a.html", kAe).header("content-encoding"), "gzip") << "always";
  EXPECT_EQ(request("/any/a.txt", kAe).header("content-encoding"), "gzip");
  EXPECT_FALSE(request("/min/a.html", kAe).has("content-encoding"));

  // HTTP/1.0: not by default; with gzip_http_version 1.0, the body ends
  // with the connection.
  Client c(port_);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c.send(std::string("GET /v10/a.html HTTP/1.0\r\n") + kAe + "\r\n"));
  r = c.read_response();  // the head; the body is what comes until the close
  EXPECT_EQ(r.header("content-encoding"), "gzip");
  EXPECT_FALSE(r.has("content-length"));
  ASSERT_TRUE(c.closed_within(5000));
  EXPECT_EQ(gunzip(c.extra()), text);
  r = get(port_, std::string("GET /plain/a.html HTTP/1.0\r\n") + kAe + "\r\n");
  EXPECT_FALSE(r.has("content-encoding"));
  EXPECT_EQ(r.body, text);
}

TEST_F(HttpGzip, VaryHeadRangeAndErrors) {
  ASSERT_TRUE(start("location / { gzip on; gzip_vary on; }")) << server_.output();
  const std::string body = page(4000);
  server_.write("html/v.html", body);
  Response r = request("/v.html");
  EXPECT_EQ(r.header("vary"), "Accept-Encoding") << "the answer depends on it, taken or not";
  EXPECT_FALSE(r.has("content-encoding"));
  r = request("/v.html", kAe);
  EXPECT_EQ(r.header("vary"), "Accept-Encoding");
  EXPECT_EQ(r.header("content-encoding"), "gzip");

  // HEAD: the head a GET gets, no body.
  r = get(port_, std::string("HEAD /v.html HTTP/1.1\r\nHost: x\r\n") + kAe + "\r\n", true);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("content-encoding"), "gzip");
  EXPECT_FALSE(r.has("content-length"));

  // A Range is not applied to the coded body (nginx: 200, the whole of it).
  r = request("/v.html", std::string(kAe) + "Range: bytes=0-9\r\n");
  EXPECT_EQ(r.status, 200);
  EXPECT_FALSE(r.has("content-range"));
  EXPECT_EQ(gunzip(r.body), body);
  r = request("/v.html", "Range: bytes=0-9\r\n");
  EXPECT_EQ(r.status, 206) << "without gzip, the range";

  // A 404 page is compressed as nginx does; a 304 is not touched.
  r = request("/missing.html", kAe);
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.header("content-encoding"), "gzip");
  EXPECT_NE(gunzip(r.body).find("404 Not Found"), std::string::npos);
  const std::string etag = request("/v.html").header("etag");
  r = request("/v.html", std::string(kAe) + "If-None-Match: " + etag + "\r\n");
  EXPECT_EQ(r.status, 304);
  EXPECT_FALSE(r.has("content-encoding"));
}

TEST_F(HttpGzip, ProxiedResponsesAndGzipProxied) {
  port_ = free_port();
  const std::string p = std::to_string(port_);
  ASSERT_TRUE(server_.start("server { listen 127.0.0.1:" + p + "; root html; access_log off;\n"
                            "location /proxy/ { gzip on; proxy_pass http://127.0.0.1:" + p +
                            "/local/; }\n"
                            "location /any/ { gzip on; gzip_proxied any; proxy_pass http://127.0.0.1:" +
                            p + "/local/; }\n"
                            "location /expired/ { gzip on; gzip_proxied expired; proxy_pass "
                            "http://127.0.0.1:" + p + "/exp/; }\n"
                            "location /local/ { gzip off; }\n"
                            "location /exp/ { expires 1h; }\n}"))
      << server_.output();
  const std::string body = page(100 * 1024);
  put({"local", "exp"}, "p.html", body);
  Response r = request("/proxy/p.html", kAe);
  ASSERT_TRUE(r.complete);
  EXPECT_EQ(r.header("content-encoding"), "gzip");
  EXPECT_FALSE(r.has("accept-ranges"));
  EXPECT_FALSE(r.has("content-length"));
  EXPECT_EQ(r.header("etag").substr(0, 3), "W/\"");
  EXPECT_EQ(gunzip(r.body), body);

  // Through a proxy (Via): gzip_proxied off by default.
  const std::string via = std::string(kAe) + "Via: 1.1 cache\r\n";
  r = request("/proxy/p.html", via);
  EXPECT_FALSE(r.has("content-encoding"));
  EXPECT_EQ(r.body, body);
  r = request("/any/p.html", via);
  EXPECT_EQ(r.header("content-encoding"), "gzip");
  EXPECT_EQ(gunzip(r.body), body);
  r = request("/expired/p.html", via);
  EXPECT_EQ(r.header("content-encoding"), "gzip") << "the backend's Expires";
  EXPECT_EQ(gunzip(r.body), body);
}

TEST_F(HttpGzip, GzipDisable) {
  ASSERT_TRUE(start("location / { gzip on; gzip_disable msie6 BadBot \"^curl/[0-7]\\.\"; }"))
      << server_.output();
  server_.write("html/d.html", page(2000));
  EXPECT_EQ(request("/d.html", kAe).header("content-encoding"), "gzip");
  EXPECT_FALSE(request("/d.html", std::string(kAe) + "User-Agent: a badbot/1.0\r\n")
                   .has("content-encoding"));
  EXPECT_FALSE(request("/d.html", std::string(kAe) +
                                      "User-Agent: Mozilla/4.0 (compatible; MSIE 6.0; Windows)\r\n")
                   .has("content-encoding"));
  EXPECT_EQ(request("/d.html", std::string(kAe) +
                                   "User-Agent: Mozilla/4.0 (compatible; MSIE 6.0; SV1)\r\n")
                .header("content-encoding"),
            "gzip");
  // A regular expression, without regard to case.
  EXPECT_FALSE(request("/d.html", std::string(kAe) + "User-Agent: CURL/7.1\r\n")
                   .has("content-encoding"));
  EXPECT_EQ(request("/d.html", std::string(kAe) + "User-Agent: curl/8.1\r\n")
                .header("content-encoding"),
            "gzip");
}

TEST_F(HttpGzip, GzipStaticServesTheGzFile) {
  ASSERT_TRUE(start("location /on/ { gzip_static on; gzip_vary on; }\n"
                    "location /always/ { gzip_static always; }\n"
                    "location /both/ { gzip_static on; gzip on; gzip_types text/plain; }"))
      << server_.output();
  const std::string text = page(5000);
  const std::string gz = gzip(text);
  const auto all = {"on", "always", "both"};
  put(all, "s.txt", text);
  put(all, "s.txt.gz", gz);
  put(all, "only.txt", "no gz here, plain text");
  Response r = request("/on/s.txt", kAe);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("content-encoding"), "gzip");
  EXPECT_EQ(r.header("content-type"), "text/plain");
  EXPECT_EQ(r.header("content-length"), std::to_string(gz.size()));
  EXPECT_EQ(r.header("vary"), "Accept-Encoding");
  EXPECT_EQ(r.body, gz);
  r = request("/on/s.txt");
  EXPECT_FALSE(r.has("content-encoding"));
  EXPECT_EQ(r.header("vary"), "Accept-Encoding");
  EXPECT_EQ(r.body, text);
  r = request("/on/only.txt", kAe);
  EXPECT_FALSE(r.has("content-encoding"));
  EXPECT_FALSE(r.has("vary")) << "no .gz: nothing depends on Accept-Encoding";
  // The index file of a directory, too.
  put({"on"}, "index.html", text);
  put({"on"}, "index.html.gz", gz);
  r = request("/on/", kAe);
  EXPECT_EQ(r.header("content-encoding"), "gzip");
  EXPECT_EQ(r.header("content-type"), "text/html");
  EXPECT_EQ(r.body, gz);
  EXPECT_EQ(request("/on/").body, text);
  r = request("/always/s.txt");
  EXPECT_EQ(r.header("content-encoding"), "gzip");
  EXPECT_EQ(r.body, gz);
  // A range of the .gz, as nginx.
  r = request("/on/s.txt", std::string(kAe) + "Range: bytes=0-1\r\n");
  EXPECT_EQ(r.status, 206);
  EXPECT_EQ(r.body, gz.substr(0, 2));
  // gzip does not code what gzip_static sent.
  r = request("/both/s.txt", kAe);
  EXPECT_EQ(r.body, gz);
  r = request("/both/only.txt", kAe);
  EXPECT_EQ(r.header("content-encoding"), "gzip") << "no .gz: gzip codes the file";
  EXPECT_EQ(gunzip(r.body), "no gz here, plain text");
}

TEST_F(HttpGzip, GunzipDecodesForClientsWithoutGzip) {
  port_ = free_port();
  const std::string p = std::to_string(port_);
  ASSERT_TRUE(server_.start(
      "server { listen 127.0.0.1:" + p + "; root html; access_log off;\n"
      "location /g/ { gunzip on; gunzip_buffers 4 1k; gzip_vary on; gzip_static always;\n"
      "  gzip_http_version 1.0; }\n"
      "location /p/ { gunzip on; proxy_pass http://127.0.0.1:" + p + "/g/; proxy_set_header Accept-Encoding gzip; }\n}"))
      << server_.output();
  const std::string text = page(64 * 1024);
  put({"g"}, "t.txt.gz", gzip(text));
  put({"g"}, "two.txt.gz", gzip(text) + gzip("and more"));
  put({"g"}, "bad.txt.gz", "\x1f\x8b this is not gzip at all, not at all");
  for (const char* where : {"/g/t.txt", "/p/t.txt"}) {
    Response r = request(where);
    ASSERT_TRUE(r.complete) << where;
    EXPECT_EQ(r.status, 200);
    EXPECT_FALSE(r.has("content-encoding")) << where;
    EXPECT_FALSE(r.has("content-length")) << where;
    EXPECT_EQ(r.body, text) << where;
    r = request(where, kAe);
    EXPECT_EQ(r.header("content-encoding"), "gzip") << where;
    EXPECT_EQ(gunzip(r.body), text) << where;
  }
  EXPECT_EQ(request("/g/t.txt").header("vary"), "Accept-Encoding");
  EXPECT_EQ(request("/g/two.txt").body, text + "and more") << "every member";
  Response r = get(port_, "HEAD /g/t.txt HTTP/1.1\r\nHost: x\r\n\r\n", true);
  EXPECT_FALSE(r.has("content-encoding"));
  // A broken body: the response is cut, the server goes on.
  r = request("/g/bad.txt");
  EXPECT_FALSE(r.complete);
  EXPECT_TRUE(server_.wait_output("inflate() failed"));
  EXPECT_EQ(request("/g/t.txt").body, text);
}

// ---- a whole body through libdeflate -------------------------------------------------

// What libdeflate makes of `in` at `level` (the whole-body path's output).
std::string libdeflate_gzip(const std::string& in, int level) {
  libdeflate_compressor* c = libdeflate_alloc_compressor(level);
  if (c == nullptr) return "<no libdeflate>";
  std::string out(libdeflate_gzip_compress_bound(c, in.size()), '\0');
  out.resize(libdeflate_gzip_compress(c, in.data(), in.size(), out.data(), out.size()));
  libdeflate_free_compressor(c);
  return out;
}

// What zlib's deflate makes of `in` at `level` with the window and memory
// level the filter gives a body of that length (the streaming path's output:
// zlib's bytes do not depend on how its input and output are cut).
std::string zlib_gzip(const std::string& in, int level) {
  int wbits = MAX_WBITS;
  int memlevel = MAX_MEM_LEVEL - 1;
  const auto n = static_cast<long long>(in.size());
  if (n > 0) {
    while (n < (1LL << (wbits - 1)) - 262) {
      --wbits;
      --memlevel;
    }
    if (memlevel < 1) memlevel = 1;
  }
  z_stream zs{};
  if (deflateInit2(&zs, level, Z_DEFLATED, wbits + 16, memlevel, Z_DEFAULT_STRATEGY) != Z_OK) {
    return "<no zlib>";
  }
  std::string out(deflateBound(&zs, in.size()) + 64, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return rc == Z_STREAM_END ? out : "<zlib failed>";
}

// gzip_buffers 4 4k: bodies up to 16 KiB are compressed whole (libdeflate at
// levels 1..7), longer ones stream through zlib, as do levels 8 and 9 and
// bodies too short for libdeflate to win. Every body decodes to the file;
// which coder made it shows in its bytes (the two make different streams).
TEST_F(HttpGzip, WholeBodiesUpToGzipBuffersGoThroughLibdeflate) {
  std::string locations;
  for (int level : {1, 7, 9}) {
    for (const char* sendfile : {"on", "off"}) {
      locations += "location /l" + std::to_string(level) + sendfile + "/ { gzip_comp_level " +
                   std::to_string(level) + "; sendfile " + sendfile + "; }\n";
    }
  }
  ASSERT_TRUE(start("gzip on; gzip_vary on; gzip_min_length 0; gzip_buffers 4 4k;\n" + locations))
      << server_.output();
  constexpr std::size_t kCap = 4 * 4096;
  const std::size_t sizes[] = {0, 1, kCap - 1, kCap, kCap + 1, 3 * kCap};
  for (int level : {1, 7, 9}) {
    for (const char* sendfile : {"on", "off"}) {
      const std::string dir = "l" + std::to_string(level) + sendfile;
      for (std::size_t size : sizes) {
        const std::string body = page(size);
        const std::string name = std::to_string(size) + ".html";
        server_.write("html/" + dir + "/" + name, body);
        const std::string where = "/" + dir + "/" + name;
        Response r = request(where, kAe);
        ASSERT_TRUE(r.complete) << where;
        EXPECT_EQ(r.status, 200) << where;
        EXPECT_EQ(r.header("content-encoding"), "gzip") << where;
        EXPECT_EQ(r.header("transfer-encoding"), "chunked") << where;
        EXPECT_FALSE(r.has("content-length")) << where;
        EXPECT_EQ(r.header("vary"), "Accept-Encoding") << where;
        EXPECT_EQ(r.header("etag").substr(0, 3), "W/\"") << where;
        EXPECT_EQ(gunzip(r.body), body) << where;
        const bool whole = level <= 7 && size >= 8192 && size <= kCap;
        if (whole) {
          EXPECT_EQ(r.body, libdeflate_gzip(body, level)) << where << ": compressed whole";
          EXPECT_NE(r.body, zlib_gzip(body, level)) << where;
        } else {
          EXPECT_EQ(r.body, zlib_gzip(body, level)) << where << ": streamed through zlib";
        }
        // HEAD: the head a GET gets, no body.
        Response h = get(port_, "HEAD " + where + " HTTP/1.1\r\nHost: x\r\n" + kAe + "\r\n", true);
        EXPECT_EQ(h.status, 200) << where;
        EXPECT_EQ(h.header("content-encoding"), "gzip") << where;
        EXPECT_EQ(h.header("vary"), "Accept-Encoding") << where;
        EXPECT_FALSE(h.has("content-length")) << where;
        EXPECT_EQ(h.header("etag"), r.header("etag")) << where;
      }
    }
  }
}

// The default gzip_buffers (32 4k): the benchmark's 100 KiB page whole,
// 200 KiB streamed; a Range still gets the whole coded body; keep-alive
// requests on one connection reuse the worker's compressor and buffers; a
// body made in memory (return) is compressed whole too.
TEST_F(HttpGzip, WholeBodyLimitFollowsGzipBuffersAndMemoryBodies) {
  const std::string text = page(3000);
  std::string flat = text;
  for (char& ch : flat) {
    if (ch == '\n') ch = ' ';
  }
  ASSERT_TRUE(start("gzip on; gzip_comp_level 1;\n"
                    "location / { }\n"
                    "location = /mem { default_type text/html; return 200 \"" + flat + "\"; }"))
      << server_.output();
  const std::string small = page(100 * 1024);
  const std::string big = page(200 * 1024);
  server_.write("html/small.html", small);
  server_.write("html/big.html", big);
  Client c(port_);
  ASSERT_TRUE(c.ok());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(c.send(simple_get("/small.html", "localhost", kAe)));
    Response r = c.read_response();
    ASSERT_TRUE(r.complete) << i;
    EXPECT_EQ(gunzip(r.body), small) << i;
    EXPECT_EQ(r.body, libdeflate_gzip(small, 1)) << i;
    ASSERT_TRUE(c.send(simple_get("/big.html", "localhost", kAe)));
    r = c.read_response();
    ASSERT_TRUE(r.complete) << i;
    EXPECT_EQ(gunzip(r.body), big) << i;
    EXPECT_EQ(r.body, zlib_gzip(big, 1)) << i;
  }
  Response r = request("/small.html", std::string(kAe) + "Range: bytes=0-9\r\n");
  EXPECT_EQ(r.status, 200);
  EXPECT_FALSE(r.has("content-range"));
  EXPECT_EQ(r.body, libdeflate_gzip(small, 1));
  r = request("/mem", kAe);
  EXPECT_EQ(r.header("content-encoding"), "gzip");
  EXPECT_EQ(gunzip(r.body), flat);
  EXPECT_EQ(r.body, libdeflate_gzip(flat, 1));
  // Without gzip: the file as it is, with its length.
  r = request("/small.html");
  EXPECT_FALSE(r.has("content-encoding"));
  EXPECT_EQ(r.header("content-length"), std::to_string(small.size()));
  EXPECT_EQ(r.body, small);
}

}  // namespace
}  // namespace vigil::test
