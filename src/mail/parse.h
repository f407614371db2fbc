#pragma once
// The mail command parsers (nginx's ngx_mail_parse.c), pure functions over
// one line: no I/O, no allocation. The caller frames lines (find_line) in its
// bounded buffer (imap_client_buffer, smtp_client_buffer) and parses each
// complete one; the views returned point into the line, which the IMAP
// parser may shorten in place (quoted strings lose their escapes).

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace vigil::mail {

enum class ParseStatus : std::uint8_t {
  kOk,
  kInvalid,      // not a command of the protocol's grammar: an error answer
  kTooManyArgs,  // more than kMaxArgs arguments
};

inline constexpr std::size_t kMaxArgs = 8;

struct Command {
  std::string_view tag;   // IMAP only
  std::string_view name;  // as sent (compare case-insensitively)
  std::array<std::string_view, kMaxArgs> args{};
  std::size_t nargs = 0;
  // IMAP: the text ends with a literal announcement "{N}" / "{N+}" whose
  // bytes are not there (the session frames whole commands, so it sees
  // this only for a command it cut short).
  bool literal = false;
};

// The end of the first line in [data, data+len): the index just after its
// LF, 0 when no complete line is there yet, or -1 when the line holds a
// NUL or a CR not followed by LF (refused, as nginx's parsers do).
long find_line(const char* data, std::size_t len);

// `line` is one line without its CRLF (or LF) -- for IMAP one command, which
// may hold literals: "{N}" CRLF and N bytes, as an argument (RFC 3501 §4.3).
// The line's bytes may be rewritten (IMAP quoted strings are unescaped in
// place).
ParseStatus parse_pop3(char* line, std::size_t len, Command& cmd);
ParseStatus parse_smtp(char* line, std::size_t len, Command& cmd);
ParseStatus parse_imap(char* line, std::size_t len, Command& cmd);

// One base64 line of an AUTH exchange ("=" is the empty answer): the decoded
// bytes are written over the input; false when it is not base64.
bool decode_base64_line(char* data, std::size_t& len);

bool iequals(std::string_view a, std::string_view b);

// IMAP: does the line (without its CRLF) end with a literal announcement
// "{N}" or "{N+}" (RFC 3501 §4.3, RFC 7888's non-synchronizing form)? Then
// `size` is N and `sync` false for "{N+}" (no "+" continuation wanted).
bool imap_literal_at_end(const char* line, std::size_t len, std::size_t& size, bool& sync);

}  // namespace vigil::mail

namespace vigil::mail {
// Standard base64 of [data, data+len) into `out` (4*ceil(len/3) bytes).
std::size_t encode_base64(const char* data, std::size_t len, char* out);
}  // namespace vigil::mail
