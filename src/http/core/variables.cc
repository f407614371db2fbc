// Compiled configuration strings with variables (nginx's complex values):
// compile() splits the text once; length() and write() walk the parts.
#include "http/core/variables.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "event/tls/tls.h"
#include "codec/head_writer.h"
#include "http/core/request.h"
#include "http/proxy/proxy_conf.h"
#include "vigil/core/clock.h"

namespace vigil::http {
namespace {

struct Named {
  std::string_view name;
  VarId id;
};

constexpr Named kNames[] = {
    {"host", VarId::kHost},
    {"remote_addr", VarId::kRemoteAddr},
    {"binary_remote_addr", VarId::kBinaryRemoteAddr},
    {"remote_port", VarId::kRemotePort},
    {"remote_user", VarId::kRemoteUser},
    {"server_addr", VarId::kServerAddr},
    {"server_port", VarId::kServerPort},
    {"scheme", VarId::kScheme},
    {"request_uri", VarId::kRequestUri},
    {"uri", VarId::kUri},
    {"document_uri", VarId::kUri},
    {"args", VarId::kArgs},
    {"query_string", VarId::kArgs},
    {"request_method", VarId::kRequestMethod},
    {"request", VarId::kRequest},
    {"status", VarId::kStatus},
    {"body_bytes_sent", VarId::kBodyBytesSent},
    {"bytes_sent", VarId::kBytesSent},
    {"request_time", VarId::kRequestTime},
    {"time_local", VarId::kTimeLocal},
    {"time_iso8601", VarId::kTimeIso8601},
    {"proxy_add_x_forwarded_for", VarId::kProxyAddXForwardedFor},
    {"upstream_addr", VarId::kUpstreamAddr},
    {"upstream_status", VarId::kUpstreamStatus},
    {"upstream_response_time", VarId::kUpstreamResponseTime},
    {"connection", VarId::kConnection},
    {"connection_requests", VarId::kConnectionRequests},
    {"proxy_host", VarId::kProxyHost},
    {"pid", VarId::kPid},
    {"ssl_protocol", VarId::kSslProtocol},
    {"ssl_cipher", VarId::kSslCipher},
    {"ssl_server_name", VarId::kSslServerName},
    {"ssl_session_reused", VarId::kSslSessionReused},
};

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

char lower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

// Writes into `out` when it is not null; counts always.
class Sink {
 public:
  explicit Sink(char* out) : p_(out) {}
  void put(std::string_view s) {
    if (p_ != nullptr) std::memcpy(p_ + n_, s.data(), s.size());
    n_ += s.size();
  }
  void put_char(char c) {
    if (p_ != nullptr) p_[n_] = c;
    ++n_;
  }
  void put_uint(std::uint64_t v) {
    char tmp[20];
    put(decimal(v, tmp));
  }
  // "1.234": seconds with milliseconds, as nginx's $request_time.
  void put_msec(Msec ms) {
    put_uint(ms / 1000);
    put_char('.');
    put_char(static_cast<char>('0' + ms % 1000 / 100));
    put_char(static_cast<char>('0' + ms % 100 / 10));
    put_char(static_cast<char>('0' + ms % 10));
  }
  std::size_t size() const { return n_; }
  char* at() const { return p_ != nullptr ? p_ + n_ : nullptr; }
  void advance(std::size_t n) { n_ += n; }

 private:
  char* p_;
  std::size_t n_ = 0;
};

std::uint16_t port_of(const sockaddr* sa) {
  if (sa == nullptr) return 0;
  if (sa->sa_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(sa)->sin_port);
  if (sa->sa_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(sa)->sin6_port);
  return 0;
}

// The local address of the connection: the listener's, or the socket's own
// when the listener is a wildcard (nginx's ngx_connection_local_sockaddr).
bool server_addr(const Request& r, char* text, std::size_t cap, std::size_t& len) {
  const Connection* c = r.c;
  if (c == nullptr || c->local_addr == nullptr) return false;
  sockaddr_storage ss{};
  const sockaddr* sa = c->local_addr;
  bool wildcard = false;
  if (sa->sa_family == AF_INET) {
    wildcard = reinterpret_cast<const sockaddr_in*>(sa)->sin_addr.s_addr == htonl(INADDR_ANY);
  } else if (sa->sa_family == AF_INET6) {
    wildcard = IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr);
  }
  if (wildcard) {
    socklen_t sl = sizeof ss;
    if (::getsockname(c->fd, reinterpret_cast<sockaddr*>(&ss), &sl) == -1) return false;
    sa = reinterpret_cast<const sockaddr*>(&ss);
  }
  const void* a =
      sa->sa_family == AF_INET
          ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in*>(sa)->sin_addr)
          : static_cast<const void*>(&reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr);
  if (::inet_ntop(sa->sa_family, a, text, static_cast<socklen_t>(cap)) == nullptr) return false;
  len = std::strlen(text);
  return true;
}

// The raw value of one variable into `s`; false when it has none.
bool value(const Request& r, VarId id, std::string_view header, Sink& s) {
  const Connection* c = r.c;
  switch (id) {
    case VarId::kHost: {
      std::string_view h = r.check.host;
      if (h.empty() && r.srv != nullptr && !r.srv->server_names.empty()) {
        h = r.srv->server_names[0];
      }
      for (char ch : h) s.put_char(lower(ch));
      return true;
    }
    case VarId::kRemoteAddr:
      if (c == nullptr) return false;
      s.put(c->addr_text);
      return true;
    case VarId::kBinaryRemoteAddr: {
      if (c == nullptr || c->peer_addr == nullptr) return false;
      const sockaddr* sa = c->peer_addr;
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
    case VarId::kRemotePort:
      if (c == nullptr || c->peer_addr == nullptr) return false;
      s.put_uint(port_of(c->peer_addr));
      return true;
    case VarId::kRemoteUser:
      return false;
    case VarId::kServerAddr: {
      char text[INET6_ADDRSTRLEN];
      std::size_t len = 0;
      if (!server_addr(r, text, sizeof text, len)) return false;
      s.put({text, len});
      return true;
    }
    case VarId::kServerPort:
      if (c == nullptr || c->local_addr == nullptr) return false;
      s.put_uint(port_of(c->local_addr));
      return true;
    case VarId::kScheme:
      s.put(c != nullptr && c->ssl != nullptr ? "https" : "http");
      return true;
    case VarId::kSslProtocol:
    case VarId::kSslCipher:
    case VarId::kSslServerName: {
      if (c == nullptr || c->ssl == nullptr) return false;
      const std::string_view v = id == VarId::kSslProtocol ? tls_protocol(*c)
                                 : id == VarId::kSslCipher ? tls_cipher(*c)
                                                           : tls_server_name(*c);
      if (v.empty()) return false;
      s.put(v);
      return true;
    }
    case VarId::kSslSessionReused:
      if (c == nullptr || c->ssl == nullptr) return false;
      s.put(tls_session_reused(*c) ? "r" : ".");
      return true;
    case VarId::kRequestUri:
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
    case VarId::kUri:
      if (r.uri.empty()) return false;
      s.put(r.uri);
      return true;
    case VarId::kArgs:
      if (!r.line.has_query) return false;
      s.put(r.line.query);
      return true;
    case VarId::kRequestMethod:
      if (r.line.method_name.empty()) return false;
      s.put(r.line.method_name);
      return true;
    case VarId::kRequest:
      s.put(r.line.line);
      return true;
    case VarId::kStatus:
      s.put_uint(static_cast<std::uint64_t>(r.status > 0 ? r.status : 0));
      return true;
    case VarId::kBodyBytesSent: {
      if (c == nullptr) return false;
      const off_t n = c->sent - r.sent_start - r.header_size;
      s.put_uint(static_cast<std::uint64_t>(n > 0 ? n : 0));
      return true;
    }
    case VarId::kBytesSent: {
      if (c == nullptr) return false;
      const off_t n = c->sent - r.sent_start;
      s.put_uint(static_cast<std::uint64_t>(n > 0 ? n : 0));
      return true;
    }
    case VarId::kRequestTime: {
      const MsecDiff d = msec_diff(clock::current_msec(), r.start_msec);
      s.put_msec(static_cast<Msec>(d > 0 ? d : 0));
      return true;
    }
    case VarId::kTimeLocal:
      s.put(clock::common_log_time());
      return true;
    case VarId::kTimeIso8601:
      s.put(clock::iso8601());
      return true;
    case VarId::kHttpHeader: {
      bool found = false;
      s.advance(request_header_value(r, header, s.at(), found));
      return found;
    }
    case VarId::kProxyAddXForwardedFor: {
      bool found = false;
      s.advance(request_header_value(r, "x-forwarded-for", s.at(), found));
      if (found) s.put(", ");
      if (c != nullptr) s.put(c->addr_text);
      return true;
    }
    case VarId::kUpstreamAddr:
    case VarId::kUpstreamStatus:
    case VarId::kUpstreamResponseTime:
      if (r.nupstream == 0) return false;
      for (std::uint32_t i = 0; i < r.nupstream && i < kMaxUpstreamTries; ++i) {
        const UpstreamTry& t = r.upstream_tries[i];
        if (i > 0) s.put(", ");
        if (id == VarId::kUpstreamAddr) {
          s.put({t.addr, t.addr_len});
        } else if (id == VarId::kUpstreamStatus) {
          if (t.status == 0) {
            s.put_char('-');
          } else {
            s.put_uint(static_cast<std::uint64_t>(t.status));
          }
        } else {
          s.put_msec(t.time);
        }
      }
      return true;
    case VarId::kConnection:
      if (c == nullptr) return false;
      s.put_uint(c->number);
      return true;
    case VarId::kPid:
      s.put_uint(static_cast<std::uint64_t>(::getpid()));
      return true;
    case VarId::kProxyHost:
      if (r.loc == nullptr || !proxy_conf(*r.loc).enabled) return false;
      s.put(proxy_conf(*r.loc).proxy_host);
      return true;
    case VarId::kConnectionRequests:
      if (c == nullptr) return false;
      s.put_uint(c->requests);
      return true;
  }
  return false;
}

// Escapes the `n` raw bytes at `p` in place (the buffer has room for the
// worst case after them); returns the escaped length.
std::size_t escape_in_place(char* p, std::size_t n, VarEscape esc) {
  static constexpr char kHex[] = "0123456789abcdef";
  static constexpr char kHexUpper[] = "0123456789ABCDEF";
  std::size_t m = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const auto ch = static_cast<unsigned char>(p[i]);
    if (esc == VarEscape::kDefault) {
      m += (ch == '"' || ch == '\\' || ch < 0x20 || ch > 0x7e) ? 4 : 1;
    } else {
      m += (ch == '"' || ch == '\\') ? 2 : ch < 0x20 ? 6 : 1;
    }
  }
  if (m == n) return n;
  // From the end backwards: the escaped text never overtakes the raw text.
  char* w = p + m;
  for (std::size_t i = n; i-- > 0;) {
    const auto ch = static_cast<unsigned char>(p[i]);
    if (esc == VarEscape::kDefault) {
      if (ch == '"' || ch == '\\' || ch < 0x20 || ch > 0x7e) {
        *--w = kHexUpper[ch & 0xf];
        *--w = kHexUpper[ch >> 4];
        *--w = 'x';
        *--w = '\\';
        continue;
      }
    } else if (ch == '"' || ch == '\\') {
      *--w = static_cast<char>(ch);
      *--w = '\\';
      continue;
    } else if (ch < 0x20) {
      *--w = kHex[ch & 0xf];
      *--w = kHex[ch >> 4];
      *--w = '0';
      *--w = '0';
      *--w = 'u';
      *--w = '\\';
      continue;
    }
    *--w = static_cast<char>(ch);
  }
  return m;
}

std::size_t worst_case(std::size_t n, VarEscape esc) {
  switch (esc) {
    case VarEscape::kNone:
      return n;
    case VarEscape::kDefault:
      return 4 * n;
    case VarEscape::kJson:
      return 6 * n;
  }
  return n;
}

}  // namespace

std::size_t request_header_value(const Request& r, std::string_view name, char* out, bool& found) {
  found = false;
  std::size_t n = 0;
  for (std::uint32_t i = 0; i < r.nfields; ++i) {
    const std::string_view fname = r.fields[i].name;
    if (fname.size() != name.size()) continue;
    bool same = true;
    for (std::size_t k = 0; k < name.size() && same; ++k) same = lower(fname[k]) == name[k];
    if (!same) continue;
    const std::string_view v = r.fields[i].value;
    if (found) {
      if (out != nullptr) std::memcpy(out + n, ", ", 2);
      n += 2;
    }
    if (out != nullptr) std::memcpy(out + n, v.data(), v.size());
    n += v.size();
    found = true;
  }
  return n;
}

Result<VarTemplate> VarTemplate::compile(std::string_view text) {
  VarTemplate t;
  t.source_ = std::string(text);
  std::size_t i = 0;
  while (i < text.size()) {
    if (text[i] != '$') {
      std::size_t j = text.find('$', i);
      if (j == std::string_view::npos) j = text.size();
      Part p;
      p.text = std::string(text.substr(i, j - i));
      t.literal_ += p.text;
      t.parts_.push_back(std::move(p));
      i = j;
      continue;
    }
    ++i;  // '$'
    bool braced = i < text.size() && text[i] == '{';
    if (braced) ++i;
    std::size_t j = i;
    while (j < text.size() && is_name_char(text[j])) ++j;
    std::string_view name = text.substr(i, j - i);
    if (name.empty()) return Status::error("invalid variable name in \"" + t.source_ + "\"");
    if (braced) {
      if (j >= text.size() || text[j] != '}') {
        return Status::error("the closing bracket in \"" + std::string(name) +
                             "\" variable is missing");
      }
      ++j;
    }
    i = j;
    Part p;
    p.literal = false;
    std::string lname;
    for (char ch : name) lname += lower(ch);
    if (lname.starts_with("http_") && lname.size() > 5) {
      p.id = VarId::kHttpHeader;
      p.text = lname.substr(5);
      for (char& ch : p.text) {
        if (ch == '_') ch = '-';
      }
    } else {
      bool known = false;
      for (const auto& n : kNames) {
        if (n.name == lname) {
          p.id = n.id;
          known = true;
          break;
        }
      }
      if (!known) return Status::error("unknown \"" + std::string(name) + "\" variable");
    }
    ++t.variables_;
    t.parts_.push_back(std::move(p));
  }
  if (t.variables_ > 0) t.literal_.clear();
  return t;
}

bool VarTemplate::uses(VarId id) const {
  for (const auto& p : parts_) {
    if (!p.literal && p.id == id) return true;
  }
  return false;
}

std::size_t VarTemplate::length(const Request& r, VarEscape esc, bool missing_dash) const {
  std::size_t n = 0;
  for (const auto& p : parts_) {
    if (p.literal) {
      n += p.text.size();
      continue;
    }
    Sink s(nullptr);
    if (!value(r, p.id, p.text, s)) {
      n += missing_dash ? 1 : 0;
      continue;
    }
    n += worst_case(s.size(), esc);
  }
  return n;
}

char* VarTemplate::write(const Request& r, char* out, VarEscape esc, bool missing_dash) const {
  for (const auto& p : parts_) {
    if (p.literal) {
      std::memcpy(out, p.text.data(), p.text.size());
      out += p.text.size();
      continue;
    }
    Sink s(out);
    if (!value(r, p.id, p.text, s)) {
      if (missing_dash) *out++ = '-';
      continue;
    }
    out += esc == VarEscape::kNone ? s.size() : escape_in_place(out, s.size(), esc);
  }
  return out;
}

}  // namespace vigil::http
