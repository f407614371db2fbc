#pragma once
// The compression filters (nginx's ngx_http_gzip_filter_module,
// ngx_http_gzip_static_module and ngx_http_gunzip_filter_module, with the
// gzip_vary / gzip_http_version / gzip_proxied / gzip_disable settings that
// nginx keeps in its core module): one HTTP module, because the three share
// the question "may this client be sent gzip?" (gzip_ok) and one request
// context (a response is either compressed or decompressed, never both).
//
//   gzip on          a header filter decides, a body filter deflates (zlib,
//                    gzip wrapper) into gzip_buffers, before chunked;
//   gzip_static      the static handler serves FILE.gz (gzip_static_file);
//   gunzip on        a gzip response is inflated for a client that does not
//                    take gzip.
//
// Memory: the request's context, zlib's state and the output buffers come
// from the worker's buffer cache (zlib allocates through it), so a warm
// worker allocates nothing per request; all of it goes back when the request
// ends (release_gzip).

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
const GzipConf& gzip_conf(const HttpLocConf& loc);

// Some location of the configuration uses gzip or gunzip: their filters
// belong in the chains (modules.cc).
bool uses_gzip(const HttpServers& servers);
bool uses_gunzip(const HttpServers& servers);

// Whether an Accept-Encoding value accepts gzip: a "gzip" element whose q
// is not zero (RFC 9110 §12.5.3; "gzip;q=0" refuses it). Only "gzip" counts,
// as in nginx ("x-gzip", "*" do not).
bool accepts_gzip(std::string_view accept_encoding);

// nginx's MSIE 4-6 test (no SV1) for gzip_disable msie6; Opera excluded.
bool is_msie6(std::string_view user_agent);

// May this request's response be sent gzip-encoded (nginx's
// ngx_http_gzip_ok): Accept-Encoding, gzip_disable, gzip_http_version and,
// for a request that came through a proxy (Via), gzip_proxied against the
// response head.
bool gzip_ok(const Request& r, const GzipConf& conf);

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

// gzip_static, asked by the static handler before it opens a file: whether
// to look for FILE.gz (gzip_static always; on, when the client takes gzip or
// gzip_vary makes the answer depend on the .gz existing).
bool gzip_static_wanted(Request& r);
// FILE.gz exists: whether to serve it (gzip_static on also sets Vary then,
// as nginx does, whatever the answer).
bool gzip_static_found(Request& r);

}  // namespace vigil::http
