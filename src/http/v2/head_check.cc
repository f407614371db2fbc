// The checks on a request head that nghttp2's HTTP messaging would make,
// made here so that a malformed request can be answered (RFC 9113 §8.1.1:
// "a server MAY send an HTTP response prior to closing or resetting the
// stream"), as nginx answers it (ngx_http_v2_validate_header,
// ngx_http_v2_pseudo_header, ngx_http_v2_construct_request_line): each
// check of nghttp2's is kept, and each of nginx's is added.
#include <nghttp2/nghttp2.h>

#include <array>
#include <cstdint>
#include <string_view>

#include "http/core/conf.h"
#include "http/v2/session.h"

namespace vigil::http::h2 {
namespace {

constexpr std::uint8_t kMethod = 1;
constexpr std::uint8_t kScheme = 2;
constexpr std::uint8_t kPath = 4;
constexpr std::uint8_t kAuthority = 8;

const std::uint8_t* bytes(std::string_view s) {
  return reinterpret_cast<const std::uint8_t*>(s.data());
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    char x = a[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (x != b[i]) return false;
  }
  return true;
}

// nginx's :method: one it knows, or upper-case letters, '_' and '-'.
bool method_ok(std::string_view m) {
  for (const char c : m) {
    if ((c < 'A' || c > 'Z') && c != '_' && c != '-') return false;
  }
  return true;
}

// RFC 3986 §3.1: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ).
bool scheme_ok(std::string_view s) {
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const char l = static_cast<char>(c | 0x20);
    if (l >= 'a' && l <= 'z') continue;
    if (i > 0 && ((c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.')) continue;
    return false;
  }
  return true;
}

// A content-length value: digits, not past 2^63-1; -1 otherwise.
std::int64_t parse_length(std::string_view v) {
  if (v.empty()) return -1;
  std::int64_t n = 0;
  for (const char c : v) {
    if (c < '0' || c > '9') return -1;
    if (n > (INT64_MAX - (c - '0')) / 10) return -1;
    n = n * 10 + (c - '0');
  }
  return n;
}

// What a byte is in a field name (nginx's classes) and in a value, looked
// up once per byte on the way of every request's fields.
enum : std::uint8_t {
  kNameOk = 1,          // a-z, 0-9, '-'
  kNameUnderscore = 2,  // '_': ok with underscores_in_headers
  kNameBad = 4,         // A-Z, controls, space, ':', DEL: the stream is reset
  kValueBad = 8,        // NUL, CR, LF: the stream is reset
  kValueOdd = 16,       // another control, DEL: the field is dropped
};

constexpr std::array<std::uint8_t, 256> make_classes() {
  std::array<std::uint8_t, 256> t{};
  for (int c = 0; c < 256; ++c) {
    std::uint8_t k = 0;
    if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-') k |= kNameOk;
    if (c == '_') k |= kNameUnderscore;
    if (c <= 0x20 || c == 0x7f || c == ':' || (c >= 'A' && c <= 'Z')) k |= kNameBad;
    if (c == 0 || c == '\r' || c == '\n') {
      k |= kValueBad;
    } else if ((c < 0x20 && c != '\t') || c == 0x7f) {
      k |= kValueOdd;
    }
    t[static_cast<std::size_t>(c)] = k;
  }
  return t;
}

constexpr std::array<std::uint8_t, 256> kClasses = make_classes();

std::uint8_t class_of(char c) {
  return kClasses[static_cast<unsigned char>(c)];
}

HeadVerdict bad(const char*& why, const char* text) {
  why = text;
  return HeadVerdict::kBadRequest;
}

HeadVerdict check_pseudo(Stream& st, std::string_view name, std::string_view value,
                         const char*& why) {
  std::uint8_t bit = 0;
  if (name == ":method") {
    bit = kMethod;
  } else if (name == ":scheme") {
    bit = kScheme;
  } else if (name == ":path") {
    bit = kPath;
  } else if (name == ":authority") {
    bit = kAuthority;
  } else {
    return bad(why, "client sent unknown pseudo-header");
  }
  if ((st.pseudo & bit) != 0) return bad(why, "client sent duplicate pseudo-header");
  st.pseudo |= bit;
  if (value.empty()) return bad(why, "client sent empty pseudo-header");
  switch (bit) {
    case kMethod:
      if (!method_ok(value)) return bad(why, "client sent invalid method");
      break;
    case kScheme:
      if (!scheme_ok(value)) return bad(why, "client sent invalid :scheme header");
      break;
    case kPath:
      // The form (absolute, or "*") is checked with the method, at the end.
      if (nghttp2_check_path(bytes(value), value.size()) == 0) {
        return bad(why, "client sent invalid :path header");
      }
      break;
    default:
      if (nghttp2_check_authority(bytes(value), value.size()) == 0) {
        return bad(why, "client sent invalid :authority header");
      }
      break;
  }
  return HeadVerdict::kKeep;
}

}  // namespace

HeadVerdict check_request_field(Stream& st, const HttpSrvConf& srv, std::string_view name,
                                std::string_view value, const char*& why) {
  if (name.empty()) {
    why = "client sent zero header name length";
    return HeadVerdict::kReset;
  }
  // nginx's field name: lower-case letters, digits, '-', and '_' with
  // underscores_in_headers. Upper case (RFC 9113 §8.2.1), controls,
  // spaces and ':' past the first byte make the request malformed: its
  // stream is reset (nginx 1.22). Other bytes make the field one that
  // ignore_invalid_headers drops.
  const bool pseudo = name[0] == ':';
  const std::uint8_t name_ok = srv.underscores_in_headers ? (kNameOk | kNameUnderscore) : kNameOk;
  bool odd = false;
  for (std::size_t i = pseudo ? 1 : 0; i < name.size(); ++i) {
    const std::uint8_t k = class_of(name[i]);
    if ((k & name_ok) != 0) continue;
    if ((k & kNameBad) != 0) {
      why = "client sent invalid header name";
      return HeadVerdict::kReset;
    }
    odd = true;
  }
  // RFC 9113 §8.2.1: NUL, CR or LF in a value is malformed (nginx 1.22
  // resets the stream); another control character is not a field value
  // (RFC 9110 §5.5) and leading or trailing white space is malformed too
  // (§8.2.1): such a regular field is dropped, as nghttp2 drops it (the
  // pseudo-header fields' values are checked below).
  std::uint8_t value_classes = 0;
  for (const char c : value) value_classes |= class_of(c);
  if ((value_classes & kValueBad) != 0) {
    why = "client sent header with invalid value";
    return HeadVerdict::kReset;
  }
  if (pseudo) {
    // §8.3: every pseudo-header field comes before the regular fields.
    if (st.after_fields) return bad(why, "client sent pseudo-header after a header field");
    return check_pseudo(st, name, value, why);
  }
  st.after_fields = true;
  if (odd && srv.ignore_invalid_headers) {
    why = "client sent invalid header";
    return HeadVerdict::kIgnore;
  }
  if ((value_classes & kValueOdd) != 0 ||
      (!value.empty() && (value.front() == ' ' || value.front() == '\t' || value.back() == ' ' ||
                          value.back() == '\t'))) {
    why = "client sent header with invalid value";
    return HeadVerdict::kIgnore;
  }
  switch (name.size()) {
    case 2:
      // §8.2.2: TE says "trailers" or nothing.
      if (name == "te" && !iequals(value, "trailers")) {
        return bad(why, "client sent invalid TE header");
      }
      break;
    case 4:
      if (name == "host") {
        if (st.has_host) return bad(why, "client sent duplicate host header");
        if (value.empty() || nghttp2_check_authority(bytes(value), value.size()) == 0) {
          return bad(why, "client sent invalid host header");
        }
      }
      break;
    case 7:
      if (name == "upgrade") return bad(why, "client sent connection-specific header");
      break;
    case 10:
      if (name == "connection" || name == "keep-alive") {
        return bad(why, "client sent connection-specific header");
      }
      break;
    case 14:
      if (name == "content-length") {
        if (st.content_length != -1) return bad(why, "client sent duplicate content-length header");
        st.content_length = parse_length(value);
        if (st.content_length == -1) return bad(why, "client sent invalid content-length header");
      }
      break;
    case 16:
      if (name == "proxy-connection") return bad(why, "client sent connection-specific header");
      break;
    case 17:
      if (name == "transfer-encoding") return bad(why, "client sent connection-specific header");
      break;
    default:
      break;
  }
  return HeadVerdict::kKeep;
}

int check_request_head(const Stream& st, std::string_view method, std::string_view path,
                       const char*& why) {
  if (method == "CONNECT") {
    // §8.5: the target in :authority alone. A CONNECT with :scheme and
    // :path too is answered as nginx answers any CONNECT (405).
    if ((st.pseudo & kAuthority) == 0) {
      why = "client sent CONNECT without :authority";
      return 400;
    }
    if ((st.pseudo & (kScheme | kPath)) != 0) {
      why = "client sent CONNECT method";
      return 405;
    }
    return 0;
  }
  if ((st.pseudo & kMethod) == 0) {
    why = "client sent no :method header";
    return 400;
  }
  if ((st.pseudo & kScheme) == 0) {
    why = "client sent no :scheme header";
    return 400;
  }
  if ((st.pseudo & kPath) == 0) {
    why = "client sent no :path header";
    return 400;
  }
  if ((st.pseudo & kAuthority) == 0 && !st.has_host) {
    why = "client sent no :authority or host header";
    return 400;
  }
  // §8.3.1: an absolute path, or "*" for OPTIONS.
  if (path[0] != '/' && !(path == "*" && method == "OPTIONS")) {
    why = "client sent invalid :path header";
    return 400;
  }
  return 0;
}

bool trailer_field_ok(std::string_view name, std::string_view value) {
  // §8.1: no pseudo-header in a trailer section; a field's name and value
  // as in a head (those a head drops are dropped here too).
  if (name.empty() || name[0] == ':') return false;
  for (const char c : name) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7f || c == ':' || (c >= 'A' && c <= 'Z')) return false;
  }
  for (const char c : value) {
    if (c == '\0' || c == '\r' || c == '\n') return false;
  }
  return true;
}

bool parse_priority(std::string_view v, nghttp2_extpri& pri) {
  // RFC 9218 §4: a Structured Fields Dictionary (RFC 8941 §3.2) whose "u"
  // (an integer 0-7) and "i" (a boolean) are used; other members and
  // parameters are skipped. Any syntax error leaves the defaults (§4:
  // "MUST ... ignore" what it cannot parse).
  std::uint32_t urgency = pri.urgency;
  int inc = pri.inc;
  std::size_t i = 0;
  auto ows = [&] {
    while (i < v.size() && (v[i] == ' ' || v[i] == '\t')) ++i;
  };
  auto key_char = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.' ||
           c == '*';
  };
  ows();
  while (i < v.size()) {
    const std::size_t k = i;
    if (!(v[i] >= 'a' && v[i] <= 'z') && v[i] != '*') return false;
    while (i < v.size() && key_char(v[i])) ++i;
    const std::string_view key = v.substr(k, i - k);
    // The member's value: a bare key is true; "=" then an item.
    std::string_view item = "?1";
    if (i < v.size() && v[i] == '=') {
      const std::size_t s = ++i;
      if (i < v.size() && v[i] == '"') {
        for (++i; i < v.size() && v[i] != '"'; ++i) {
          if (v[i] == '\\') ++i;
        }
        if (i >= v.size()) return false;
        ++i;
      } else {
        while (i < v.size() && v[i] != ';' && v[i] != ',' && v[i] != ' ' && v[i] != '\t') ++i;
      }
      item = v.substr(s, i - s);
      if (item.empty()) return false;
    }
    // Parameters: skipped, up to the next member.
    while (i < v.size() && v[i] == ';') {
      ++i;
      while (i < v.size() && v[i] != ';' && v[i] != ',') ++i;
    }
    if (key == "u") {
      if (item.size() != 1 || item[0] < '0' || item[0] > '7') return false;
      urgency = static_cast<std::uint32_t>(item[0] - '0');
    } else if (key == "i") {
      if (item != "?1" && item != "?0") return false;
      inc = item == "?1" ? 1 : 0;
    }
    ows();
    if (i == v.size()) break;
    if (v[i] != ',') return false;
    ++i;
    ows();
    if (i == v.size()) return false;  // a trailing comma
  }
  pri.urgency = urgency;
  pri.inc = inc;
  return true;
}

}  // namespace vigil::http::h2
