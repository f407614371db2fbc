// Compiled configuration strings with variables (nginx's complex values):
// compile() splits the text once; length() and write() walk the parts.
#include "http/core/variables.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include "codec/head_writer.h"
#include "core/access_log.h"
#include "core/var_syntax.h"
#include "event/local_address.h"
#include "event/proxy_protocol.h"
#include "event/tls/tls.h"
#include "http/core/counters.h"
#include "http/core/module.h"
#include "http/core/request.h"
#include "http/core/request_vars.h"
#include "http/static/map_path.h"
#include "vigil/core/clock.h"
#include "vigil/core/counters.h"
#include "vigil/core/log.h"

namespace vigil::http {
namespace {

bool same_lower(std::string_view any_case, std::string_view lower_case) {
  if (any_case.size() != lower_case.size()) return false;
  for (std::size_t k = 0; k < any_case.size(); ++k) {
    if (var_lower(any_case[k]) != lower_case[k]) return false;
  }
  return true;
}

std::uint16_t port_of(const sockaddr* sa) {
  if (sa == nullptr) return 0;
  if (sa->sa_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(sa)->sin_port);
  if (sa->sa_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(sa)->sin6_port);
  return 0;
}

bool server_addr(const Request& r, char* text, std::size_t cap, std::size_t& len) {
  return r.c != nullptr && connection_local_text(*r.c, text, cap, len);
}

// The core's variables, one getter each (VarGetter in variables.h).

bool var_host(const Request& r, std::string_view, VarSink& s) {
  std::string_view h = r.check.host;
  if (h.empty() && r.srv != nullptr && !r.srv->server_names.empty()) h = r.srv->server_names[0];
  for (char ch : h) s.put_char(var_lower(ch));
  return true;
}

bool var_remote_addr(const Request& r, std::string_view, VarSink& s) {
  if (r.c == nullptr) return false;
  s.put(r.c->addr_text);
  return true;
}

// $proxy_protocol_addr, $proxy_protocol_port, $proxy_protocol_server_addr,
// $proxy_protocol_server_port: from the PROXY protocol header of a
// "listen ... proxy_protocol" connection; not found without one.
template <std::string_view ProxyProtocolInfo::*Field>
bool var_proxy_protocol(const Request& r, std::string_view, VarSink& s) {
  const ProxyProtocolInfo* pp = r.c != nullptr ? r.c->proxy_protocol : nullptr;
  if (pp == nullptr) return false;
  s.put(pp->*Field);
  return true;
}

bool var_binary_remote_addr(const Request& r, std::string_view, VarSink& s) {
  const sockaddr* sa = r.c != nullptr ? r.c->peer_addr : nullptr;
  if (sa == nullptr) return false;
  if (sa->sa_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in*>(sa)->sin_addr;
    s.put({reinterpret_cast<const char*>(&in), 4});
  } else if (sa->sa_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr;
    s.put({reinterpret_cast<const char*>(&in6), 16});
  } else {
    return false;
  }
  return true;
}

bool var_remote_port(const Request& r, std::string_view, VarSink& s) {
  if (r.c == nullptr || r.c->peer_addr == nullptr) return false;
  // No port (a unix-domain client, or realip's address given without one):
  // empty, as nginx's.
  if (const std::uint16_t port = port_of(r.c->peer_addr); port != 0) s.put_uint(port);
  return true;
}

bool var_server_addr(const Request& r, std::string_view, VarSink& s) {
  char text[128];  // an IPv6 address, or "unix:" and a socket path (up to 107 bytes)
  std::size_t len = 0;
  if (!server_addr(r, text, sizeof text, len)) return false;
  s.put({text, len});
  return true;
}

bool var_server_port(const Request& r, std::string_view, VarSink& s) {
  if (r.c == nullptr || r.c->local_addr == nullptr) return false;
  // A unix-domain listener has no port: empty, as nginx's.
  if (const std::uint16_t port = port_of(r.c->local_addr); port != 0) s.put_uint(port);
  return true;
}

// The primary name of the server{} that took the request ("" when it has none).
bool var_server_name(const Request& r, std::string_view, VarSink& s) {
  if (r.srv != nullptr && !r.srv->server_names.empty()) {
    std::string_view name = r.srv->server_names[0];
    if (name.starts_with('.')) name.remove_prefix(1);  // ".example.com" is example.com, as nginx's
    s.put(name);
  }
  return true;
}

bool var_server_protocol(const Request& r, std::string_view, VarSink& s) {
  if (r.line.line.empty() || r.line.version < 1000) return false;  // HTTP/0.9 names none
  s.put(r.line.version >= 2000 ? "HTTP/2.0" : r.line.version >= 1001 ? "HTTP/1.1" : "HTTP/1.0");
  return true;
}

// "h2" over TLS, "h2c" in clear, "" for HTTP/1 (nginx's $http2).
bool var_http2(const Request& r, std::string_view, VarSink& s) {
  if (r.hc != nullptr && r.hc->stream != nullptr) s.put(r.c->ssl != nullptr ? "h2" : "h2c");
  return true;
}

bool var_scheme(const Request& r, std::string_view, VarSink& s) {
  s.put(r.c != nullptr && r.c->ssl != nullptr ? "https" : "http");
  return true;
}

bool var_https(const Request& r, std::string_view, VarSink& s) {
  if (r.c != nullptr && r.c->ssl != nullptr) s.put("on");
  return true;
}

bool var_request_uri(const Request& r, std::string_view, VarSink& s) {
  if (r.line.line.empty()) return false;
  if (r.line.form == TargetForm::kAbsolute) {
    s.put(r.line.path.empty() ? std::string_view("/") : r.line.path);
    if (r.line.has_query) {
      s.put_char('?');
      s.put(r.line.query);
    }
  } else {
    s.put(r.line.target);
  }
  return true;
}

// No value before a request-target was read; empty when the target was
// refused (a path above the root), as nginx's.
bool var_uri(const Request& r, std::string_view, VarSink& s) {
  if (r.uri.empty() && r.line.target.empty()) return false;
  s.put(r.uri);
  return true;
}

bool var_args(const Request& r, std::string_view, VarSink& s) {
  if (!r.line.has_query) return false;
  s.put(r.line.query);
  return true;
}

bool var_is_args(const Request& r, std::string_view, VarSink& s) {
  if (r.line.has_query && !r.line.query.empty()) s.put_char('?');
  return true;
}

// $limit_rate: this response's limit (0 until the first byte is sent or
// `set $limit_rate` chose it, as nginx's).
bool var_limit_rate(const Request& r, std::string_view, VarSink& s) {
  s.put_uint(r.limit_rate);
  return true;
}

// $arg_NAME: the first argument NAME (case-insensitive) in the query, as sent.
bool var_arg(const Request& r, std::string_view name, VarSink& s) {
  if (!r.line.has_query) return false;
  std::string_view q = r.line.query;
  while (!q.empty()) {
    const std::size_t amp = q.find('&');
    const std::string_view pair = q.substr(0, amp);
    q = amp == std::string_view::npos ? std::string_view() : q.substr(amp + 1);
    const std::size_t eq = pair.find('=');
    if (eq == std::string_view::npos || !same_lower(pair.substr(0, eq), name)) continue;
    s.put(pair.substr(eq + 1));
    return true;
  }
  return false;
}

// $cookie_NAME: the first cookie NAME (case-insensitive) of the Cookie fields.
bool var_cookie(const Request& r, std::string_view name, VarSink& s) {
  for (std::uint32_t i = 0; i < r.nfields; ++i) {
    if (!same_lower(r.fields[i].name, "cookie")) continue;
    std::string_view v = r.fields[i].value;
    while (!v.empty()) {
      const std::size_t semi = v.find(';');
      std::string_view pair = v.substr(0, semi);
      v = semi == std::string_view::npos ? std::string_view() : v.substr(semi + 1);
      while (!pair.empty() && (pair.front() == ' ' || pair.front() == '\t')) pair.remove_prefix(1);
      const std::size_t eq = pair.find('=');
      if (eq == std::string_view::npos || !same_lower(pair.substr(0, eq), name)) continue;
      s.put(pair.substr(eq + 1));
      return true;
    }
  }
  return false;
}

bool var_request_method(const Request& req, std::string_view, VarSink& s) {
  // The client's method, in a subrequest too (nginx's r->main).
  const Request* r = &req;
  while (r->parent != nullptr) r = r->parent;
  if (r->line.method_name.empty()) return false;
  s.put(r->line.method_name);
  return true;
}

bool var_request(const Request& r, std::string_view, VarSink& s) {
  s.put(r.line.line);
  return true;
}

bool var_status(const Request& r, std::string_view, VarSink& s) {
  s.put_uint(static_cast<std::uint64_t>(r.status > 0 ? r.status : 0));
  return true;
}

bool var_body_bytes_sent(const Request& r, std::string_view, VarSink& s) {
  if (r.c == nullptr) return false;
  const off_t n = r.c->sent - r.sent_start - r.header_size;
  s.put_uint(static_cast<std::uint64_t>(n > 0 ? n : 0));
  return true;
}

bool var_bytes_sent(const Request& r, std::string_view, VarSink& s) {
  if (r.c == nullptr) return false;
  const off_t n = r.c->sent - r.sent_start;
  s.put_uint(static_cast<std::uint64_t>(n > 0 ? n : 0));
  return true;
}

bool var_request_time(const Request& r, std::string_view, VarSink& s) {
  const MsecDiff d = msec_diff(clock::current_msec(), r.start_msec);
  s.put_msec(static_cast<Msec>(d > 0 ? d : 0));
  return true;
}

bool var_request_length(const Request& r, std::string_view, VarSink& s) {
  s.put_uint(r.request_length);
  return true;
}

bool var_connection_time(const Request& r, std::string_view, VarSink& s) {
  if (r.hc == nullptr) return false;
  const MsecDiff d = msec_diff(clock::current_msec(), r.hc->start_msec);
  s.put_msec(static_cast<Msec>(d > 0 ? d : 0));
  return true;
}

bool var_pipe(const Request& r, std::string_view, VarSink& s) {
  s.put_char(r.pipelined ? 'p' : '.');
  return true;
}

bool var_time_local(const Request&, std::string_view, VarSink& s) {
  s.put(clock::common_log_time());
  return true;
}

bool var_time_iso8601(const Request&, std::string_view, VarSink& s) {
  s.put(clock::iso8601());
  return true;
}

// Seconds since the epoch with milliseconds: "1795000000.250".
bool var_msec(const Request&, std::string_view, VarSink& s) {
  s.put_uint(static_cast<std::uint64_t>(clock::now_sec()));
  s.put_char('.');
  const unsigned ms = clock::now_msec_part();
  s.put_char(static_cast<char>('0' + ms / 100 % 10));
  s.put_char(static_cast<char>('0' + ms / 10 % 10));
  s.put_char(static_cast<char>('0' + ms % 10));
  return true;
}

// The request's fields named `name` (lower case), their values joined into
// `out` (when not null); the length. With `underscore` a '_' in a field's
// name stands for '-' (nginx's $http_NAME, where both the field "x-foo" and
// "x_foo", kept by underscores_in_headers or ignore_invalid_headers off,
// are $http_x_foo).
std::size_t field_values(const Request& r, std::string_view name, char* out, bool& found,
                         bool underscore) {
  found = false;
  std::size_t n = 0;
  // Cookie fields join as one cookie-string ("; ", RFC 6265 §5.4 and RFC
  // 9113 §8.2.3), any other list with ", " (RFC 9110 §5.3).
  const bool cookie = name == "cookie";
  for (std::uint32_t i = 0; i < r.nfields; ++i) {
    const std::string_view fname = r.fields[i].name;
    if (fname.size() != name.size()) continue;
    bool same = true;
    for (std::size_t k = 0; k < name.size() && same; ++k) {
      const char c = var_lower(fname[k]);
      same = c == name[k] || (underscore && c == '_' && name[k] == '-');
    }
    if (!same) continue;
    const std::string_view v = r.fields[i].value;
    if (found) {
      if (out != nullptr) std::memcpy(out + n, cookie ? "; " : ", ", 2);
      n += 2;
    }
    if (out != nullptr) std::memcpy(out + n, v.data(), v.size());
    n += v.size();
    found = true;
  }
  return n;
}

bool var_http(const Request& r, std::string_view name, VarSink& s) {
  bool found = false;
  s.advance(field_values(r, name, s.at(), found, true));
  return found;
}

// The fields named `name` (lower case, '-' for '_') among the "Name: value"
// CRLF-ended lines of `text`, joined with ", ".
bool fields_in_text(std::string_view text, std::string_view name, VarSink& s) {
  bool found = false;
  while (!text.empty()) {
    const std::size_t eol = text.find("\r\n");
    const std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 2);
    const std::size_t colon = line.find(':');
    if (colon != name.size() || !same_lower(line.substr(0, colon), name)) continue;
    std::string_view v = line.substr(colon + 1);
    while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
    if (found) s.put(", ");
    s.put(v);
    found = true;
  }
  return found;
}

// $sent_http_NAME: the response's fields as the head writer wrote them
// (nothing before the head is written).
bool var_sent_http(const Request& r, std::string_view name, VarSink& s) {
  if (r.parent != nullptr) {
    // A subrequest's head is not written: its fields as its parent got them
    // (a relayed response's, its type, a challenge).
    if (!r.sub_header_sent) return false;
    const HeadersOut& h = r.headers_out;
    if (same_lower("content-type", name) && !h.content_type.empty()) {
      s.put(h.content_type);
      return true;
    }
    if (same_lower("www-authenticate", name) && !h.www_authenticate.empty()) {
      s.put(h.www_authenticate);
      return true;
    }
    bool found = false;
    for (std::uint32_t i = 0; i < h.nfields; ++i) {
      const HeaderField& f = h.fields[i];
      if (f.omit || !same_lower(f.name, name)) continue;
      if (found) s.put(", ");
      s.put(f.value);
      found = true;
    }
    return found;
  }
  if (r.header_size <= 0 || r.hbuf.start == nullptr) return false;
  std::string_view head(r.hbuf.start, static_cast<std::size_t>(r.header_size));
  const std::size_t first = head.find("\r\n");
  if (first == std::string_view::npos) return false;
  return fields_in_text(head.substr(first + 2), name, s);
}

// $sent_trailer_NAME: the trailer fields written so far (filters/chunked.cc).
bool var_sent_trailer(const Request& r, std::string_view name, VarSink& s) {
  const ChunkFrame& f = r.chunk_frame;
  if (f.trailer_mem == nullptr || f.fields_end <= f.fields_begin) return false;
  return fields_in_text(
      std::string_view(f.trailer_mem + f.fields_begin, f.fields_end - f.fields_begin), name, s);
}

bool var_content_length(const Request& r, std::string_view, VarSink& s) {
  return var_http(r, "content-length", s);
}

bool var_content_type(const Request& r, std::string_view, VarSink& s) {
  return var_http(r, "content-type", s);
}

// The body, when it was read whole into the one body buffer (nginx: when it
// is in memory); a body larger than the buffer is streamed and has no value.
bool var_request_body(const Request& r, std::string_view, VarSink& s) {
  const RequestBody& b = r.body;
  if (!b.started || !b.done || b.failed || b.received == 0) return false;
  if (b.buf.start == nullptr || b.buf.last - b.buf.start != b.received) return false;
  s.put({b.buf.start, static_cast<std::size_t>(b.received)});
  return true;
}

bool var_request_body_file(const Request& r, std::string_view, VarSink& s) {
  const RequestBody& b = r.body;
  if (b.file_fd == -1 || b.file_name == nullptr) return false;
  s.put({b.file_name, b.file_name_len});
  return true;
}

bool var_connection(const Request& r, std::string_view, VarSink& s) {
  if (r.c == nullptr) return false;
  s.put_uint(r.c->number);
  return true;
}

bool var_connection_requests(const Request& r, std::string_view, VarSink& s) {
  if (r.c == nullptr) return false;
  s.put_uint(r.c->requests);
  return true;
}

bool var_pid(const Request&, std::string_view, VarSink& s) {
  s.put_uint(static_cast<std::uint64_t>(::getpid()));
  return true;
}

bool var_hostname(const Request&, std::string_view, VarSink& s) {
  static const std::string name = [] {
    char buf[256] = {};
    return ::gethostname(buf, sizeof buf - 1) == 0 ? std::string(buf) : std::string("localhost");
  }();
  s.put(name);
  return true;
}

bool var_document_root(const Request& r, std::string_view, VarSink& s) {
  if (r.loc == nullptr) return false;
  if (r.loc->root_vars == nullptr) {
    s.put(r.loc->root_path);
    return true;
  }
  // Evaluated twice, as every template is: counted, then written.
  char buf[4096];
  const std::size_t n = document_root(r, *r.loc, buf, sizeof buf);
  if (n == std::string::npos) return false;
  s.put(std::string_view(buf, n));
  return true;
}

// $request_filename: the file the current URI names under the location's
// root or alias (nginx's ngx_http_map_uri_to_path), as the static handler
// would open it.
bool var_request_filename(const Request& r, std::string_view, VarSink& s) {
  if (r.loc == nullptr) return false;
  char buf[16384];  // a root and a URI of the largest request line
  const std::size_t n = map_uri_to_path(r, *r.loc, r.uri, buf, sizeof buf);
  if (n == std::string::npos) return false;
  s.put(std::string_view(buf, n));
  return true;
}

// The figures stub_status shows, as variables.
enum class Figure : std::uint8_t { kActive, kReading, kWriting, kWaiting };

template <Figure F>
bool var_connections(const Request&, std::string_view, VarSink& s) {
  const SharedCounters* sc = shared_counters();
  const HttpCounters* h = http_counters();
  if (sc == nullptr || h == nullptr) return false;
  s.put_uint(F == Figure::kActive    ? sc->active.get()
             : F == Figure::kReading ? h->reading.get()
             : F == Figure::kWriting ? h->writing.get()
                                     : h->waiting.get());
  return true;
}

bool tls_text(const Request& r, std::string_view (*fact)(const Connection&), VarSink& s) {
  if (r.c == nullptr || r.c->ssl == nullptr) return false;
  const std::string_view v = fact(*r.c);
  if (v.empty()) return false;
  s.put(v);
  return true;
}

bool var_ssl_protocol(const Request& r, std::string_view, VarSink& s) {
  return tls_text(r, tls_protocol, s);
}

bool var_ssl_cipher(const Request& r, std::string_view, VarSink& s) {
  return tls_text(r, tls_cipher, s);
}

bool var_ssl_server_name(const Request& r, std::string_view, VarSink& s) {
  return tls_text(r, tls_server_name, s);
}

bool var_ssl_alpn_protocol(const Request& r, std::string_view, VarSink& s) {
  return tls_text(r, tls_alpn_protocol, s);
}

bool var_ssl_session_reused(const Request& r, std::string_view, VarSink& s) {
  if (r.c == nullptr || r.c->ssl == nullptr) return false;
  s.put(tls_session_reused(*r.c) ? "r" : ".");
  return true;
}

// The TLS facts computed on demand (tls.h, TlsFact): written in place.
template <TlsFact F>
bool var_tls_fact(const Request& r, std::string_view, VarSink& s) {
  if (r.c == nullptr || r.c->ssl == nullptr) return false;
  bool found = false;
  s.advance(tls_fact(*r.c, F, s.at(), found));
  return found;
}

// One column of the upstream attempts, for every attempt.
enum class TryField : std::uint8_t {
  kAddr,
  kStatus,
  kResponseTime,
  kConnectTime,
  kHeaderTime,
  kResponseLength,
  kBytesReceived,
  kBytesSent,
};

template <TryField F>
bool var_upstream(const Request& r, std::string_view, VarSink& s) {
  if (r.nupstream == 0) return false;
  for (std::uint32_t i = 0; i < r.nupstream && i < kMaxUpstreamTries; ++i) {
    const UpstreamTry& t = r.upstream_tries[i];
    if (i > 0) s.put(", ");
    switch (F) {
      case TryField::kAddr:
        s.put({t.addr, t.addr_len});
        break;
      case TryField::kStatus:
        if (t.status == 0) {
          s.put_char('-');
        } else {
          s.put_uint(static_cast<std::uint64_t>(t.status));
        }
        break;
      case TryField::kResponseTime:
        if (t.has_time) {
          s.put_msec(t.time);
        } else {
          s.put_char('-');
        }
        break;
      case TryField::kResponseLength:
        s.put_uint(t.response_length);
        break;
      case TryField::kBytesReceived:
        s.put_uint(t.bytes_received);
        break;
      case TryField::kBytesSent:
        s.put_uint(t.bytes_sent);
        break;
      case TryField::kConnectTime:
      case TryField::kHeaderTime: {
        const bool set = F == TryField::kConnectTime ? t.connected : t.has_header;
        if (set) {
          s.put_msec(F == TryField::kConnectTime ? t.connect_time : t.header_time);
        } else {
          s.put_char('-');
        }
        break;
      }
    }
  }
  return true;
}

constexpr VarSpec kCoreVariables[] = {
    {"host", var_host},
    {"remote_addr", var_remote_addr},
    {"binary_remote_addr", var_binary_remote_addr},
    {"remote_port", var_remote_port},
    {"proxy_protocol_addr", var_proxy_protocol<&ProxyProtocolInfo::src_addr>},
    {"proxy_protocol_port", var_proxy_protocol<&ProxyProtocolInfo::src_port_text>},
    {"proxy_protocol_server_addr", var_proxy_protocol<&ProxyProtocolInfo::dst_addr>},
    {"proxy_protocol_server_port", var_proxy_protocol<&ProxyProtocolInfo::dst_port_text>},
    {"server_addr", var_server_addr},
    {"server_port", var_server_port},
    {"server_name", var_server_name},
    {"server_protocol", var_server_protocol},
    {"http2", var_http2},
    {"scheme", var_scheme},
    {"https", var_https},
    {"request_uri", var_request_uri},
    {"uri", var_uri},
    {"document_uri", var_uri},
    {"args", var_args},
    {"query_string", var_args},
    {"is_args", var_is_args},
    {"request_method", var_request_method},
    {"request", var_request},
    {"status", var_status},
    {"body_bytes_sent", var_body_bytes_sent},
    {"bytes_sent", var_bytes_sent},
    {"request_time", var_request_time},
    {"request_length", var_request_length},
    {"pipe", var_pipe},
    {"connection_time", var_connection_time},
    {"time_local", var_time_local},
    {"time_iso8601", var_time_iso8601},
    {"msec", var_msec},
    {"content_length", var_content_length},
    {"content_type", var_content_type},
    {"request_body", var_request_body},
    {"request_body_file", var_request_body_file},
    {"document_root", var_document_root},
    {"request_filename", var_request_filename},
    {"upstream_addr", var_upstream<TryField::kAddr>},
    {"upstream_status", var_upstream<TryField::kStatus>},
    {"upstream_response_time", var_upstream<TryField::kResponseTime>},
    {"upstream_connect_time", var_upstream<TryField::kConnectTime>},
    {"upstream_header_time", var_upstream<TryField::kHeaderTime>},
    {"upstream_response_length", var_upstream<TryField::kResponseLength>},
    {"upstream_bytes_received", var_upstream<TryField::kBytesReceived>},
    {"upstream_bytes_sent", var_upstream<TryField::kBytesSent>},
    {"limit_rate", var_limit_rate},
    {"connection", var_connection},
    {"connection_requests", var_connection_requests},
    {"pid", var_pid},
    {"hostname", var_hostname},
    {"ssl_protocol", var_ssl_protocol},
    {"ssl_cipher", var_ssl_cipher},
    {"ssl_server_name", var_ssl_server_name},
    {"ssl_session_reused", var_ssl_session_reused},
    {"ssl_alpn_protocol", var_ssl_alpn_protocol},
    {"ssl_session_id", var_tls_fact<TlsFact::kSessionId>},
    {"ssl_curve", var_tls_fact<TlsFact::kCurve>},
    {"ssl_curves", var_tls_fact<TlsFact::kCurves>},
    {"ssl_client_escaped_cert", var_tls_fact<TlsFact::kClientEscapedCert>},
    {"ssl_client_verify", var_tls_fact<TlsFact::kClientVerify>},
    {"ssl_client_s_dn", var_tls_fact<TlsFact::kClientSubject>},
    {"ssl_client_i_dn", var_tls_fact<TlsFact::kClientIssuer>},
    {"ssl_client_serial", var_tls_fact<TlsFact::kClientSerial>},
    {"ssl_client_fingerprint", var_tls_fact<TlsFact::kClientFingerprint>},
    {"ssl_client_raw_cert", var_tls_fact<TlsFact::kClientRawCert>},
    {"ssl_client_cert", var_tls_fact<TlsFact::kClientCert>},
    {"ssl_ciphers", var_tls_fact<TlsFact::kCiphers>},
    {"ssl_client_s_dn_legacy", var_tls_fact<TlsFact::kClientSubjectLegacy>},
    {"ssl_client_i_dn_legacy", var_tls_fact<TlsFact::kClientIssuerLegacy>},
    {"ssl_client_v_start", var_tls_fact<TlsFact::kClientNotBefore>},
    {"ssl_client_v_end", var_tls_fact<TlsFact::kClientNotAfter>},
    {"ssl_client_v_remain", var_tls_fact<TlsFact::kClientDaysLeft>},
    {"connections_active", var_connections<Figure::kActive>},
    {"connections_reading", var_connections<Figure::kReading>},
    {"connections_writing", var_connections<Figure::kWriting>},
    {"connections_waiting", var_connections<Figure::kWaiting>},
    {"http_", var_http, true},
    {"sent_http_", var_sent_http, true},
    {"sent_trailer_", var_sent_trailer, true},
    {"arg_", var_arg, true},
    {"cookie_", var_cookie, true},
};

// The spec for `name` (lower case): the core's, then the modules'; an exact
// name before a prefix.
const VarSpec* find_variable(std::string_view name, std::string_view& arg) {
  auto search = [&](std::span<const VarSpec> specs, bool prefix) -> const VarSpec* {
    for (const VarSpec& v : specs) {
      if (v.prefix != prefix) continue;
      if (!prefix && v.name == name) return &v;
      if (prefix && name.starts_with(v.name)) {  // "$arg_" alone is a name too, never set
        arg = name.substr(v.name.size());
        return &v;
      }
    }
    return nullptr;
  };
  for (bool prefix : {false, true}) {
    if (const VarSpec* v = search(kCoreVariables, prefix)) return v;
    for (const HttpModule* m : http_modules()) {
      if (const VarSpec* v = search(m->variables(), prefix)) return v;
    }
  }
  return nullptr;
}

}  // namespace

namespace {

// How one value is changed on its way out.
enum class ValueCoding : std::uint8_t {
  kAsIs,
  kLog,          // VarEscape::kDefault
  kJson,         // VarEscape::kJson
  kUriArgs,      // percent-encoded as a query argument
  kUriRedirect,  // percent-encoded where a redirect's decoding would not restore it
  kUnescape,     // percent-decoded as a redirect target (shrinks)
};

ValueCoding coding_for(VarEscape esc, bool capture) {
  switch (esc) {
    case VarEscape::kNone:
      return ValueCoding::kAsIs;
    case VarEscape::kDefault:
      return ValueCoding::kLog;
    case VarEscape::kJson:
      return ValueCoding::kJson;
    case VarEscape::kUriArgs:
      return capture ? ValueCoding::kUriArgs : ValueCoding::kAsIs;
    case VarEscape::kRedirect:
      return capture ? ValueCoding::kAsIs : ValueCoding::kUnescape;
    case VarEscape::kRedirectQuoted:
      return capture ? ValueCoding::kUriRedirect : ValueCoding::kUnescape;
  }
  return ValueCoding::kAsIs;
}

// Bytes a URI argument carries percent-encoded (nginx's NGX_ESCAPE_ARGS set).
bool args_escaped(unsigned char ch) {
  return ch <= 0x20 || ch >= 0x7f || ch == '#' || ch == '%' || ch == '&' || ch == '+' ||
         ch == ';' || ch == '?';
}

// Of those, the ones a redirect's decoding leaves encoded.
bool redirect_escaped(unsigned char ch) {
  return args_escaped(ch) && (ch <= '%' || ch >= 0x7f);
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  c = static_cast<char>(c | 0x20);
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// A redirect target's value decoded in place, as nginx decodes a redirect:
// "%XX" becomes its byte when that is a plain URI character (above '%' and
// below 0x7f), else stays encoded; a '?' (as sent or decoded) ends the
// decoding, the rest is kept as it is. Returns the new length.
std::size_t unescape_redirect(char* p, std::size_t n) {
  std::size_t r = 0;
  std::size_t w = 0;
  while (r < n) {
    const char ch = p[r];
    if (ch == '?') break;
    if (ch == '%' && r + 2 < n && hex_value(p[r + 1]) >= 0 && hex_value(p[r + 2]) >= 0) {
      const auto byte = static_cast<unsigned char>(hex_value(p[r + 1]) * 16 + hex_value(p[r + 2]));
      if (byte == '?') {
        p[w++] = '?';
        r += 3;
        break;
      }
      if (byte > '%' && byte < 0x7f) {
        p[w++] = static_cast<char>(byte);
        r += 3;
        continue;
      }
      p[w++] = p[r++];
      p[w++] = p[r++];
      p[w++] = p[r++];
      continue;
    }
    p[w++] = p[r++];
  }
  while (r < n) p[w++] = p[r++];
  return w;
}

// Percent-encodes the `n` raw bytes at `p` in place where `escaped` says
// (the buffer has room for the worst case after them); returns the length.
template <typename Pred>
std::size_t percent_encode_in_place(char* p, std::size_t n, Pred escaped) {
  static constexpr char kHexUpper[] = "0123456789ABCDEF";
  std::size_t m = 0;
  for (std::size_t i = 0; i < n; ++i) m += escaped(static_cast<unsigned char>(p[i])) ? 3 : 1;
  if (m == n) return n;
  char* w = p + m;
  for (std::size_t i = n; i-- > 0;) {
    const auto ch = static_cast<unsigned char>(p[i]);
    if (escaped(ch)) {
      *--w = kHexUpper[ch & 0xf];
      *--w = kHexUpper[ch >> 4];
      *--w = '%';
    } else {
      *--w = static_cast<char>(ch);
    }
  }
  return m;
}

// Escapes the `n` raw bytes at `p` in place (the buffer has room for the
// worst case after them); returns the escaped length.
std::size_t escape_in_place(char* p, std::size_t n, ValueCoding coding) {
  switch (coding) {
    case ValueCoding::kAsIs:
      return n;
    case ValueCoding::kUriArgs:
      return percent_encode_in_place(p, n, args_escaped);
    case ValueCoding::kUriRedirect:
      return percent_encode_in_place(p, n, redirect_escaped);
    case ValueCoding::kUnescape:
      return unescape_redirect(p, n);
    case ValueCoding::kLog:
    case ValueCoding::kJson:
      break;
  }
  // The access log's escapes, shared with the stream log (core/access_log.h).
  return escape_log_in_place(p, n,
                             coding == ValueCoding::kLog ? LogEscape::kDefault : LogEscape::kJson);
}

std::size_t worst_case(std::size_t n, ValueCoding coding) {
  switch (coding) {
    case ValueCoding::kAsIs:
    case ValueCoding::kUnescape:
      return n;
    case ValueCoding::kLog:
      return 4 * n;
    case ValueCoding::kJson:
      return 6 * n;
    case ValueCoding::kUriArgs:
    case ValueCoding::kUriRedirect:
      return 3 * n;
  }
  return n;
}

}  // namespace

std::size_t request_header_value(const Request& r, std::string_view name, char* out, bool& found) {
  return field_values(r, name, out, found, false);
}

Result<std::string> declared_variable_word(std::string_view word) {
  auto name = var_word_name(word);
  if (!name) return name;
  std::string_view arg;
  if (find_declared_variable(*name) < 0 && find_variable(*name, arg) != nullptr) {
    return Status::error("the duplicate \"" + *name + "\" variable");
  }
  return name;
}

Result<VarTemplate> VarTemplate::compile(std::string_view text) {
  VarTemplate t;
  t.source_ = std::string(text);
  Status st = scan_var_template(
      text,
      [&t](std::string_view literal) {
        Part p;
        p.text = std::string(literal);
        t.literal_ += p.text;
        t.parts_.push_back(std::move(p));
      },
      [&t](int n) {
        Part p;
        p.capture = n;
        ++t.variables_;
        t.parts_.push_back(std::move(p));
      },
      [&t](std::string_view name, const std::string& lname) {
        Part p;
        std::string_view arg;
        const VarSpec* spec = find_variable(lname, arg);
        if (spec == nullptr) {
          const int declared = find_declared_variable(lname);
          if (declared < 0) return Status::error("unknown \"" + std::string(name) + "\" variable");
          p.declared = declared;
        } else {
          p.get = spec->get;
          p.text = std::string(arg);
          // Header names: '_' stands for '-'.
          if (spec->prefix && (spec->name.ends_with("http_") || spec->name.ends_with("trailer_"))) {
            for (char& ch : p.text) {
              if (ch == '_') ch = '-';
            }
          }
        }
        ++t.variables_;
        t.parts_.push_back(std::move(p));
        return Status::ok();
      });
  if (!st) return st;
  if (t.variables_ > 0) t.literal_.clear();
  return t;
}

bool VarTemplate::value_of(const Part& p, const Request& r, VarSink& out) {
  if (p.get != nullptr) return p.get(r, p.text, out);
  std::string_view v;
  if (p.capture >= 0) {
    if (!capture(r, p.capture, v)) return true;  // no such group: empty, as nginx
  } else if (!read_declared_variable(r, static_cast<std::uint32_t>(p.declared), v)) {
    return false;
  }
  out.put(v);
  return true;
}

std::size_t VarTemplate::length(const Request& r, VarEscape esc, bool missing_dash) const {
  std::size_t n = 0;
  for (const auto& p : parts_) {
    if (p.get == nullptr && p.capture < 0 && p.declared < 0) {
      n += p.text.size();
      continue;
    }
    VarSink s(nullptr);
    if (!value_of(p, r, s)) {
      n += missing_dash ? 1 : 0;
      continue;
    }
    n += worst_case(s.size(), coding_for(esc, p.capture >= 0));
  }
  return n;
}

char* VarTemplate::write(const Request& r, char* out, VarEscape esc, bool missing_dash) const {
  for (const auto& p : parts_) {
    if (p.get == nullptr && p.capture < 0 && p.declared < 0) {
      std::memcpy(out, p.text.data(), p.text.size());
      out += p.text.size();
      continue;
    }
    VarSink s(out);
    if (!value_of(p, r, s)) {
      if (p.declared >= 0 && r.loc != nullptr && r.loc->warn_uninitialized && r.c != nullptr) {
        const std::string_view name =
            declared_variable_name(static_cast<std::uint32_t>(p.declared));
        VIGIL_LOG(*r.c->log, kWarn, 0, "*%llu using uninitialized \"%.*s\" variable",
                  static_cast<unsigned long long>(r.c->number), static_cast<int>(name.size()),
                  name.data());
      }
      if (missing_dash) *out++ = '-';
      continue;
    }
    const ValueCoding coding = coding_for(esc, p.capture >= 0);
    out += coding == ValueCoding::kAsIs ? s.size() : escape_in_place(out, s.size(), coding);
  }
  return out;
}

}  // namespace vigil::http
