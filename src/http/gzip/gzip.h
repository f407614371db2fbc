#pragma once
// The compression filters (nginx's ngx_http_gzip_filter_module,
// ngx_http_gzip_static_module and ngx_http_gunzip_filter_module, with the
// gzip_vary / gzip_http_version / gzip_proxied / gzip_disable settings that
// nginx keeps in its core module), and beside gzip the brotli and zstd
// codings (the directives of the third-party ngx_brotli and zstd-nginx-module):
// one filter, because they share the question "may this client be sent a
// coded body, and which coding?" (choose_coding) and one request context (a
// response is coded once, or decompressed, never both).
//
//   gzip on          a header filter decides, a body filter codes the body
//   brotli on        (zlib's deflate with the gzip wrapper, brotli's or
//   zstd on          zstd's streaming encoder) into *_buffers, before chunked;
//   *_static         the static handler serves FILE.gz, FILE.br or FILE.zst
//                    (static_codings);
//   gunzip on        a gzip response is inflated for a client that does not
//                    take gzip.
//
// Which coding: among those enabled for the location whose type and length
// conditions the response meets, the one the client's Accept-Encoding gives
// the highest q (q=0 refuses); a tie goes to br, then zstd, then gzip (the
// smaller output first). gzip_http_version, gzip_proxied and gzip_disable
// apply to the three alike.
//
// A whole body (gzip only): when the body filter's first call holds all of
// a body of known length, at most gzip_buffers' number * size bytes (a
// static file, a body made in memory), libdeflate compresses it in one call
// instead of zlib streaming it, at the levels and lengths where it measured
// faster (1..7, from 8 KiB; level 1 from 2 KiB); the same gzip format, the
// same head, the output passed on through the same gzip_buffers.
//
// Memory: the request's context, the encoder's state and the output buffers
// come from the worker's buffer cache (the encoders allocate through it), so
// a warm worker allocates nothing per request; all of it goes back when the
// request ends (release_gzip). An encoder's memory is bounded by its window
// (gzip: 32 KiB, brotli_window, zstd's level), smaller for a body known to be
// short. libdeflate's compressors (one per level) and the buffers a whole
// body is read into and compressed into are the worker's, made on first use
// and kept (GzipWorker).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/regex.h"

namespace vigil::http {

class HttpModule;
class HttpServers;
struct HttpLocConf;
struct Request;

enum class GzipStatic : std::uint8_t { kOff, kOn, kAlways };

// A content coding Vigil produces.
enum class Coding : std::uint8_t { kNone, kGzip, kBrotli, kZstd };

// The settings of brotli and of zstd (each its own module, the same shape).
struct CodingConf {
  bool enable = false;                          // brotli | zstd
  int level = 1;                                // *_comp_level
  std::vector<std::string> types{"text/html"};  // *_types, lower case; text/html always
  bool any_type = false;                        // *_types *
  std::size_t min_length = 20;                  // *_min_length
  std::uint32_t bufs_num = 32;                  // *_buffers
  std::size_t bufs_size = 4096;
  GzipStatic static_mode = GzipStatic::kOff;    // *_static
  std::size_t window = 512 * 1024;              // brotli_window
};

// gzip_proxied's flags (nginx's NGX_HTTP_GZIP_PROXIED_*).
enum GzipProxied : std::uint32_t {
  kProxiedOff = 1u << 0,
  kProxiedExpired = 1u << 1,
  kProxiedNoCache = 1u << 2,
  kProxiedNoStore = 1u << 3,
  kProxiedPrivate = 1u << 4,
  kProxiedNoLastModified = 1u << 5,
  kProxiedNoEtag = 1u << 6,
  kProxiedAuth = 1u << 7,
  kProxiedAny = 1u << 8,
};

struct GzipConf {
  bool enable = false;  // gzip
  int level = 1;        // gzip_comp_level
  std::vector<std::string> types{"text/html"};  // gzip_types, lower case; text/html always
  bool any_type = false;                        // gzip_types *
  std::size_t min_length = 20;                  // gzip_min_length
  std::uint32_t proxied = kProxiedOff;          // gzip_proxied
  bool vary = false;                            // gzip_vary
  std::uint32_t bufs_num = 32;                  // gzip_buffers
  std::size_t bufs_size = 4096;
  bool disable_msie6 = false;          // gzip_disable msie6
  std::vector<Regex> disable;          // gzip_disable: expressions for User-Agent, caseless
  int http_version = 1001;             // gzip_http_version (major * 1000 + minor)
  GzipStatic gzip_static = GzipStatic::kOff;
  bool gunzip = false;                 // gunzip
  std::uint32_t gunzip_num = 32;       // gunzip_buffers
  std::size_t gunzip_size = 4096;
};

const HttpModule& gzip_module();
const HttpModule& brotli_module();
const HttpModule& zstd_module();
const GzipConf& gzip_conf(const HttpLocConf& loc);
const CodingConf& brotli_conf(const HttpLocConf& loc);
const CodingConf& zstd_conf(const HttpLocConf& loc);

// Some location of the configuration uses gzip (or brotli, or zstd) or
// gunzip: their filters belong in the chains (modules.cc).
bool uses_gzip(const HttpServers& servers);
bool uses_gunzip(const HttpServers& servers);

// Whether an Accept-Encoding value accepts gzip: a "gzip" element whose q
// is not zero (RFC 9110 §12.5.3; "gzip;q=0" refuses it). Only "gzip" counts,
// as in nginx ("x-gzip", "*" do not).
bool accepts_gzip(std::string_view accept_encoding);

// The q an Accept-Encoding value gives `coding` (an element naming it,
// case-insensitively), in thousandths: 0..1000, 1000 when it has no q, 0
// for a malformed q (as nginx declines it), -1 when no element names it.
// "*" is not taken as naming it (as nginx's gzip).
int coding_q(std::string_view accept_encoding, std::string_view coding);

// The coding to answer with among those `offered` (a bit per Coding), by
// the client's q for each: the highest q above zero; ties go to br, then
// zstd, then gzip. kNone when the client takes none of them.
Coding choose_coding(std::string_view accept_encoding, unsigned offered);
inline constexpr unsigned coding_bit(Coding c) { return 1u << static_cast<unsigned>(c); }
std::string_view coding_name(Coding c);

// nginx's MSIE 4-6 test (no SV1) for gzip_disable msie6; Opera excluded.
bool is_msie6(std::string_view user_agent);

// May this request's response be sent gzip-encoded (nginx's
// ngx_http_gzip_ok): Accept-Encoding, gzip_disable, gzip_http_version and,
// for a request that came through a proxy (Via), gzip_proxied against the
// response head.
bool gzip_ok(const Request& r, const GzipConf& conf);
// gzip_ok without Accept-Encoding: whether a coded body may be sent at all
// (gzip_disable, gzip_http_version, gzip_proxied); brotli and zstd too.
bool coding_allowed(const Request& r, const GzipConf& conf);

// Filters (modules.cc adds them when the configuration uses them).
int gunzip_header_filter(Request& r);
int gzip_header_filter(Request& r);
class BodyFilterNext;
}  // namespace vigil::http

namespace vigil {
struct Chain;
}

namespace vigil::http {
// One body filter for both: it deflates or inflates as the header filter
// decided for the request.
int gzip_body_filter(Request& r, Chain* in, BodyFilterNext next);

// Gives back what the request's compression took (free_request).
void release_gzip(Request& r);

// gzip_static, brotli_static and zstd_static, asked by the static handler
// before it opens a file: the precompressed files to look for, best first
// (at most 3): those of the codings the client takes, in choose_coding's
// order, then those of an `always` the client does not take. gzip_static
// on also looks for FILE.gz when gzip_vary makes the answer depend on the
// .gz existing.
std::size_t static_codings(Request& r, Coding (&out)[3]);
// The file of `coding` exists: whether to serve it (an `on` also sets Vary
// then, as nginx does, whatever the answer).
bool static_coding_found(Request& r, Coding coding);
// Whether a response coded (or not) by the client's Accept-Encoding says
// so in Vary: gzip_vary on, or brotli or zstd (on, or their _static on) in
// the location: with more than one coding a cache must keep them apart.
bool vary_accept_encoding(const HttpLocConf& loc);
// ".gz", ".br", ".zst".
std::string_view coding_suffix(Coding c);

}  // namespace vigil::http
