// empty_gif, the example module of docs/modules.md, over real sockets: the
// pixel, and the header filters applied to it as to any response
// (If-Modified-Since, Range, add_header), and its refusals.
#include <gtest/gtest.h>

#include <string>

#include "integration/http_harness.h"

namespace vigil::test {
namespace {

class HttpEmptyGif : public ::testing::Test {
 protected:
  bool start(const std::string& server_body) {
    port_ = free_port();
    return server_.start("server { listen 127.0.0.1:" + std::to_string(port_) +
                         "; root html; access_log off;\n" + server_body + "\n}");
  }
  Response request(const std::string& target, const std::string& extra = "") {
    return get(port_, simple_get(target, "localhost", extra));
  }
  VigilServer server_;
  int port_ = 0;
};

TEST_F(HttpEmptyGif, AnswersWithTheTransparentPixel) {
  ASSERT_TRUE(start("location = /pixel.gif { empty_gif; add_header X-Pixel yes; }"))
      << server_.output();
  Response r = request("/pixel.gif");
  ASSERT_TRUE(r.complete);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("content-type"), "image/gif");
  EXPECT_EQ(r.header("content-length"), "43");
  ASSERT_EQ(r.body.size(), 43u);
  EXPECT_EQ(r.body.substr(0, 6), "GIF89a");
  EXPECT_EQ(r.body.back(), ';');  // the GIF trailer
  // The image nginx sends, byte for byte: white, transparent, one pixel.
  const std::string nginx_gif(
      "GIF89a\x01\x00\x01\x00\x80\x01\x00\x00\x00\x00\xff\xff\xff"
      "\x21\xf9\x04\x01\x00\x00\x01\x00"
      "\x2c\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02\x4c\x01\x00\x3b",
      43);
  EXPECT_EQ(r.body, nginx_gif);
  EXPECT_EQ(r.header("last-modified"), "Mon, 28 Sep 1970 06:00:00 GMT");
  EXPECT_EQ(r.header("x-pixel"), "yes");  // the add_header filter ran
}

TEST_F(HttpEmptyGif, ConditionalAndRangeRequestsGoThroughTheFilters) {
  ASSERT_TRUE(start("location = /p { empty_gif; }")) << server_.output();
  Response r = request("/p", "If-Modified-Since: Mon, 28 Sep 1970 06:00:00 GMT\r\n");
  EXPECT_EQ(r.status, 304);
  EXPECT_TRUE(r.body.empty());
  r = request("/p", "Range: bytes=0-5\r\n");
  EXPECT_EQ(r.status, 206);
  EXPECT_EQ(r.body, "GIF89a");
  EXPECT_EQ(r.header("content-range"), "bytes 0-5/43");
  r = request("/p", "Range: bytes=40-\r\n");
  EXPECT_EQ(r.status, 206);
  EXPECT_EQ(r.body.size(), 3u);
  EXPECT_EQ(r.body.back(), ';');
  EXPECT_EQ(request("/p", "Range: bytes=43-\r\n").status, 416);
}

TEST_F(HttpEmptyGif, OtherMethodsAre405AndOtherLocationsAreFiles) {
  ASSERT_TRUE(start("location = /p { empty_gif; }")) << server_.output();
  server_.write("html/f.txt", "file\n");
  Response r = get(port_, "POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.header("allow"), "GET, HEAD");
  EXPECT_EQ(request("/f.txt").body, "file\n");
}

}  // namespace
}  // namespace vigil::test
