#pragma once
// The names HTTP gives things, matched without allocation: methods (RFC 9110
// §9), field names (§5.1, case-insensitive) and comma-separated lists (§5.6.1).

#include <cstdint>
#include <string_view>

namespace vigil::http {

// Methods we know by name (RFC 9110 §9.3, RFC 5789). Any other token is kOther:
// the parser accepts it and the server decides (501, RFC 9110 §9.1).
enum class Method : std::uint8_t {
  kOther,
  kGet,
  kHead,
  kPost,
  kPut,
  kDelete,
  kOptions,
  kTrace,
  kConnect,
  kPatch,
};

// Known field names, found case-insensitively as each header completes, so the
// server stores the ones it needs without comparing strings again.
enum class HeaderId : std::uint8_t {
  kOther,
  kHost,
  kConnection,
  kContentLength,
  kContentType,
  kTransferEncoding,
  kTe,
  kExpect,
  kUpgrade,
  kKeepAlive,
  kRange,
  kIfRange,
  kIfModifiedSince,
  kIfUnmodifiedSince,
  kIfMatch,
  kIfNoneMatch,
  kUserAgent,
  kReferer,
  kCookie,
  kAuthorization,
  kAcceptEncoding,
};

// Printable name of a method (for logs); "" for kOther.
std::string_view method_name(Method m);

// The method a token names; kOther when it is none of ours (case-sensitive,
// RFC 9110 §9.1).
Method method_from_token(std::string_view token);

// ASCII case-insensitive equality, for field names and tokens (RFC 9110 §5.1).
bool iequals(std::string_view a, std::string_view b);

// The HeaderId for a field name, case-insensitively; kOther when unknown.
HeaderId header_id(std::string_view name);

// Walks the elements of a comma-separated list (RFC 9110 §5.6.1): OWS around
// each element is dropped, empty elements are skipped, and commas inside a
// quoted-string do not split.
class ListReader {
 public:
  explicit ListReader(std::string_view list) : rest_(list) {}
  // The next non-empty element; false at the end.
  bool next(std::string_view& element);

 private:
  std::string_view rest_;
};

// True when the comma-separated list holds `token` (case-insensitively), e.g.
// "close" in a Connection value.
bool list_has_token(std::string_view list, std::string_view token);

}  // namespace vigil::http
