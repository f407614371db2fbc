// The charset filter over real sockets: the Content-Type parameter it adds,
// and bodies recoded through charset_map tables (8-bit to 8-bit both ways,
// to UTF-8 and from UTF-8), for static files with sendfile on and off, large
// bodies whose UTF-8 sequences straddle the reads, and proxied responses.
#include <gtest/gtest.h>

#include <string>

#include "integration/http_harness.h"

namespace vigil::test {
namespace {

// Two small tables: "a" to "b" swaps 0xC0 and 0xC1 and maps 0xC2 to 0xD2;
// "a" to utf-8 maps 0xC0 to U+0430 (Cyrillic a, D0 B0) and 0xC1 to U+0431.
constexpr char kMaps[] =
    "charset_map a b { C0 C1; C1 C0; C2 D2; }\n"
    "charset_map a utf-8 { C0 D0B0; C1 D0B1; }\n";

class HttpCharset : public ::testing::Test {
 protected:
  bool start(const std::string& server_body, const std::string& http = kMaps) {
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

TEST_F(HttpCharset, NamesTheCharsetOfTheTypesItIsFor) {
  ASSERT_TRUE(
      start("location / { charset utf-8; }\n"
            "location /types/ { charset koi8-r; charset_types text/css; }\n"
            "location /any/ { charset windows-1251; charset_types *; }\n"
            "location /var/ { charset $arg_c; }\n"
            "location /off/ { charset off; }"))
      << server_.output();
  server_.write("html/a.html", "x");
  server_.write("html/a.png", "x");
  server_.write("html/types/a.css", "x");
  server_.write("html/types/a.html", "x");
  server_.write("html/any/a.png", "x");
  server_.write("html/var/a.html", "x");
  server_.write("html/off/a.html", "x");
  EXPECT_EQ(request("/a.html").header("content-type"), "text/html; charset=utf-8");
  EXPECT_EQ(request("/a.png").header("content-type"), "image/png");
  EXPECT_EQ(request("/types/a.css").header("content-type"), "text/css; charset=koi8-r");
  EXPECT_EQ(request("/types/a.html").header("content-type"), "text/html");
  EXPECT_EQ(request("/any/a.png").header("content-type"), "image/png; charset=windows-1251");
  EXPECT_EQ(request("/var/a.html?c=Shift_JIS").header("content-type"),
            "text/html; charset=Shift_JIS");
  EXPECT_EQ(request("/off/a.html").header("content-type"), "text/html");
}

// A response that names its charset keeps it unless override_charset is on.
TEST_F(HttpCharset, AProxiedCharsetIsKeptUnlessOverridden) {
  port_ = free_port();
  const int backend = free_port();
  ASSERT_TRUE(server_.start(
      std::string(kMaps) + "server { listen 127.0.0.1:" + std::to_string(backend) +
      "; root html; access_log off;\n"
      "  location / { default_type \"text/html; charset=a\"; types { } } }\n"
      "server { listen 127.0.0.1:" +
      std::to_string(port_) +
      "; access_log off;\n"
      "  location /keep/ { charset b; proxy_pass http://127.0.0.1:" +
      std::to_string(backend) +
      "/; }\n"
      "  location /override/ { charset b; override_charset on; proxy_pass http://127.0.0.1:" +
      std::to_string(backend) +
      "/; }\n"
      "  location /utf8/ { charset utf-8; override_charset on; proxy_pass http://127.0.0.1:" +
      std::to_string(backend) + "/; }\n}"))
      << server_.output();
  const std::string text = "ab\xC0\xC1\xC2\xC3";
  server_.write("html/t.txt", text);
  Response keep = request("/keep/t.txt");
  EXPECT_EQ(keep.header("content-type"), "text/html; charset=a");
  EXPECT_EQ(keep.body, text);
  Response over = request("/override/t.txt");
  EXPECT_EQ(over.header("content-type"), "text/html; charset=b");
  EXPECT_EQ(over.body, "ab\xC1\xC0\xD2?");  // 0xC3 is in no table: '?'
  Response utf8 = request("/utf8/t.txt");
  EXPECT_EQ(utf8.header("content-type"), "text/html; charset=utf-8");
  EXPECT_EQ(utf8.body, "ab\xD0\xB0\xD0\xB1??");
  EXPECT_FALSE(utf8.has("content-length"));
}

TEST_F(HttpCharset, EightBitTablesWorkBothWays) {
  ASSERT_TRUE(
      start("location /ab/ { charset b; source_charset a; }\n"
            "location /ba/ { charset A; source_charset B; }\n"
            "location /none/ { charset b; source_charset c; }"))
      << server_.output();
  const std::string text = "text \xC0\xC1\xC2 end";
  for (const char* d : {"ab", "ba", "none"})
    server_.write(std::string("html/") + d + "/t.html", text);
  Response ab = request("/ab/t.html");
  EXPECT_EQ(ab.status, 200);
  EXPECT_EQ(ab.header("content-type"), "text/html; charset=b");
  EXPECT_EQ(ab.body, "text \xC1\xC0\xD2 end");
  EXPECT_EQ(ab.header("content-length"), std::to_string(text.size()));
  EXPECT_EQ(ab.header("accept-ranges"), "bytes") << "an 8-bit table keeps the bytes in place";
  // The table read backwards: b's C1 C0 are a's C0 C1; b's C2 is no a byte.
  Response ba = request("/ba/t.html");
  EXPECT_EQ(ba.header("content-type"), "text/html; charset=A");
  EXPECT_EQ(ba.body, "text \xC1\xC0? end");
  // No table between the two: the body as it is, and the reason in the log.
  Response none = request("/none/t.html");
  EXPECT_EQ(none.body, text);
  EXPECT_EQ(none.header("content-type"), "text/html");
  EXPECT_TRUE(server_.wait_output("no \"charset_map\" between the charsets \"c\" and \"b\""))
      << server_.output();
  // A range of an 8-bit recoded body is the same range of the file,
  // recoded (nginx answers it too).
  Response range = request("/ab/t.html", "Range: bytes=5-7\r\n");
  EXPECT_EQ(range.status, 206);
  EXPECT_EQ(range.header("content-range"), "bytes 5-7/" + std::to_string(text.size()));
  EXPECT_EQ(range.body, "\xC1\xC0\xD2");
}

// To and from UTF-8 over a body of many reads: every sequence split
// between two reads is put together again, characters a table lacks become
// "&#N;", invalid bytes '?'.
TEST_F(HttpCharset, ToAndFromUtf8AcrossReads) {
  ASSERT_TRUE(start(
      "location /to/ { charset utf-8; source_charset a; sendfile off; output_buffers 1 4k; }\n"
      "location /from/ { charset a; source_charset utf-8; sendfile on; }\n"
      "location /fromsmall/ { charset a; source_charset utf-8; sendfile off;\n"
      "  output_buffers 1 4k; }"))
      << server_.output();
  std::string eight;
  std::string utf8;
  for (int i = 0; i < 40000; ++i) {
    eight += "x\xC0\xC1";
    utf8 += "x\xD0\xB0\xD0\xB1";
  }
  server_.write("html/to/t.html", eight);
  Response to = request("/to/t.html");
  ASSERT_TRUE(to.complete);
  EXPECT_FALSE(to.has("content-length"));
  EXPECT_EQ(to.header("transfer-encoding"), "chunked");
  EXPECT_EQ(to.body.size(), utf8.size());
  EXPECT_TRUE(to.body == utf8);

  // 4 KiB reads start inside a 2-byte sequence at every odd multiple.
  const std::string odd = "y" + utf8 + "\xE2\x82\xAC|\xFF|\xD0";
  const std::string expect = "y" + eight + "&#8364;|?|?";
  for (const char* d : {"from", "fromsmall"}) {
    server_.write(std::string("html/") + d + "/t.html", odd);
    Response from = request(std::string("/") + d + "/t.html");
    ASSERT_TRUE(from.complete) << d;
    EXPECT_EQ(from.header("content-type"), "text/html; charset=a") << d;
    EXPECT_EQ(from.body.size(), expect.size()) << d;
    EXPECT_TRUE(from.body == expect) << d;
  }
  // HEAD: the head only.
  Response head = get(port_, "HEAD /from/t.html HTTP/1.1\r\nHost: localhost\r\n\r\n", true);
  EXPECT_EQ(head.status, 200);
  EXPECT_EQ(head.header("content-type"), "text/html; charset=a");
}

TEST_F(HttpCharset, ConfigurationErrorsNameTheLine) {
  auto [rc, out] = check_http_conf(server_, "charset_map a b { C0 1FF; }");
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("invalid value \"1FF\" in"), std::string::npos) << out;
  EXPECT_NE(out.find("t.conf:3"), std::string::npos) << out;
  std::tie(rc, out) = check_http_conf(server_, "charset_map utf-8 a { C0 C1; }");
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("\"charset_map\" from \"utf-8\" is not supported"), std::string::npos) << out;
  std::tie(rc, out) = check_http_conf(server_, "charset_map a utf-8 { C0 FF; }");
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("invalid value \"FF\""), std::string::npos) << out;
  std::tie(rc, out) = check_http_conf(server_, "charset_map a b { }\ncharset_map b a { }");
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("duplicate \"charset_map\""), std::string::npos) << out;
  std::tie(rc, out) = check_http_conf(server_, "server { charset_map a b { } }");
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("not allowed here"), std::string::npos) << out;
}

}  // namespace
}  // namespace vigil::test
