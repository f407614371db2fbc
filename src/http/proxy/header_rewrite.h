#pragma once
// The parts of the proxy's header rewriting that read a field value and
// nothing else (proxy_redirect, proxy_cookie_*): kept free of the request so
// the fuzz target (tests/fuzz/header_rewrite_fuzz.cc) drives them directly.

#include <cstddef>
#include <string_view>

namespace vigil::http::proxy {

// Where the URL of a Refresh value starts: after its first "url=" (any
// case), as nginx looks for it; npos when it has none.
std::size_t refresh_url_offset(std::string_view value);

// One attribute of a Set-Cookie value, after the cookie's own "name=value":
// its name and value, trimmed of spaces and tabs, and the bounds of the
// value inside the whole field value (for replacing it in place).
struct CookieAttribute {
  std::string_view name;
  std::string_view value;       // empty for a flag ("Secure")
  std::size_t value_begin = 0;  // offset of `value` in the field value
  std::size_t end = 0;          // offset of the ';' after it, or the value's size
};
// The attribute starting after offset `at` (a ';'), or false at the end.
bool next_cookie_attribute(std::string_view cookie, std::size_t at, CookieAttribute& out);

}  // namespace vigil::http::proxy
