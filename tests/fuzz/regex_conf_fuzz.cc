// The regular-expression paths of the configuration: the input's first line
// is an expression, the rest a subject. The expression is compiled as
// core/regex and as an HTTP expression (named groups declared), matched with
// captures, and loaded as a location, a rewrite and an if condition of a
// whole configuration. Nothing may crash, and a match's offsets must lie in
// the subject.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/conf/loader.h"
#include "core/regex.h"
#include "fuzz_check.h"
#include "http/core/request_vars.h"
#include "server/modules.h"
#include "upstream/group.h"

using vigil::fuzz::check;

namespace {

// The expression as one double-quoted configuration word.
std::string quoted(std::string_view s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    out += ch;
  }
  return out + "\"";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  vigil::upstream::set_numeric_hosts_only(true);
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::size_t nl = text.find('\n');
  const std::string_view pattern = text.substr(0, nl);
  const std::string_view subject = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);

  for (bool caseless : {false, true}) {
    auto re = vigil::Regex::compile(pattern, caseless);
    if (!re) {
      check(re.status().message().rfind("pcre2_compile() failed: ", 0) == 0, "error names pcre2");
      continue;
    }
    int caps[2 * 10];
    const int n = re->match(subject, caps, 10);
    check(n >= -1 && n <= 10, "match count in range");
    for (int i = 0; i < n; ++i) {
      const int a = caps[2 * i];
      const int b = caps[2 * i + 1];
      if (a == -1) {
        check(b == -1, "an unset group is unset on both ends");
        continue;
      }
      check(a >= 0 && a <= b && static_cast<std::size_t>(b) <= subject.size(),
            "group offsets lie in the subject");
    }
    auto hre = vigil::http::compile_http_regex(pattern, caseless);
    check(static_cast<bool>(hre), "compiles as an HTTP expression too");
    check(hre->names.size() == hre->re.names().size(), "every named group declared");
  }

  if (pattern.find('\0') != std::string_view::npos) return 0;
  const std::string q = quoted(pattern);
  const std::string conf =
      "events {}\nhttp {\n server {\n  listen 127.0.0.1:1;\n  set $v " + quoted(subject) +
      ";\n  location ~ " + q + " {\n   rewrite " + q + " /x/$1 last;\n   if ($v ~* " + q +
      ") { return 200 $1; }\n  }\n }\n}\n";
  vigil::ConfLoadOptions options;
  options.modules = &vigil::server_conf_modules();
  options.prefix = "/nonexistent-vigil-fuzz-prefix";
  options.allow_include = false;
  options.embedded_text = conf;
  auto loaded = vigil::Configuration::load(options);
  if (!loaded) check(!loaded.status().message().empty(), "error without message");
  return 0;
}
