// The regular-expression paths of the configuration: the input's first line
// is an expression, the rest a subject. The expression is compiled as
// core/regex and as an HTTP expression (named groups declared), matched with
// captures, and loaded as a location, a rewrite and an if condition of a
// whole configuration. Nothing may crash, a match's offsets must lie in
// the subject, and Regex::match answers as PCRE2's own interpreter does on
// the same expression (its shortcuts, the literal prefix and the minimum
// length, and the JIT never change the answer).

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

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

// PCRE2's interpreter on the expression: 1 match, 0 none, -1 an error
// (a compile error, a resource limit).
int interpreted(std::string_view pattern, std::string_view subject, bool caseless) {
  int err = 0;
  PCRE2_SIZE at = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   caseless ? PCRE2_CASELESS : 0, &err, &at, nullptr);
  if (code == nullptr) return -1;
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(code, nullptr);
  int rc = -1;
  if (md != nullptr) {
    rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(subject.data()), subject.size(), 0, 0, md,
                     nullptr);
    rc = rc > 0 ? 1 : (rc == PCRE2_ERROR_NOMATCH ? 0 : -1);
  }
  pcre2_match_data_free(md);
  pcre2_code_free(code);
  return rc;
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
    const int truth = interpreted(pattern, subject, caseless);
    if (truth >= 0 && n >= 0) check((n > 0) == (truth > 0), "the interpreter's answer");
    if (truth > 0) {
      const std::string prefix = vigil::Regex::literal_prefix(pattern);
      check(subject.size() >= prefix.size(), "a match is as long as the literal prefix");
      for (std::size_t i = 0; i < prefix.size(); ++i) {
        const auto low = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; };
        check(caseless ? low(subject[i]) == low(prefix[i]) : subject[i] == prefix[i],
              "a match starts with the literal prefix");
      }
    }
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
