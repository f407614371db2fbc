#pragma once
// Splits configuration text into statements, with the rules of nginx's
// ngx_conf_read_token:
//   - words are separated by space, tab, CR, LF; a word also ends at ';' or '{';
//   - "..." and '...' quote a word (it may span lines) and must be followed by
//     whitespace, ';' or '{';
//   - a backslash escapes the next character everywhere; when the word is
//     stored, \" \' \\ become the character and \n \t \r become control
//     characters; any other backslash stays as written;
//   - '#' at the start of a word comments out the rest of the line;
//   - "$var" and "${var}" are ordinary text (a '{' right after '$' does not
//     open a block);
//   - '}' ends a block only where a word could start; inside a word it is text.
// The lexer never fails on bytes it does not understand: anything that is not
// syntax is word text, so a NUL or invalid UTF-8 just ends up in a word.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "vigil/core/result.h"

namespace vigil {

// Where configuration text came from, for error messages.
struct ConfOrigin {
  std::string name;           // the path as resolved, or a display name
  bool command_line = false;  // -g text: nginx says "in command line", with no line

  // " in conf/vigil.conf:12", or " in command line".
  std::string where(std::uint32_t line) const;
};

struct ConfWord {
  std::string text;  // escapes resolved, quotes removed
  std::uint32_t line = 0;
};

enum class ConfTerminator {
  kSemicolon,   // "name args;"
  kBlockStart,  // "name args {"
  kBlockEnd,    // "}" (no words)
  kEnd,         // end of text (no words)
};

struct ConfStatement {
  std::vector<ConfWord> words;  // words[0] is the directive name
  ConfTerminator end = ConfTerminator::kEnd;
  std::uint32_t line = 0;  // line of the terminator
};

class ConfLexer {
 public:
  // `text` and `origin` must outlive the lexer.
  ConfLexer(std::string_view text, const ConfOrigin* origin) : text_(text), origin_(origin) {}

  // Reads the next statement. Errors carry the full message, location included.
  Status next(ConfStatement* out);

  std::uint32_t line() const { return line_; }
  const ConfOrigin& origin() const { return *origin_; }

 private:
  Status error(std::string message, std::uint32_t line) const {
    return Status::error(std::move(message) + origin_->where(line));
  }

  std::string_view text_;
  const ConfOrigin* origin_;
  std::size_t pos_ = 0;
  std::uint32_t line_ = 1;
};

}  // namespace vigil
