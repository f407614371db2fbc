// Feeds arbitrary field values to the readers the proxy's header rewriting
// uses (http/proxy/header_rewrite.h): where a Refresh value's URL starts
// (after its first "url=", any case) and the attributes of a Set-Cookie
// value. Whatever the input, offsets stay inside the value, the URL offset
// follows a real "url=" with none before it, and the attributes walk the
// value forward, each ending at a ';' or the end, its value inside it.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_check.h"
#include "http/proxy/header_rewrite.h"

using vigil::fuzz::check;

namespace {

bool is_url_at(std::string_view v, std::size_t i) {
  constexpr std::string_view kUrl = "url=";
  if (i + kUrl.size() > v.size()) return false;
  for (std::size_t k = 0; k < kUrl.size(); ++k) {
    char c = v[i + k];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != kUrl[k]) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace vigil::http::proxy;
  const std::string_view v(reinterpret_cast<const char*>(data), size);

  const std::size_t url = refresh_url_offset(v);
  if (url == std::string_view::npos) {
    for (std::size_t i = 0; i < v.size(); ++i) check(!is_url_at(v, i), "a url= was missed");
  } else {
    check(url >= 4 && url <= v.size(), "the URL starts inside the value");
    check(is_url_at(v, url - 4), "the URL follows url=");
    for (std::size_t i = 0; i + 4 < url; ++i) check(!is_url_at(v, i), "an earlier url= was skipped");
  }

  std::size_t at = v.find(';');
  std::size_t count = 0;
  CookieAttribute attr;
  while (at != std::string_view::npos && next_cookie_attribute(v, at, attr)) {
    check(attr.end > at && attr.end <= v.size(), "the walk moves forward, inside the value");
    check(attr.end == v.size() || v[attr.end] == ';', "an attribute ends at ';' or the end");
    check(v.substr(at + 1, attr.end - at - 1).find(';') == std::string_view::npos,
          "no ';' inside an attribute");
    check(attr.value_begin <= attr.end, "the value starts inside its attribute");
    if (!attr.value.empty()) {
      check(attr.value.data() == v.data() + attr.value_begin, "value_begin is where the value is");
      check(attr.value_begin + attr.value.size() <= attr.end, "the value ends inside its attribute");
    }
    check(attr.name.size() <= attr.end - at, "the name is inside its attribute");
    at = attr.end;
    check(++count <= v.size(), "the walk ends");
  }
  return 0;
}
