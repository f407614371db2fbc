#pragma once
// Regular expressions (nginx's ngx_regex): PCRE2, compiled once when the
// configuration is loaded and JIT-compiled where the library can, then only
// matched. Matching allocates nothing: each thread keeps one match-data
// block, made on its first match, large enough for any expression.
//
//   auto re = Regex::compile("^/img/(?<name>.+)\\.png$", /*caseless=*/false);
//   if (!re) return Status::error(re.status().message());  // names the pattern
//   int caps[2 * 10];
//   int n = re->match(uri, caps, 10);  // 0: no match; n > 0: pairs filled
//   // caps[2*i], caps[2*i+1]: the offsets of group i in uri (-1: unset)

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "vigil/core/result.h"

namespace vigil {

class Regex {
 public:
  struct Name {
    std::string name;
    int group = 0;
  };

  Regex() = default;

  // The error is nginx's form: 'pcre2_compile() failed: <why> in "<re>" at "<rest>"'.
  static Result<Regex> compile(std::string_view pattern, bool caseless);

  // Matches `subject`. Fills up to `pairs` offset pairs (group 0 is the whole
  // match; an unset group has -1, -1) and returns how many it filled (> 0),
  // 0 when the expression does not match, or -1 on a matching error (a
  // resource limit; logged by the caller as nginx does).
  int match(std::string_view subject, int* captures, int pairs) const;
  // Whether it matches, without captures.
  bool matches(std::string_view subject) const { return match(subject, nullptr, 0) > 0; }

  // The text every subject an expression can match starts with, when the
  // expression is "^" and literal characters (the ones before the first
  // metacharacter, a quantified one excluded); empty when it has none, or an
  // alternative outside parentheses, a \Q quote or a "#" (a comment). match()
  // answers "no match" from it, and from PCRE2's minimum subject length,
  // without calling PCRE2: a location search tries most expressions on
  // URIs they cannot match.
  static std::string literal_prefix(std::string_view pattern);

  bool valid() const { return code_ != nullptr; }
  const std::string& pattern() const { return pattern_; }
  bool caseless() const { return caseless_; }
  int groups() const { return groups_; }             // capture groups, not counting group 0
  const std::vector<Name>& names() const { return names_; }  // named groups, in order

 private:
  struct Code;
  std::shared_ptr<const Code> code_;  // shared: a conf copies expressions by value
  std::string pattern_;
  std::string prefix_;            // literal_prefix(pattern_), lower-case when caseless
  std::size_t min_length_ = 0;    // PCRE2_INFO_MINLENGTH: shorter subjects cannot match
  std::vector<Name> names_;
  int groups_ = 0;
  bool caseless_ = false;
};

}  // namespace vigil
