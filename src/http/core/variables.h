#pragma once
// Variables in configuration strings (nginx's ngx_http_variables and
// ngx_http_script "complex values"): "$host:$server_port" is compiled once,
// at load time, into a sequence of literal and variable parts; a request
// evaluates it in two passes, as nginx's scripts do: the length first, then
// the bytes into memory the caller chose (a header buffer, a log buffer), so
// nothing is parsed and nothing is allocated per request.
//
//   auto t = VarTemplate::compile("$remote_addr - $http_user_agent");
//   std::size_t n = t->length(r);            // upper bound of what write() writes
//   char* end = t->write(r, buf);             // buf holds n bytes
//
// Syntax: "$name" or "${name}", the name of [A-Za-z0-9_]; "$1".."$9" (one
// digit) are the groups of the last regular expression that matched
// (request_vars.h), and a name `set` declared earlier in the configuration
// is that variable. "$http_NAME" is
// the request header NAME ('_' matches '-', case-insensitively; several
// fields of that name are joined with ", "). The variables are listed in
// docs/directives.md.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "core/var_sink.h"
#include "vigil/core/result.h"

namespace vigil::http {

struct Request;

// Where a variable's value is written (core/var_sink.h, shared with the
// stream variables).
using ::vigil::VarSink;

// A variable's value for a request, written to `out`; false when it has
// none (nginx's "not found": nothing in a header, "-" in the access log).
// The length and the write pass must see the same value. `arg` is the rest
// of the name after a prefix variable's prefix, lower case ($arg_Foo: "foo";
// for $http_, $sent_http_ and $upstream_http_ with '_' turned into '-').
using VarGetter = bool (*)(const Request& r, std::string_view arg, VarSink& out);

// One variable (or family, when `prefix`: "arg_" names every $arg_NAME).
// The core's are in variables.cc; a module lists its own in its HttpModule
// (module.h), where compile() finds them.
struct VarSpec {
  std::string_view name;
  VarGetter get;
  bool prefix = false;
};

// How variable values are escaped when written (log_format escape=).
enum class VarEscape : std::uint8_t {
  kNone,     // as they are (header values: a request's fields are already checked)
  kDefault,  // '"', '\\', bytes < 0x20 and > 0x7e as \xHH (nginx's access log)
  kJson,     // '"' and '\\' escaped, control characters as \uXXXX
  // The rewrite module's replacement (nginx's script engine rules):
  // kUriArgs: $1..$9 percent-encoded as query arguments (space, '#', '%',
  // '&', '+', ';', '?', controls, bytes > 0x7e), other values as they are;
  // kRedirect: other values percent-decoded where the result stays a safe
  // URI character (above '%', below 0x7f; up to a '?'), $1..$9 as they
  // are; kRedirectQuoted: the same, and $1..$9 with space, '#', '%',
  // controls and bytes > 0x7e percent-encoded.
  kUriArgs,
  kRedirect,
  kRedirectQuoted,
};

class VarTemplate {
 public:
  VarTemplate() = default;

  // Compiles `text`; the error names the bad variable ('unknown "foo" variable').
  static Result<VarTemplate> compile(std::string_view text);

  // Upper bound of the bytes write() produces for `r` with `esc`.
  // `missing_dash`: a variable without a value is written as "-" (the access log).
  std::size_t length(const Request& r, VarEscape esc = VarEscape::kNone,
                     bool missing_dash = false) const;
  char* write(const Request& r, char* out, VarEscape esc = VarEscape::kNone,
              bool missing_dash = false) const;

  bool empty() const { return parts_.empty(); }
  // No variables: the text is fixed (literal_text() is all of it).
  bool is_literal() const { return variables_ == 0; }
  std::string_view literal_text() const { return literal_; }
  const std::string& source() const { return source_; }

 private:
  struct Part {
    VarGetter get = nullptr;  // null: a literal, a capture or a declared variable
    std::string text;         // the literal, or the argument of a prefix variable
    int capture = -1;         // $1..$9: the last regex match's group (request_vars.h)
    int declared = -1;        // a variable `set` makes: its index (request_vars.h)
  };
  // A variable part's value for r (false: none).
  static bool value_of(const Part& p, const Request& r, VarSink& out);
  std::vector<Part> parts_;
  std::string literal_;  // concatenated literals when there are no variables
  std::string source_;
  std::size_t variables_ = 0;
};

// The "$name" word of a directive that declares a variable (set, map,
// split_clients): the name, lower case; an error ('invalid variable name
// "x"', 'the duplicate "uri" variable') when it is no name or names a
// variable Vigil provides.
Result<std::string> declared_variable_word(std::string_view word);

// The value of $http_NAME-style lookups: the request's fields named `name`
// (case-insensitive) joined with ", " ("; " for cookie), written to `out` (nullptr: only the
// length). Returns the length; `found` false when there is no such field.
std::size_t request_header_value(const Request& r, std::string_view name, char* out, bool& found);

}  // namespace vigil::http
