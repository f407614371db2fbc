// The field-value readers of the proxy's header rewriting (header_rewrite.h).
#include "http/proxy/header_rewrite.h"

namespace vigil::http::proxy {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t'; }

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace

std::size_t refresh_url_offset(std::string_view value) {
  constexpr std::string_view kUrl = "url=";
  for (std::size_t i = 0; i + kUrl.size() <= value.size(); ++i) {
    std::size_t k = 0;
    while (k < kUrl.size() && lower(value[i + k]) == kUrl[k]) ++k;
    if (k == kUrl.size()) return i + kUrl.size();
  }
  return std::string_view::npos;
}

bool next_cookie_attribute(std::string_view cookie, std::size_t at, CookieAttribute& out) {
  if (at >= cookie.size()) return false;
  const std::size_t begin = at + 1;
  std::size_t end = cookie.find(';', begin);
  if (end == std::string_view::npos) end = cookie.size();
  const std::string_view attr = cookie.substr(begin, end - begin);
  const std::size_t eq = attr.find('=');
  out.name = trim(attr.substr(0, eq));
  if (eq == std::string_view::npos) {
    out.value = {};
    out.value_begin = end;
  } else {
    out.value = trim(attr.substr(eq + 1));
    out.value_begin = out.value.empty() ? end
                                        : static_cast<std::size_t>(out.value.data() - cookie.data());
  }
  out.end = end;
  return true;
}

}  // namespace vigil::http::proxy
