#pragma once
// nginx's variable syntax in configuration values, for every layer that has
// variables (http/core/variables.cc, stream/variables.cc): the "$name" of a
// directive that declares one (`set`, `map`), and the "$name", "${name}"
// and "$1".."$9" of a value with variables. What a name means is the
// layer's; the syntax and its error messages are one.

#include <string>
#include <string_view>

#include "vigil/core/result.h"

namespace vigil {

inline bool is_var_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

inline char var_lower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

// "$name" as a declaring directive writes it: the name in lower case.
inline Result<std::string> var_word_name(std::string_view word) {
  if (word.size() < 2 || word[0] != '$') {
    return Status::error("invalid variable name \"" + std::string(word) + "\"");
  }
  std::string name;
  for (char ch : word.substr(1)) {
    if (!is_var_name_char(ch)) {
      return Status::error("invalid variable name \"" + std::string(word) + "\"");
    }
    name += var_lower(ch);
  }
  return name;
}

// Splits `text` into its parts, in order: on_text(literal) for the text
// between variables, on_capture(n) for "$1".."$9", and on_name(name, lower)
// for "$name" or "${name}" (the name as written, and in lower case), which
// returns a Status (an unknown name). The first error stops it.
template <class OnText, class OnCapture, class OnName>
Status scan_var_template(std::string_view text, OnText&& on_text, OnCapture&& on_capture,
                         OnName&& on_name) {
  std::size_t i = 0;
  while (i < text.size()) {
    if (text[i] != '$') {
      std::size_t j = text.find('$', i);
      if (j == std::string_view::npos) j = text.size();
      on_text(text.substr(i, j - i));
      i = j;
      continue;
    }
    ++i;  // '$'
    if (i < text.size() && text[i] >= '1' && text[i] <= '9') {
      on_capture(text[i] - '0');
      ++i;
      continue;
    }
    const bool braced = i < text.size() && text[i] == '{';
    if (braced) ++i;
    std::size_t j = i;
    while (j < text.size() && is_var_name_char(text[j])) ++j;
    const std::string_view name = text.substr(i, j - i);
    if (name.empty())
      return Status::error("invalid variable name in \"" + std::string(text) + "\"");
    if (braced) {
      if (j >= text.size() || text[j] != '}') {
        return Status::error("the closing bracket in \"" + std::string(name) +
                             "\" variable is missing");
      }
      ++j;
    }
    i = j;
    std::string lname;
    lname.reserve(name.size());
    for (char ch : name) lname += var_lower(ch);
    if (Status s = on_name(name, lname); !s) return s;
  }
  return Status::ok();
}

}  // namespace vigil
