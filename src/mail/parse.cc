#include "mail/parse.h"

#include <cstring>

namespace vigil::mail {

namespace {

constexpr std::size_t kMaxName = 16;  // the longest verb: "AUTHENTICATE" (12), "STARTTLS" (8)

bool is_alpha(char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');
}
bool is_ctl(unsigned char ch) {
  return ch < 0x20 || ch == 0x7f;
}

char lower(char ch) {
  return ch >= 'A' && ch <= 'Z' ? static_cast<char>(ch - 'A' + 'a') : ch;
}

// The verb at the start of a POP3 or SMTP line: letters only.
ParseStatus parse_verb(const char* line, std::size_t len, std::size_t& i, Command& cmd) {
  while (i < len && is_alpha(line[i])) ++i;
  if (i == 0 || i > kMaxName) return ParseStatus::kInvalid;
  cmd.name = std::string_view(line, i);
  return ParseStatus::kOk;
}

// Arguments separated by one or more spaces, printable bytes otherwise.
ParseStatus parse_words(const char* line, std::size_t len, std::size_t i, Command& cmd) {
  while (i < len) {
    if (line[i] != ' ') return ParseStatus::kInvalid;  // the verb is followed by SP or the end
    while (i < len && line[i] == ' ') ++i;
    if (i == len) break;  // trailing spaces: accepted, as nginx does
    std::size_t start = i;
    while (i < len && line[i] != ' ') {
      if (is_ctl(static_cast<unsigned char>(line[i]))) return ParseStatus::kInvalid;
      ++i;
    }
    if (cmd.nargs == kMaxArgs) return ParseStatus::kTooManyArgs;
    cmd.args[cmd.nargs++] = std::string_view(line + start, i - start);
  }
  return ParseStatus::kOk;
}

ParseStatus parse_simple(char* line, std::size_t len, Command& cmd) {
  cmd = Command{};
  std::size_t i = 0;
  if (ParseStatus st = parse_verb(line, len, i, cmd); st != ParseStatus::kOk) return st;
  return parse_words(line, len, i, cmd);
}

// IMAP's atom characters (RFC 3501 ATOM-CHAR), plus ']' for ASTRING-CHAR.
bool is_astring_char(char ch) {
  auto u = static_cast<unsigned char>(ch);
  if (is_ctl(u) || u >= 0x80) return false;
  switch (ch) {
    case '(':
    case ')':
    case '{':
    case ' ':
    case '%':
    case '*':
    case '"':
    case '\\':
      return false;
    default:
      return true;
  }
}

int b64_value(char ch) {
  if (ch >= 'A' && ch <= 'Z') return ch - 'A';
  if (ch >= 'a' && ch <= 'z') return ch - 'a' + 26;
  if (ch >= '0' && ch <= '9') return ch - '0' + 52;
  if (ch == '+') return 62;
  if (ch == '/') return 63;
  return -1;
}

}  // namespace

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

bool imap_literal_at_end(const char* line, std::size_t len, std::size_t& size, bool& sync) {
  if (len < 3 || line[len - 1] != '}') return false;
  std::size_t j = len - 1;
  sync = true;
  if (line[j - 1] == '+') {
    sync = false;
    --j;
  }
  std::size_t end = j;
  while (j > 0 && line[j - 1] >= '0' && line[j - 1] <= '9') --j;
  const std::size_t digits = end - j;
  if (digits == 0 || digits > 10 || j == 0 || line[j - 1] != '{') return false;
  size = 0;
  for (std::size_t k = j; k < end; ++k) size = size * 10 + static_cast<std::size_t>(line[k] - '0');
  return true;
}

long find_line(const char* data, std::size_t len) {
  for (std::size_t i = 0; i < len; ++i) {
    char ch = data[i];
    if (ch == '\n') return static_cast<long>(i + 1);
    if (ch == '\0') return -1;
    if (ch == '\r') {
      if (i + 1 == len) return 0;  // the LF may come with the next read
      if (data[i + 1] != '\n') return -1;
    }
  }
  return 0;
}

ParseStatus parse_pop3(char* line, std::size_t len, Command& cmd) {
  return parse_simple(line, len, cmd);
}

ParseStatus parse_smtp(char* line, std::size_t len, Command& cmd) {
  return parse_simple(line, len, cmd);
}

ParseStatus parse_imap(char* line, std::size_t len, Command& cmd) {
  cmd = Command{};
  std::size_t i = 0;
  while (i < len && is_astring_char(line[i]) && line[i] != '+') ++i;
  if (i == 0 || i == len || line[i] != ' ') return ParseStatus::kInvalid;
  cmd.tag = std::string_view(line, i);
  std::size_t start = ++i;
  while (i < len && is_alpha(line[i])) ++i;
  if (i == start || i - start > kMaxName) return ParseStatus::kInvalid;
  cmd.name = std::string_view(line + start, i - start);
  while (i < len) {
    if (line[i] != ' ') return ParseStatus::kInvalid;
    ++i;  // exactly one SP between arguments (RFC 3501)
    if (i == len) return ParseStatus::kInvalid;
    if (cmd.nargs == kMaxArgs) return ParseStatus::kTooManyArgs;
    if (line[i] == '"') {
      // quoted = DQUOTE *(TEXT-CHAR except quoted-specials / "\" quoted-specials) DQUOTE
      char* out = line + i + 1;
      char* const begin = out;
      ++i;
      bool closed = false;
      while (i < len) {
        char ch = line[i++];
        if (ch == '"') {
          closed = true;
          break;
        }
        if (ch == '\\') {
          if (i == len || (line[i] != '"' && line[i] != '\\')) return ParseStatus::kInvalid;
          ch = line[i++];
        } else if (is_ctl(static_cast<unsigned char>(ch))) {
          return ParseStatus::kInvalid;
        }
        *out++ = ch;
      }
      if (!closed) return ParseStatus::kInvalid;
      cmd.args[cmd.nargs++] = std::string_view(begin, static_cast<std::size_t>(out - begin));
      continue;
    }
    if (line[i] == '{') {
      // literal = "{" number ["+"] "}" CRLF *CHAR8 (RFC 3501 §4.3; "+": RFC 7888)
      std::size_t j = i + 1, digits = 0, n = 0;
      while (j < len && line[j] >= '0' && line[j] <= '9' && digits < 10) {
        n = n * 10 + static_cast<std::size_t>(line[j] - '0');
        ++j, ++digits;
      }
      if (j < len && line[j] == '+') ++j;
      if (digits == 0 || j >= len || line[j] != '}') return ParseStatus::kInvalid;
      ++j;
      if (j == len) {  // announced, its bytes not here
        cmd.literal = true;
        return ParseStatus::kOk;
      }
      if (line[j] == '\r') ++j;
      if (j >= len || line[j] != '\n') return ParseStatus::kInvalid;
      ++j;
      if (n > len - j) return ParseStatus::kInvalid;
      if (std::memchr(line + j, '\0', n) != nullptr) return ParseStatus::kInvalid;  // CHAR8
      cmd.args[cmd.nargs++] = std::string_view(line + j, n);
      i = j + n;
      continue;
    }
    start = i;
    while (i < len && is_astring_char(line[i])) ++i;
    if (i == start) return ParseStatus::kInvalid;
    cmd.args[cmd.nargs++] = std::string_view(line + start, i - start);
  }
  return ParseStatus::kOk;
}

bool decode_base64_line(char* data, std::size_t& len) {
  if (len == 1 && data[0] == '=') {  // RFC 4954: "=" is an empty response
    len = 0;
    return true;
  }
  if (len % 4 != 0) return false;
  std::size_t out = 0;
  for (std::size_t i = 0; i < len; i += 4) {
    int v[4];
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      char ch = data[i + static_cast<std::size_t>(k)];
      if (ch == '=' && i + 4 == len && k >= 2) {
        v[k] = 0;
        ++pad;
        continue;
      }
      if (pad > 0) return false;  // data after padding
      v[k] = b64_value(ch);
      if (v[k] < 0) return false;
    }
    unsigned n = (static_cast<unsigned>(v[0]) << 18) | (static_cast<unsigned>(v[1]) << 12) |
                 (static_cast<unsigned>(v[2]) << 6) | static_cast<unsigned>(v[3]);
    data[out++] = static_cast<char>((n >> 16) & 0xff);
    if (pad < 2) data[out++] = static_cast<char>((n >> 8) & 0xff);
    if (pad < 1) data[out++] = static_cast<char>(n & 0xff);
  }
  len = out;
  return true;
}

}  // namespace vigil::mail

namespace vigil::mail {
std::size_t encode_base64(const char* data, std::size_t len, char* out) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::size_t o = 0;
  for (std::size_t i = 0; i < len; i += 3) {
    unsigned n = static_cast<unsigned char>(data[i]) << 16;
    if (i + 1 < len) n |= static_cast<unsigned char>(data[i + 1]) << 8;
    if (i + 2 < len) n |= static_cast<unsigned char>(data[i + 2]);
    out[o++] = kAlphabet[(n >> 18) & 63];
    out[o++] = kAlphabet[(n >> 12) & 63];
    out[o++] = i + 1 < len ? kAlphabet[(n >> 6) & 63] : '=';
    out[o++] = i + 2 < len ? kAlphabet[n & 63] : '=';
  }
  return o;
}
}  // namespace vigil::mail
