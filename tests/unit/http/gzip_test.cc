// The compression module's logic without a socket: Accept-Encoding and
// User-Agent tests, the directives (forms, inheritance, errors with
// file:line), which filters a configuration gets, and the body filter run in
// a chain of its own (deflate, then inflate back, through small buffers and
// a writer that is not always ready).
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

#include "http/core/conf.h"
#include "http/core/filters.h"
#include "http/core/module.h"
#include "http/core/request.h"
#include "http/core/servers.h"
#include "http/core/worker.h"
#include "http/gzip/gzip.h"
#include "unit/http/http_conf_fixture.h"
#include "vigil/core/log.h"
#include "vigil/event/loop.h"

namespace vigil::http {
namespace {

TEST(AcceptEncoding, GzipWithAPositiveQuality) {
  EXPECT_TRUE(accepts_gzip("gzip"));
  EXPECT_TRUE(accepts_gzip("gzip, deflate, br"));
  EXPECT_TRUE(accepts_gzip("deflate,gzip"));
  EXPECT_TRUE(accepts_gzip("br;q=1.0, GZip ; q=0.5"));
  EXPECT_TRUE(accepts_gzip("gzip;q=1"));
  EXPECT_TRUE(accepts_gzip("gzip;q=0.001"));
  EXPECT_TRUE(accepts_gzip("gzip;level=1"));
  EXPECT_FALSE(accepts_gzip(""));
  EXPECT_FALSE(accepts_gzip("deflate"));
  EXPECT_FALSE(accepts_gzip("x-gzip"));
  EXPECT_FALSE(accepts_gzip("gzipped"));
  EXPECT_FALSE(accepts_gzip("*"));
  EXPECT_FALSE(accepts_gzip("gzip;q=0"));
  EXPECT_FALSE(accepts_gzip("gzip; q=0.000"));
  EXPECT_FALSE(accepts_gzip("gzip;Q=0.0"));
  EXPECT_FALSE(accepts_gzip("gzip;q=2")) << "malformed: declined, as nginx";
  EXPECT_FALSE(accepts_gzip("gzip;q=1.5"));
  EXPECT_FALSE(accepts_gzip("gzip;q=abc"));
  EXPECT_FALSE(accepts_gzip("deflate, gzip;q=0, br"));
}

TEST(AcceptEncoding, QualitiesInThousandths) {
  EXPECT_EQ(coding_q("gzip, br", "br"), 1000);
  EXPECT_EQ(coding_q("gzip, BR;q=0.5", "br"), 500);
  EXPECT_EQ(coding_q("br;q=0.123", "br"), 123);
  EXPECT_EQ(coding_q("br;q=0.05", "br"), 50);
  EXPECT_EQ(coding_q("br;q=1.000", "br"), 1000);
  EXPECT_EQ(coding_q("br;q=0", "br"), 0);
  EXPECT_EQ(coding_q("br;q=1.5", "br"), 0) << "malformed: refused";
  EXPECT_EQ(coding_q("br;q=0.1234", "br"), 0) << "malformed: refused";
  EXPECT_EQ(coding_q("brotli, zstdx", "br"), -1);
  EXPECT_EQ(coding_q("*", "zstd"), -1) << "* names no coding";
  EXPECT_EQ(coding_q("", "gzip"), -1);
}

TEST(AcceptEncoding, ChooseTheHighestQualityTiesToBrThenZstd) {
  const unsigned all = coding_bit(Coding::kGzip) | coding_bit(Coding::kBrotli) |
                       coding_bit(Coding::kZstd);
  EXPECT_EQ(choose_coding("gzip, deflate, br, zstd", all), Coding::kBrotli);
  EXPECT_EQ(choose_coding("gzip, zstd", all), Coding::kZstd);
  EXPECT_EQ(choose_coding("gzip;q=0.9, br;q=0.8, zstd;q=0.7", all), Coding::kGzip);
  EXPECT_EQ(choose_coding("gzip;q=0.5, br;q=0.5, zstd;q=0.7", all), Coding::kZstd);
  EXPECT_EQ(choose_coding("br;q=0, zstd;q=0, gzip;q=0", all), Coding::kNone);
  EXPECT_EQ(choose_coding("identity", all), Coding::kNone);
  EXPECT_EQ(choose_coding("br, gzip", coding_bit(Coding::kGzip)), Coding::kGzip)
      << "only what is offered";
  EXPECT_EQ(choose_coding("br", coding_bit(Coding::kGzip) | coding_bit(Coding::kZstd)),
            Coding::kNone);
}

TEST(AcceptEncoding, Msie6IsNginxsTest) {
  EXPECT_TRUE(is_msie6("Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.0)"));
  EXPECT_TRUE(is_msie6("Mozilla/4.0 (compatible; MSIE 5.5; Windows 98)"));
  EXPECT_FALSE(is_msie6("Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.1; SV1)"));
  EXPECT_FALSE(is_msie6("Mozilla/4.0 (compatible; MSIE 7.0; Windows NT 6.0)"));
  EXPECT_FALSE(is_msie6("Opera/9.0 (compatible; MSIE 6.0)"));
  EXPECT_FALSE(is_msie6("curl/8.0"));
  EXPECT_FALSE(is_msie6("MSIE 6"));
}

using GzipConfTest = testing::HttpConfTest;

const GzipConf& of(const HttpLocConf& loc) { return gzip_conf(loc); }

TEST_F(GzipConfTest, FormsDefaultsAndInheritance) {
  const HttpServers* servers = this->servers(
      "gzip on; gzip_types text/plain application/JSON; gzip_proxied expired no-cache auth;\n"
      "server { listen 127.0.0.1:1;\n"
      " location /a { }\n"
      " location /b { gzip off; gzip_comp_level 6; gzip_min_length 1k; gzip_buffers 16 8k; }\n"
      " location /c { gzip_types *; gzip_disable msie6 Bot; gzip_http_version 1.0; }\n"
      " location /d { gzip_static always; gunzip on; gunzip_buffers 4 16k; gzip_vary on; }\n"
      "}");
  ASSERT_NE(servers, nullptr);
  const HttpSrvConf& srv = *servers->servers[0];
  const GzipConf& a = of(find_location(srv, "/a"));
  EXPECT_TRUE(a.enable);
  EXPECT_EQ(a.level, 1);
  EXPECT_EQ(a.min_length, 20u);
  EXPECT_EQ(a.bufs_num, 32u);
  EXPECT_EQ(a.bufs_size, 4096u);
  ASSERT_EQ(a.types.size(), 3u);
  EXPECT_EQ(a.types[0], "text/html") << "always";
  EXPECT_EQ(a.types[2], "application/json");
  EXPECT_EQ(a.proxied, kProxiedExpired | kProxiedNoCache | kProxiedAuth);
  EXPECT_EQ(a.http_version, 1001);
  const GzipConf& b = of(find_location(srv, "/b"));
  EXPECT_FALSE(b.enable);
  EXPECT_EQ(b.level, 6);
  EXPECT_EQ(b.min_length, 1024u);
  EXPECT_EQ(b.bufs_num, 16u);
  EXPECT_EQ(b.bufs_size, 8192u);
  const GzipConf& c = of(find_location(srv, "/c"));
  EXPECT_TRUE(c.any_type);
  EXPECT_TRUE(c.disable_msie6);
  ASSERT_EQ(c.disable.size(), 1u);
  EXPECT_EQ(c.disable[0].pattern(), "Bot");
  EXPECT_TRUE(c.disable[0].caseless());
  EXPECT_EQ(c.http_version, 1000);
  const GzipConf& d = of(find_location(srv, "/d"));
  EXPECT_EQ(d.gzip_static, GzipStatic::kAlways);
  EXPECT_TRUE(d.gunzip);
  EXPECT_EQ(d.gunzip_num, 4u);
  EXPECT_EQ(d.gunzip_size, 16384u);
  EXPECT_TRUE(d.vary);
  EXPECT_FALSE(a.vary);
  // The filters: in the chains because a location uses them.
  EXPECT_TRUE(servers->filters.header.contains(gzip_header_filter));
  EXPECT_TRUE(servers->filters.header.contains(gunzip_header_filter));
  EXPECT_TRUE(servers->filters.body.contains(gzip_body_filter));
}

TEST_F(GzipConfTest, BrotliAndZstdFormsDefaultsAndInheritance) {
  const HttpServers* servers = this->servers(
      "brotli on; brotli_types text/plain; zstd_comp_level 7; brotli_window 64k;\n"
      "server { listen 127.0.0.1:1;\n"
      " location /a { }\n"
      " location /b { brotli off; zstd on; brotli_comp_level 11; brotli_window 1m;\n"
      "   brotli_buffers 8 16k; zstd_min_length 1k; zstd_types *; }\n"
      " location /c { brotli_static always; zstd_static on; }\n"
      "}");
  ASSERT_NE(servers, nullptr);
  const HttpSrvConf& srv = *servers->servers[0];
  const CodingConf& a = brotli_conf(find_location(srv, "/a"));
  EXPECT_TRUE(a.enable);
  EXPECT_EQ(a.level, 6) << "ngx_brotli's default";
  EXPECT_EQ(a.window, 64u * 1024) << "inherited";
  EXPECT_EQ(a.min_length, 20u);
  ASSERT_EQ(a.types.size(), 2u);
  EXPECT_EQ(a.types[1], "text/plain");
  const CodingConf& za = zstd_conf(find_location(srv, "/a"));
  EXPECT_FALSE(za.enable);
  EXPECT_EQ(za.level, 7);
  const CodingConf& b = brotli_conf(find_location(srv, "/b"));
  EXPECT_FALSE(b.enable);
  EXPECT_EQ(b.level, 11);
  EXPECT_EQ(b.window, 1024u * 1024);
  EXPECT_EQ(b.bufs_num, 8u);
  EXPECT_EQ(b.bufs_size, 16384u);
  EXPECT_EQ(b.types.size(), 2u) << "inherited";
  const CodingConf& zb = zstd_conf(find_location(srv, "/b"));
  EXPECT_TRUE(zb.enable);
  EXPECT_EQ(zb.min_length, 1024u);
  EXPECT_TRUE(zb.any_type);
  EXPECT_EQ(brotli_conf(find_location(srv, "/c")).static_mode, GzipStatic::kAlways);
  EXPECT_EQ(brotli_conf(find_location(srv, "/c")).window, 64u * 1024);
  EXPECT_EQ(zstd_conf(find_location(srv, "/c")).static_mode, GzipStatic::kOn);
  EXPECT_EQ(zstd_conf(find_location(srv, "/c")).level, 7);
  EXPECT_TRUE(servers->filters.header.contains(gzip_header_filter)) << "brotli on is enough";
  EXPECT_TRUE(servers->filters.body.contains(gzip_body_filter));
  for (const char* bad : {"brotli_comp_level 12;", "zstd_comp_level 0;", "brotli_window 1000k;",
                          "brotli_window 512;", "zstd maybe;", "brotli_static sometimes;"}) {
    const std::string err = error(bad);
    EXPECT_NE(err.find("invalid value"), std::string::npos) << bad << ": " << err;
    EXPECT_NE(err.find("vigil.conf:"), std::string::npos) << bad << ": " << err;
  }
}

TEST_F(GzipConfTest, UnusedFiltersAreNotInTheChains) {
  const HttpServers* servers = this->servers(
      "gzip_vary on; gzip_static on;\nserver { listen 127.0.0.1:1; location / { gzip off; } }");
  ASSERT_NE(servers, nullptr);
  EXPECT_FALSE(servers->filters.header.contains(gzip_header_filter));
  EXPECT_FALSE(servers->filters.header.contains(gunzip_header_filter));
  EXPECT_FALSE(servers->filters.body.contains(gzip_body_filter));
}

TEST_F(GzipConfTest, ErrorsNameTheFileAndLine) {
  std::string err = error("server { listen 127.0.0.1:1;\n location / { gzip_disable \"MSIE [1-6\"; } }");
  EXPECT_NE(err.find("pcre2_compile() failed"), std::string::npos) << err;
  EXPECT_NE(err.find(":4"), std::string::npos) << err;
  err = error("gzip_comp_level 10;");
  EXPECT_NE(err.find("invalid value \"10\""), std::string::npos) << err;
  err = error("gzip_proxied expired sometimes;");
  EXPECT_NE(err.find("invalid value \"sometimes\""), std::string::npos) << err;
  err = error("gzip_buffers 0 4k;");
  EXPECT_NE(err.find("invalid value \"0\""), std::string::npos) << err;
  err = error("gunzip_buffers 4 x;");
  EXPECT_NE(err.find("invalid value \"x\""), std::string::npos) << err;
  err = error("gzip_http_version 2.0;");
  EXPECT_NE(err.find("invalid value"), std::string::npos) << err;
  err = error("gzip_static sometimes;");
  EXPECT_NE(err.find("invalid value"), std::string::npos) << err;
  err = error("gzip maybe;");
  EXPECT_NE(err.find("invalid value"), std::string::npos) << err;
}

// ---- the body filter ------------------------------------------------------------------

std::string g_out;
bool g_last = false;
int g_busy_calls = 0;  // the writer answers "again" this many times first

int writer(Request&, Chain* in) {
  for (Chain* cl = in; cl != nullptr; cl = cl->next) {
    g_out.append(cl->buf->pos, cl->buf->last);
    g_last = g_last || cl->buf->last_buf;
    cl->buf->pos = cl->buf->last;
  }
  return kBodyOk;
}

// The writer that holds what it got until it is resumed, as HTTP/1's does.
Chain* g_held = nullptr;
int holding_writer(Request& r, Chain* in) {
  if (in != nullptr) {
    g_held = in;
    if (g_busy_calls > 0) {
      --g_busy_calls;
      return kBodyAgain;
    }
  }
  Chain* c = g_held;
  g_held = nullptr;
  return writer(r, c);
}

class GzipBodyFilter : public ::testing::Test {
 protected:
  void SetUp() override {
    EventLoopConfig cfg;
    cfg.connections = 4;
    auto loop = EventLoop::create(cfg, Log::global());
    ASSERT_TRUE(loop) << loop.status().to_string();
    loop_ = std::move(loop.value());
    worker_ = std::make_unique<HttpWorker>(*loop_, servers_, 0);
    hc_.worker = worker_.get();
    c_.log = &log_;
    loc_.module_confs.assign(kMaxHttpModules, nullptr);
    loc_.module_confs[gzip_module().index()] = &conf_;
    loc_.module_confs[brotli_module().index()] = &brotli_;  // off
    loc_.module_confs[zstd_module().index()] = &zstd_;      // off
    g_out.clear();
    g_last = false;
    g_busy_calls = 0;
  }
  void TearDown() override {
    release_gzip(r_);
  }
  void fresh_request(std::string_view ae) {
    release_gzip(r_);
    r_.~Request();
    new (&r_) Request();
    r_.hc = &hc_;
    r_.c = &c_;
    r_.loc = &loc_;
    r_.line.version = 1001;
    field_ = HeaderField{"Accept-Encoding", ae};
    field_.id = HeaderId::kAcceptEncoding;
    r_.fields = &field_;
    r_.nfields = ae.empty() ? 0 : 1;
  }
  // Passes `body` in pieces of `piece` bytes through a chain with the filter.
  std::string run(const std::string& body, std::size_t piece, BodyWriter w) {
    BodyFilterChain chain(w);
    EXPECT_TRUE(chain.add(gzip_body_filter));
    g_out.clear();
    g_last = false;
    std::string copy = body;
    std::size_t at = 0;
    do {
      const std::size_t n = std::min(piece, copy.size() - at);
      Buf b;
      b.reset(copy.data() + at, n);
      b.last = b.pos + n;
      b.last_buf = at + n == copy.size();
      Chain link{&b, nullptr};
      int rc = chain.run(r_, &link);
      for (int i = 0; i < 100 && rc == kBodyAgain; ++i) rc = chain.run(r_, nullptr);
      EXPECT_EQ(rc, kBodyOk);
      EXPECT_TRUE(b.empty()) << "the producer's buffer is read before kBodyOk";
      if (rc != kBodyOk) return "<failed>";
      at += n;
    } while (at < copy.size());
    EXPECT_TRUE(g_last);
    return g_out;
  }

  HttpServers servers_;
  std::unique_ptr<EventLoop> loop_;
  std::unique_ptr<HttpWorker> worker_;
  HttpConnection hc_;
  Connection c_;
  Log log_;
  HttpLocConf loc_;
  GzipConf conf_;
  CodingConf brotli_;
  CodingConf zstd_;
  HeaderField field_;
  Request r_;
};

std::string inflate_all(const std::string& in) {
  z_stream zs{};
  inflateInit2(&zs, 16 + MAX_WBITS);
  std::string out(in.size() * 20 + 1024, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  const int rc = inflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  inflateEnd(&zs);
  return rc == Z_STREAM_END ? out : "<bad gzip>";
}

TEST_F(GzipBodyFilter, DeflatesThenInflatesBackThroughSmallBuffers) {
  conf_.enable = true;
  conf_.gunzip = true;
  conf_.bufs_num = 2;
  conf_.bufs_size = 512;
  conf_.gunzip_num = 3;
  conf_.gunzip_size = 700;
  std::string body;
  for (int i = 0; body.size() < 100000; ++i) body += std::to_string(i * 2654435761u) + " ";

  fresh_request("gzip");
  r_.headers_out.content_type = "text/html";
  r_.headers_out.etag = "\"abc\"";
  ASSERT_EQ(gzip_header_filter(r_), 0);
  EXPECT_EQ(r_.headers_out.content_encoding, "gzip");
  EXPECT_EQ(r_.headers_out.etag, "W/\"abc\"");
  EXPECT_TRUE(r_.body_changed);
  g_busy_calls = 3;
  const std::string coded = run(body, 7000, holding_writer);
  EXPECT_LT(coded.size(), body.size());
  EXPECT_EQ(inflate_all(coded), body);

  // The coded body, inflated by gunzip for a client without gzip.
  fresh_request("");
  r_.headers_out.content_encoding = "gzip";
  ASSERT_EQ(gunzip_header_filter(r_), 0);
  EXPECT_TRUE(r_.headers_out.content_encoding.empty());
  g_busy_calls = 2;
  EXPECT_EQ(run(coded, 333, holding_writer), body);
  fresh_request("");
  r_.headers_out.content_encoding = "gzip";
  ASSERT_EQ(gunzip_header_filter(r_), 0);
  EXPECT_EQ(run(coded + coded, 1, writer), body + body) << "two members, byte by byte";
}

TEST_F(GzipBodyFilter, RefusesAClientWithoutGzipAndBrokenInput) {
  conf_.enable = true;
  conf_.gunzip = true;
  fresh_request("deflate");
  r_.headers_out.content_type = "text/html";
  ASSERT_EQ(gzip_header_filter(r_), 0);
  EXPECT_TRUE(r_.headers_out.content_encoding.empty());
  EXPECT_FALSE(r_.body_changed);
  EXPECT_EQ(r_.ctx[gzip_module().index()], nullptr);

  fresh_request("");
  r_.headers_out.content_encoding = "gzip";
  ASSERT_EQ(gunzip_header_filter(r_), 0);
  BodyFilterChain chain(writer);
  ASSERT_TRUE(chain.add(gzip_body_filter));
  char junk[] = "\x1f\x8b\x08\x00 not really gzip data here";
  Buf b;
  b.reset(junk, sizeof junk - 1);
  b.last = junk + sizeof junk - 1;
  b.last_buf = true;
  Chain link{&b, nullptr};
  EXPECT_EQ(chain.run(r_, &link), kBodyError);

  // A body cut before the end of its gzip stream is an error too.
  fresh_request("");
  r_.headers_out.content_encoding = "gzip";
  ASSERT_EQ(gunzip_header_filter(r_), 0);
  std::string body(5000, 'a');
  z_stream zs{};
  deflateInit2(&zs, 1, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
  std::string coded(8000, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(body.data());
  zs.avail_in = static_cast<uInt>(body.size());
  zs.next_out = reinterpret_cast<Bytef*>(coded.data());
  zs.avail_out = static_cast<uInt>(coded.size());
  deflate(&zs, Z_FINISH);
  coded.resize(zs.total_out - 4);
  deflateEnd(&zs);
  b.reset(coded.data(), coded.size());
  b.last = coded.data() + coded.size();
  b.last_buf = true;
  BodyFilterChain chain2(writer);
  ASSERT_TRUE(chain2.add(gzip_body_filter));
  EXPECT_EQ(chain2.run(r_, &link), kBodyError);
}

}  // namespace
}  // namespace vigil::http
