// HTTP/1's response head (nginx's ngx_http_header_filter and
// ngx_http_special_response_handler): the head writer at the end of the
// header filter chain, formatted into the request's own memory, with the
// body's framing chosen here for every response (body_framing); the body
// goes through the body filters to HTTP/1's final writer (writer.cc).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <string>

#include "codec/head_writer.h"
#include "http/core/filters.h"
#include "http/core/request.h"
#include "http/v2/h2.h"
#include "http/core/worker.h"
#include "http/filters/add_header.h"
#include "http/gzip/gzip.h"
#include "vigil/core/log.h"
#include "vigil/event/loop.h"
#include "vigil/version.h"

namespace vigil::http {
namespace {

constexpr std::string_view kServer = "Server: vigil/" VIGIL_VERSION_STRING "\r\n";
constexpr std::string_view kServerBare = "Server: vigil\r\n";  // server_tokens off

using Out = HeadWriter;

struct Special {
  int status;
  const char* reason;
};

// Reason phrases as nginx sends them: RFC 9110 §15's, except where nginx
// keeps an older name (302, 405, 413, 414, 416). The phrase means nothing to
// a client (RFC 9112 §4: it SHOULD ignore it), so the status line and the
// built-in page read the same as nginx's for tools that compare the two.
constexpr Special kReasons[] = {
    {100, "Continue"},
    {200, "OK"},
    {204, "No Content"},
    {206, "Partial Content"},
    {301, "Moved Permanently"},
    {302, "Moved Temporarily"},
    {303, "See Other"},
    {304, "Not Modified"},
    {307, "Temporary Redirect"},
    {308, "Permanent Redirect"},
    {400, "Bad Request"},
    {401, "Unauthorized"},
    {403, "Forbidden"},
    {404, "Not Found"},
    {405, "Not Allowed"},
    {408, "Request Timeout"},
    {409, "Conflict"},
    {410, "Gone"},
    {411, "Length Required"},
    {412, "Precondition Failed"},
    {413, "Request Entity Too Large"},
    {414, "Request-URI Too Large"},
    {415, "Unsupported Media Type"},
    {416, "Requested Range Not Satisfiable"},
    {421, "Misdirected Request"},
    {429, "Too Many Requests"},
    {431, "Request Header Fields Too Large"},
    {500, "Internal Server Error"},
    {501, "Not Implemented"},
    {502, "Bad Gateway"},
    {503, "Service Unavailable"},
    {504, "Gateway Timeout"},
    {505, "HTTP Version Not Supported"},
};

// The built-in pages, in nginx's layout, built once: with the version in
// the footer, and without it (server_tokens off).
struct SpecialPages {
  std::array<std::string, 600> bodies;
  std::array<std::string, 600> bare;
  SpecialPages() {
    for (const auto& s : kReasons) {
      if (s.status < 300 || s.status == 304) continue;
      std::string title = std::to_string(s.status);
      title += ' ';
      title += s.reason;
      std::string& b = bodies[static_cast<std::size_t>(s.status)];
      b = "<html>\r\n<head><title>";
      b += title;
      b += "</title></head>\r\n<body>\r\n<center><h1>";
      b += title;
      b += "</h1></center>\r\n<hr><center>vigil/" VIGIL_VERSION_STRING
           "</center>\r\n</body>\r\n</html>\r\n";
    }
    // The TLS refusals: a 400 whose page names the reason (nginx's 495-497).
    const std::pair<int, const char*> tls_reasons[] = {
        {kStatusCertError, "The SSL certificate error"},
        {kStatusNoCert, "No required SSL certificate was sent"},
        {kStatusPlainHttp, "The plain HTTP request was sent to HTTPS port"},
    };
    for (const auto& [status, why] : tls_reasons) {
      std::string& b = bodies[static_cast<std::size_t>(status)];
      b = "<html>\r\n<head><title>400 ";
      b += why;
      b += "</title></head>\r\n<body>\r\n<center><h1>400 Bad Request</h1></center>\r\n<center>";
      b += why;
      b += "</center>\r\n<hr><center>vigil/" VIGIL_VERSION "</center>\r\n</body>\r\n</html>\r\n";
    }
    for (std::size_t i = 0; i < bodies.size(); ++i) {
      bare[i] = bodies[i];
      const std::size_t at = bare[i].find("<hr><center>vigil/");
      if (at == std::string::npos) continue;
      const std::size_t version = at + sizeof "<hr><center>vigil" - 1;
      bare[i].erase(version, bare[i].find('<', version) - version);
    }
  }
};

const SpecialPages& special_pages() {
  static const SpecialPages pages;
  return pages;
}

std::uint16_t port_of(const sockaddr* sa) {
  if (sa == nullptr) return 0;
  if (sa->sa_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(sa)->sin_port);
  if (sa->sa_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(sa)->sin6_port);
  return 0;
}

// The address that took the connection, as a URL's host ("[::1]" for IPv6):
// the listener's, or the socket's own when the listener is a wildcard.
std::size_t local_host(const Connection& c, char* out, std::size_t cap) {
  const sockaddr* sa = c.local_addr;
  if (sa == nullptr) return 0;
  sockaddr_storage ss{};
  const bool v6 = sa->sa_family == AF_INET6;
  const bool wildcard =
      v6 ? IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr)
         : sa->sa_family == AF_INET &&
               reinterpret_cast<const sockaddr_in*>(sa)->sin_addr.s_addr == htonl(INADDR_ANY);
  if (wildcard) {
    socklen_t sl = sizeof ss;
    if (::getsockname(c.fd, reinterpret_cast<sockaddr*>(&ss), &sl) == -1) return 0;
    sa = reinterpret_cast<const sockaddr*>(&ss);
  }
  if (sa->sa_family != AF_INET && sa->sa_family != AF_INET6) return 0;
  const void* a =
      sa->sa_family == AF_INET
          ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in*>(sa)->sin_addr)
          : static_cast<const void*>(&reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr);
  std::size_t n = 0;
  if (v6) out[n++] = '[';
  if (::inet_ntop(sa->sa_family, a, out + n, static_cast<socklen_t>(cap - n - 1)) == nullptr) {
    return 0;
  }
  n += std::strlen(out + n);
  if (v6) out[n++] = ']';
  return n;
}

// keepalive_disable: an old MSIE's POST (its keep-alive after a POST is
// broken) or Safari on macOS (it mishandles a closed keep-alive connection),
// recognised by the User-Agent as nginx does.
bool keepalive_disabled(const Request& r, const HttpLocConf& loc) {
  if (loc.keepalive_disable == 0 || r.user_agent.empty()) return false;
  const std::string_view ua = r.user_agent;
  if (ua.find("Opera") != std::string_view::npos) return false;
  const std::size_t msie = ua.find("MSIE ");
  if (msie != std::string_view::npos) {
    if (!(loc.keepalive_disable & HttpLocConf::kDisableMsie6) || r.line.method != Method::kPost ||
        msie + 7 >= ua.size() || ua[msie + 6] != '.') {
      return false;
    }
    const char v = ua[msie + 5];
    return v == '4' || v == '5' ||
           (v == '6' && ua.find("SV1", msie + 8) == std::string_view::npos);
  }
  return (loc.keepalive_disable & HttpLocConf::kDisableSafari) &&
         ua.find("Gecko/") == std::string_view::npos &&
         ua.find("Chrome/") == std::string_view::npos &&
         ua.find("Safari/") != std::string_view::npos &&
         ua.find("Mac OS X") != std::string_view::npos;
}

// absolute_redirect (nginx's header filter): a Location that is a path gets
// the scheme, the host (server_name_in_redirect: the server's first name;
// else the request's host; else the local address) and the port
// (port_in_redirect, unless it is the scheme's own).
void put_redirect_origin(HeadWriter& o, const Request& r, const HttpLocConf& loc) {
  const Connection& c = *r.c;
  const bool tls = c.ssl != nullptr;
  o.put(tls ? "https://" : "http://");
  if (loc.server_name_in_redirect) {
    if (r.srv != nullptr && !r.srv->server_names.empty()) o.put(r.srv->server_names[0]);
  } else if (!r.check.host.empty()) {
    for (char ch : r.check.host) *o.p++ = ch >= 'A' && ch <= 'Z' ? static_cast<char>(ch + 32) : ch;
  } else {
    char text[INET6_ADDRSTRLEN + 2];
    o.put(std::string_view(text, local_host(c, text, sizeof text)));
  }
  const std::uint16_t port = port_of(c.local_addr);
  if (loc.port_in_redirect && port != 0 && port != (tls ? 443 : 80)) {
    *o.p++ = ':';
    o.put_uint(port);
  }
}

}  // namespace

std::string_view reason_phrase(int status) {
  for (const auto& s : kReasons) {
    if (s.status == status) return s.reason;
  }
  return "Unknown";
}

bool status_closes(int status) {
  switch (status) {
    case 400:
    case 408:
    case 411:
    case 413:
    case 414:
    case 431:
    case 500:
    case 501:
    case 505:
    case kStatusCertError:
    case kStatusNoCert:
    case kStatusPlainHttp:
      return true;
    default:
      return false;
  }
}

std::string_view server_field(const HttpLocConf& loc) {
  return loc.server_tokens ? kServer : kServerBare;
}

bool send_continue(Request& r) {
  // "Expect: 100-continue" (RFC 9110 §10.1.1): the client waits for a word
  // before it sends the body; said once, whoever reads the body.
  if (!r.check.expect_continue || r.continue_sent) return true;
  static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
  r.continue_sent = true;
  if (r.hc->stream != nullptr) return h2::send_continue(r);
  Connection& c = *r.c;
  return c.send(c, kContinue.data(), kContinue.size()) == static_cast<long>(kContinue.size());
}

std::string_view special_body(int status, bool tokens) {
  if (status < 0 || status >= 600) return {};
  const SpecialPages& pages = special_pages();
  return (tokens ? pages.bodies : pages.bare)[static_cast<std::size_t>(status)];
}

char* head_memory(Request& r, std::size_t need) {
  char* mem = r.header_mem;
  std::size_t cap = kHeaderInline;
  if (need > kHeaderInline) {
    cap = (need + 4095) & ~std::size_t{4095};
    mem = r.hc->worker->buffers().get(cap);
    if (mem == nullptr) return nullptr;
    r.big_header = mem;
    r.big_header_size = static_cast<std::uint32_t>(cap);
  }
  r.hbuf.reset(mem, cap);
  return mem;
}

BodyFraming body_framing(const Request& r, std::int64_t length) {
  // RFC 9112 §6.3: a known length is said; an unknown one is chunked for a
  // client that reads chunks, else the body ends with the connection. A
  // body followed by trailer fields (add_trailer) is chunked to such a
  // client whatever its length (§7.1.2: only the chunked coding has them).
  const HeadersOut& h = r.headers_out;
  // HTTP/2 frames every body itself (DATA frames, END_STREAM): a known
  // length is said, an unknown one needs nothing.
  if (r.hc != nullptr && r.hc->stream != nullptr) return BodyFraming::kLength;
  const bool trailers = h.expect_trailers && !h.length_only;
  if (length >= 0 && !trailers) return BodyFraming::kLength;
  if (r.line.version >= 1001 && r.loc->chunked_transfer_encoding) return BodyFraming::kChunked;
  return length >= 0 ? BodyFraming::kLength : BodyFraming::kClose;
}

bool write_header(Request& r) {
  const HeadersOut& h = r.headers_out;
  Connection& c = *r.c;
  const HttpLocConf& loc = *r.loc;
  r.status = h.status;
  if (status_closes(h.status)) {
    // The rest of the input cannot be trusted to start a request: stop
    // reading requests, and read (lingering) what is still coming.
    r.lingering = true;
  }
  // A worker that is exiting keeps no connection: a response written after
  // the graceful stop began says so (nginx's header filter does the same).
  r.keepalive = r.check.keep_alive && !r.lingering && !c.close && !h.upgrade &&
                loc.keepalive_timeout > 0 && c.requests < loc.keepalive_requests &&
                msec_diff(clock::current_msec(), r.hc->start_msec) <=
                    static_cast<MsecDiff>(loc.keepalive_time) &&
                !keepalive_disabled(r, loc) && !c.loop->exiting();
  // The body's framing (no body: a HEAD, 1xx, 204, 304).
  const bool body = !r.header_only && h.status >= 200 && h.status != 204 && h.status != 304;
  const BodyFraming framing = body_framing(r, h.content_length);
  r.chunked_out = body && framing == BodyFraming::kChunked;
  if (body && framing == BodyFraming::kClose) r.keepalive = false;

  // A Location made absolute: scheme, host (the longest of the three
  // choices) and port.
  const std::size_t origin =
      h.location.empty()
          ? 0
          : 80 + r.check.host.size() +
                (r.srv != nullptr && !r.srv->server_names.empty() ? r.srv->server_names[0].size()
                                                                  : 0);
  std::size_t need = 512 + 96 /* Expires, Cache-Control */ + origin + h.content_type.size() +
                     h.content_encoding.size() + h.etag.size() + h.content_range.size() +
                     3 * h.location.size() + h.location_query.size() +
                     h.reason.size() + add_headers_length(r, h.add_headers, h.status) +
                     (h.www_authenticate.empty() ? 0 : 20 + h.www_authenticate.size());
  // auth_request's challenges: a field name for each after the first.
  need += 20 * static_cast<std::size_t>(
                   std::count(h.www_authenticate.begin(), h.www_authenticate.end(), '\n'));
  for (std::uint32_t i = 0; i < h.nfields; ++i) {
    if (!h.fields[i].omit) need += h.fields[i].name.size() + h.fields[i].value.size() + 4;
  }
  char* mem = head_memory(r, need);
  if (mem == nullptr) return false;
  if (r.line.version > 0 && r.line.version < 1000) {
    // HTTP/0.9 (RFC 1945 §4.1): the answer is the body alone, its end the
    // connection's, as nginx's (errors too). The memory stays r.hbuf's: a
    // small file's body may be read into it.
    r.keepalive = false;
    r.chunked_out = false;
    r.header_size = 0;
    return true;
  }

  Out o{mem};
  o.put("HTTP/1.1 ");
  o.put_uint(static_cast<std::uint64_t>(h.status));
  *o.p++ = ' ';
  o.put(h.reason.empty() ? reason_phrase(h.status) : h.reason);
  o.put("\r\n");
  if (h.own_server) o.put(server_field(loc));
  if (h.own_date) {
    o.put("Date: ");
    o.put(clock::imf_fixdate());
    o.put("\r\n");
  }
  if (!h.content_type.empty()) {
    o.put("Content-Type: ");
    o.put(h.content_type);
    o.put("\r\n");
  }
  if (h.content_length >= 0 && !r.chunked_out) {
    o.put("Content-Length: ");
    o.put_uint(static_cast<std::uint64_t>(h.content_length));
    o.put("\r\n");
  }
  if (!h.content_encoding.empty()) {
    o.put("Content-Encoding: ");
    o.put(h.content_encoding);
    o.put("\r\n");
  }
  if (r.gzip_vary && vary_accept_encoding(loc)) o.put("Vary: Accept-Encoding\r\n");
  if (!h.content_range.empty()) {
    o.put("Content-Range: ");
    o.put(h.content_range);
    o.put("\r\n");
  }
  if (h.last_modified >= 0 &&
      !add_headers_set(h.add_headers, h.status, AddHeader::Sets::kLastModified)) {
    // The same file is asked for again and again: keep its date formatted.
    thread_local std::time_t cached_time = -1;
    thread_local char cached_text[32];
    thread_local std::size_t cached_len = 0;
    if (h.last_modified != cached_time) {
      cached_len = clock::format_imf_fixdate(h.last_modified, cached_text);
      cached_time = h.last_modified;
    }
    o.put("Last-Modified: ");
    o.put(std::string_view(cached_text, cached_len));
    o.put("\r\n");
  }
  if (!h.location.empty()) {
    o.put("Location: ");
    if (loc.absolute_redirect && h.location[0] == '/') put_redirect_origin(o, r, loc);
    if (h.location_as_is) {
      o.put(h.location);
    } else {
      o.put_escaped_path(h.location);
    }
    if (!h.location_query.empty()) {
      *o.p++ = '?';
      o.put(h.location_query);
    }
    o.put("\r\n");
  }
  if (r.chunked_out) o.put("Transfer-Encoding: chunked\r\n");
  if (h.allow) o.put("Allow: GET, HEAD\r\n");
  // One field per challenge (auth_request passes on every one its
  // subrequest got, '\n'-separated: a field value holds no LF).
  for (std::string_view rest = h.www_authenticate; !rest.empty();) {
    const std::size_t nl = rest.find('\n');
    o.put("WWW-Authenticate: ");
    o.put(rest.substr(0, nl));
    o.put("\r\n");
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
  }
  if (r.hc->stream != nullptr) {
    // HTTP/2 (RFC 9113 §8.2.2): no connection-specific fields; the head
    // is written out for http/v2's head writer, which makes it a HEADERS.
  } else if (h.upgrade) {
    o.put("Connection: upgrade\r\n");
  } else if (r.keepalive) {
    o.put("Connection: keep-alive\r\n");
    if (loc.keepalive_header > 0) {
      o.put("Keep-Alive: timeout=");
      o.put_uint(loc.keepalive_header / 1000);
      o.put("\r\n");
    }
  } else {
    o.put("Connection: close\r\n");
  }
  if (!h.etag.empty() && !add_headers_set(h.add_headers, h.status, AddHeader::Sets::kEtag)) {
    o.put("ETag: ");
    o.put(h.etag);
    o.put("\r\n");
  }
  if (h.accept_ranges) o.put("Accept-Ranges: bytes\r\n");
  if (h.expires >= 0) {
    char date[32];
    o.put("Expires: ");
    o.put(std::string_view(date, clock::format_imf_fixdate(h.expires, date)));
    o.put("\r\n");
  }
  if (h.cache_max_age == HeadersOut::kNoCache) {
    o.put("Cache-Control: no-cache\r\n");
  } else if (h.cache_max_age >= 0) {
    o.put("Cache-Control: max-age=");
    o.put_uint(static_cast<std::uint64_t>(h.cache_max_age));
    o.put("\r\n");
  }
  for (std::uint32_t i = 0; i < h.nfields; ++i) {
    const HeaderField& f = h.fields[i];
    if (f.omit) continue;
    o.put(f.name);
    o.put(": ");
    o.put(f.value);
    o.put("\r\n");
  }
  o.p = write_add_headers(r, h.add_headers, h.status, o.p);
  o.put("\r\n");

  r.hbuf.last = o.p;
  r.header_size = o.p - mem;
  return true;
}

void send_special(Request& r, int status) {
  if (r.loc == nullptr) r.loc = r.hc->srv->loc;
  HeadersOut& h = r.headers_out;
  // The page of a redirect says where to; anything else set before is dropped.
  h.restart_for(status);
  std::string_view body = special_body(status, r.loc->server_tokens);
  // 495-497 go out as 400 with their own page.
  h.status = status >= kStatusCertError && status <= kStatusPlainHttp ? 400 : status;
  if (!body.empty()) {
    h.content_type = "text/html";
    h.content_length = static_cast<std::int64_t>(body.size());
  } else if (status != 204 && status != 304) {
    h.content_length = 0;  // a status without a page (`return 418;`): still framed
  }
  // What the location takes: the static handlers GET and HEAD; a proxied
  // location every method but TRACE, too many to list, so no Allow there.
  h.allow = status == 405 && (r.loc->content == nullptr || !r.loc->content->any_method);
  if (status == 416 && r.content_range_len > 0) {
    h.content_range = std::string_view(r.content_range, r.content_range_len);  // "bytes */size"
  }
  release_file(r);
  // HTTP/0.9 has no HEAD: a "HEAD /" without a version gets its 400 page.
  r.header_only = r.line.method == Method::kHead && r.line.version != 9;
  if (send_header(r) != 0) {
    terminate_request(r, 500);
    return;
  }
  if (!body.empty() && !r.header_only) {
    // The page is static and never written to: the buffer only reads it.
    char* p = const_cast<char*>(body.data());
    r.bbuf.reset(p, body.size());
    r.bbuf.last = p + body.size();
  } else {
    r.bbuf = Buf{};
  }
  send_response(r);
}

}  // namespace vigil::http
