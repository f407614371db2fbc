#include "codec/tokens.h"

#include "codec/chars.h"

namespace vigil::http {
namespace {

struct MethodName {
  std::string_view name;
  Method method;
};

constexpr MethodName kMethods[] = {
    {"GET", Method::kGet},     {"HEAD", Method::kHead},       {"POST", Method::kPost},
    {"PUT", Method::kPut},     {"DELETE", Method::kDelete},   {"OPTIONS", Method::kOptions},
    {"TRACE", Method::kTrace}, {"CONNECT", Method::kConnect}, {"PATCH", Method::kPatch},
};

struct HeaderName {
  std::string_view name;
  HeaderId id;
};

constexpr HeaderName kHeaders[] = {
    {"Host", HeaderId::kHost},
    {"Connection", HeaderId::kConnection},
    {"Content-Length", HeaderId::kContentLength},
    {"Content-Type", HeaderId::kContentType},
    {"Transfer-Encoding", HeaderId::kTransferEncoding},
    {"TE", HeaderId::kTe},
    {"Expect", HeaderId::kExpect},
    {"Upgrade", HeaderId::kUpgrade},
    {"Keep-Alive", HeaderId::kKeepAlive},
    {"Range", HeaderId::kRange},
    {"If-Range", HeaderId::kIfRange},
    {"If-Modified-Since", HeaderId::kIfModifiedSince},
    {"If-Unmodified-Since", HeaderId::kIfUnmodifiedSince},
    {"If-Match", HeaderId::kIfMatch},
    {"If-None-Match", HeaderId::kIfNoneMatch},
    {"User-Agent", HeaderId::kUserAgent},
    {"Referer", HeaderId::kReferer},
    {"Cookie", HeaderId::kCookie},
    {"Authorization", HeaderId::kAuthorization},
    {"Accept-Encoding", HeaderId::kAcceptEncoding},
};

}  // namespace

std::string_view method_name(Method m) {
  for (const auto& e : kMethods) {
    if (e.method == m) return e.name;
  }
  return {};
}

Method method_from_token(std::string_view token) {
  for (const auto& e : kMethods) {
    if (e.name == token) return e.method;
  }
  return Method::kOther;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (chars::to_lower(a[i]) != chars::to_lower(b[i])) return false;
  }
  return true;
}

HeaderId header_id(std::string_view name) {
  for (const auto& e : kHeaders) {
    if (iequals(e.name, name)) return e.id;
  }
  return HeaderId::kOther;
}

bool ListReader::next(std::string_view& element) {
  while (!rest_.empty()) {
    std::size_t i = 0;
    bool quoted = false;
    for (; i < rest_.size(); ++i) {
      const char c = rest_[i];
      if (quoted) {
        if (c == '\\') {
          ++i;  // quoted-pair: the next octet is taken literally
        } else if (c == '"') {
          quoted = false;
        }
      } else if (c == '"') {
        quoted = true;
      } else if (c == ',') {
        break;
      }
    }
    std::string_view e = rest_.substr(0, i < rest_.size() ? i : rest_.size());
    rest_ = i < rest_.size() ? rest_.substr(i + 1) : std::string_view();
    while (!e.empty() && chars::is_ows(e.front())) e.remove_prefix(1);
    while (!e.empty() && chars::is_ows(e.back())) e.remove_suffix(1);
    if (!e.empty()) {
      element = e;
      return true;
    }
  }
  return false;
}

bool list_has_token(std::string_view list, std::string_view token) {
  ListReader r(list);
  std::string_view e;
  while (r.next(e)) {
    if (iequals(e, token)) return true;
  }
  return false;
}

}  // namespace vigil::http
