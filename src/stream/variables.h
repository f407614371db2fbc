#pragma once
// The stream variables (nginx's ngx_stream_variables and
// ngx_stream_upstream's, the TLS ones of ngx_stream_ssl_module) and complex
// values made of them: "$server_addr:$server_port" is compiled once, at
// load time, into literal and variable parts; a session evaluates it in two
// passes (the length, then the bytes into memory the caller chose: a log
// buffer, the connection's arena), so nothing is parsed per session.
//
//   auto t = stream::VarTemplate::compile("$remote_addr $bytes_sent");
//   std::size_t n = t->length(session);   // upper bound of what write() writes
//   char* end = t->write(session, buf);    // buf holds n bytes
//
// Syntax: "$name" or "${name}", the name of [A-Za-z0-9_]; "$1".."$9" (one
// digit). What the stream block declares (map, geo, split_clients, set) is
// a variable too, anywhere in the block: a name no directive declares by the
// block's end is an error naming where it was first used. The variables are
// listed in docs/directives.md.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/access_log.h"
#include "core/regex.h"
#include "core/var_sink.h"
#include "vigil/core/result.h"

namespace vigil::stream {

struct Session;
struct DeclaredVariable;

// A variable's value for a session, written to `out`; false when it has none
// (nginx's "not found": "-" in the access log, nothing elsewhere). The length
// and the write pass must see the same value.
using VarGetter = bool (*)(const Session& s, VarSink& out);

class VarTemplate {
 public:
  VarTemplate() = default;

  // Compiles `text`; the error names the bad variable ('unknown "foo" variable').
  // "$1".."$9" are the groups of the expression a `map` entry matched
  // (empty elsewhere); `groups` names the named groups of that expression,
  // which are variables in its value.
  static Result<VarTemplate> compile(std::string_view text,
                                     const std::vector<Regex::Name>* groups = nullptr);

  // Upper bound of the bytes write() produces. `missing_dash`: a variable
  // without a value is written as "-" (the access log).
  std::size_t length(const Session& s, LogEscape esc = LogEscape::kNone,
                     bool missing_dash = false) const;
  char* write(const Session& s, char* out, LogEscape esc = LogEscape::kNone,
              bool missing_dash = false) const;
  // The value in the session's connection arena (the text itself when there
  // are no variables). False without memory.
  bool evaluate(const Session& s, std::string_view& out) const;

  bool empty() const { return parts_.empty(); }
  // No variables: the text is fixed (literal_text() is all of it).
  bool is_literal() const { return variables_ == 0; }
  std::string_view literal_text() const { return literal_; }
  const std::string& source() const { return source_; }

 private:
  struct Part {
    VarGetter get = nullptr;                           // null: a literal or a declared one
    std::shared_ptr<const DeclaredVariable> declared;  // map, geo, split_clients, set
    std::string text;                                  // the literal
    int capture = -1;                                  // a group of the matched expression
  };
  bool is_text(const Part& p) const {
    return p.get == nullptr && p.declared == nullptr && p.capture < 0;
  }
  static bool value_of(const Part& p, const Session& s, VarSink& out);
  std::vector<Part> parts_;
  std::string literal_;  // the whole text when there are no variables
  std::string source_;
  std::size_t variables_ = 0;
};

// The "$name" word of `map`, `geo`, `split_clients` and `set`: the name,
// lower case; an error ('invalid variable name "x"', 'the duplicate
// "remote_addr" variable') when it is no name or names a built-in variable.
Result<std::string> declared_variable_word(std::string_view word);

// A variable whose value a session computes when it reads it (map, geo,
// split_clients); `set` gives a session's own value instead.
class ComputedVariable {
 public:
  virtual ~ComputedVariable() = default;
  // The value for `s`, in both passes the same; false: none.
  virtual bool value(const Session& s, VarSink& out) const = 0;
};

// A name the stream block declares, with its slot among a session's values
// (Session::values). Templates hold it, so a reload's new declarations never
// change what the running configuration's templates read.
struct DeclaredVariable {
  std::string name;
  std::uint32_t index = 0;
  std::shared_ptr<const ComputedVariable> computed;  // null: only `set` gives it a value
  bool declared = false;                             // false: used, not (yet) declared
  std::string first_use;  // " in F:L" of the first directive that used it
};

// Declares `name` (from declared_variable_word) for the stream block being
// read; `computed` replaces an earlier computation (the last one wins, as
// nginx's). Its slot index.
std::uint32_t declare_variable(const std::string& name,
                               std::shared_ptr<const ComputedVariable> computed = nullptr);
// The stream block being read starts with no declared names (those of an
// earlier load, or of one that failed, are not its variables); open while
// it is read, so a use may come before the declaration.
void open_declarations();
// The block is read: an error for a name used but never declared, and the
// number of slots a session's values need. Later compiles see only what is
// declared.
Result<std::uint32_t> close_declarations();
// The " in F:L" of the directive being read, for the first use of a name
// not yet declared (stream_conf.cc sets it before each directive).
void set_directive_where(std::string where);

// A session's value given by `set`; false when it has none.
bool session_value(const Session& s, std::uint32_t index, std::string_view& out);
// Gives the session the value (in its arena, or static). False without memory.
bool set_session_value(Session& s, std::uint32_t index, std::string_view value);

}  // namespace vigil::stream
