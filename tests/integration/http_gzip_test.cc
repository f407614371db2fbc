// gzip, gzip_static and gunzip over real sockets: what the head says, and a
// body that zlib (in the test) decodes back to the file or the proxied
// response, for static files (sendfile on and off, small and large), proxied
// responses, and each directive's effect.
#include <gtest/gtest.h>
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

}  // namespace
}  // namespace vigil::test
