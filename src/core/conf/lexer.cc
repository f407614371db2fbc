#include "core/conf/lexer.h"

namespace vigil {

std::string ConfOrigin::where(std::uint32_t line) const {
  if (command_line) return " in command line";
  return " in " + name + ":" + std::to_string(line);
}

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

// Copies raw word text, resolving the escapes nginx resolves and keeping every
// other backslash as written.
std::string unescape(std::string_view raw) {
  std::string out;
  out.reserve(raw.size());
  for (std::size_t i = 0; i < raw.size(); ++i) {
    char c = raw[i];
    if (c == '\\' && i + 1 < raw.size()) {
      char n = raw[i + 1];
      switch (n) {
        case '"':
        case '\'':
        case '\\':
          out += n;
          ++i;
          continue;
        case 'n':
          out += '\n';
          ++i;
          continue;
        case 't':
          out += '\t';
          ++i;
          continue;
        case 'r':
          out += '\r';
          ++i;
          continue;
        default:
          break;
      }
    }
    out += c;
  }
  return out;
}

}  // namespace

Status ConfLexer::next(ConfStatement* out) {
  out->words.clear();
  out->end = ConfTerminator::kEnd;

  bool last_space = true;   // between words: the next non-space starts one
  bool need_space = false;  // a quoted word just closed
  bool comment = false;
  bool escaped = false;   // the previous character was a backslash
  bool variable = false;  // the previous character was '$'
  char quote = 0;         // the open quote character, or 0
  std::size_t start = pos_;
  std::uint32_t start_line = line_;

  for (;;) {
    if (pos_ >= text_.size()) {
      if (!out->words.empty() || !last_space) {
        if (quote != 0) {
          return error(std::string("unterminated ") + (quote == '"' ? "double" : "single") +
                           " quoted string",
                       start_line);
        }
        if (origin_->command_line) {
          return error("unexpected end of parameter, expecting \";\"", line_);
        }
        return error("unexpected end of file, expecting \";\" or \"}\"", line_);
      }
      out->line = line_;
      return Status::ok();
    }

    char ch = text_[pos_++];
    if (ch == '\n') {
      ++line_;
      comment = false;
    }
    if (comment) continue;
    if (escaped) {
      escaped = false;
      continue;
    }

    if (need_space) {
      if (is_space(ch)) {
        last_space = true;
        need_space = false;
        continue;
      }
      out->line = line_;
      if (ch == ';') {
        out->end = ConfTerminator::kSemicolon;
        return Status::ok();
      }
      if (ch == '{') {
        out->end = ConfTerminator::kBlockStart;
        return Status::ok();
      }
      if (ch != ')') {  // nginx lets ')' follow a quote, for "if (...)" conditions
        return error(std::string("unexpected \"") + ch + "\"", line_);
      }
      last_space = true;
      need_space = false;
    }

    if (last_space) {
      start = pos_ - 1;
      start_line = line_;
      if (is_space(ch)) continue;
      switch (ch) {
        case ';':
        case '{':
          out->line = line_;
          if (out->words.empty()) return error(std::string("unexpected \"") + ch + "\"", line_);
          out->end = ch == ';' ? ConfTerminator::kSemicolon : ConfTerminator::kBlockStart;
          return Status::ok();
        case '}':
          out->line = line_;
          if (!out->words.empty()) return error("unexpected \"}\"", line_);
          out->end = ConfTerminator::kBlockEnd;
          return Status::ok();
        case '#':
          comment = true;
          continue;
        case '\\':
          escaped = true;
          last_space = false;
          continue;
        case '"':
        case '\'':
          ++start;
          quote = ch;
          last_space = false;
          continue;
        case '$':
          variable = true;
          last_space = false;
          continue;
        default:
          last_space = false;
          continue;
      }
    }

    // Inside a word.
    if (ch == '{' && variable) continue;  // "${name}"
    variable = false;
    if (ch == '\\') {
      escaped = true;
      continue;
    }
    if (ch == '$') {
      variable = true;
      continue;
    }
    bool found = false;
    if (quote != 0) {
      if (ch == quote) {
        quote = 0;
        need_space = true;
        found = true;
      }
    } else if (is_space(ch) || ch == ';' || ch == '{') {
      last_space = true;
      found = true;
    }
    if (!found) continue;

    out->words.push_back({unescape(text_.substr(start, pos_ - 1 - start)), start_line});
    if (ch == ';' || ch == '{') {
      out->line = line_;
      out->end = ch == ';' ? ConfTerminator::kSemicolon : ConfTerminator::kBlockStart;
      return Status::ok();
    }
  }
}

}  // namespace vigil
