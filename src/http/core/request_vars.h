#pragma once
// Values a request computes as its configuration runs (nginx's r->variables
// for the changeable variables, and r->captures): the variables `set` (and
// regular expressions' named groups) give, by the index the configuration
// gave each name, and the groups of the last regular expression that
// matched with captures ($1..$9).
//
// The memory is the request's own: chunks taken from the worker's buffer
// cache when first needed and given back when the request ends
// (release_request_vars, from free_request), so a request that uses none of
// this costs nothing, and one that does allocates nothing from the heap.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "core/regex.h"
#include "vigil/core/result.h"

namespace vigil::http {

struct Request;

// Offset pairs kept for $0..$9 (nginx keeps more, but a configuration can
// name only $1..$9).
inline constexpr int kMaxCaptures = 10;

struct VarValue {
  const char* data = nullptr;
  std::uint32_t len = 0;
  bool set = false;
};

struct RequestVars {
  static constexpr std::uint32_t kMaxChunks = 8;
  char* chunk[kMaxChunks] = {};
  std::uint32_t chunk_size[kMaxChunks] = {};
  std::uint32_t nchunks = 0;
  std::uint32_t used = 0;  // bytes taken from the last chunk

  VarValue* values = nullptr;  // nvalues entries, in the arena
  std::uint32_t nvalues = 0;

  int captures[2 * kMaxCaptures] = {};
  int ncaptures = 0;                   // pairs set by the last match (0: none)
  const char* capture_subject = nullptr;  // a copy of what was matched, in the arena
};

// `n` bytes of the request's memory (aligned for pointers), or null when the
// worker has none to give.
char* request_alloc(Request& r, std::size_t n);
// Gives every chunk back (the request ends).
void release_request_vars(Request& r);

// ---- variables the configuration declares --------------------------------------------

// The index of the variable `name` (lower case) that `set` or a named group
// makes, declaring it if new. Indexes are process-wide and only grow, so a
// configuration loaded later never changes the meaning of an older one's.
std::uint32_t declare_variable(std::string_view name);
// The index of a declared variable, or -1.
int find_declared_variable(std::string_view name);
// The declared name of an index (for messages).
std::string_view declared_variable_name(std::uint32_t index);

// The request's value of a declared variable; not set: `set` false.
VarValue user_variable(const Request& r, std::uint32_t index);
// Makes `value` (already in the request's memory, or static) the variable's
// value. False when the request's memory ran out.
bool set_user_variable(Request& r, std::uint32_t index, std::string_view value);

// A declared variable whose value is computed when a request first reads it
// (map): kept for the rest of the request unless `volatile_value`.
class ComputedVariable {
 public:
  virtual ~ComputedVariable() = default;
  // The value for r (in r's memory or static); false: no value.
  virtual bool compute(Request& r, std::string_view& out) const = 0;
  bool volatile_value = false;
};
// Makes `var` the computation of a declared variable (the last
// configuration loaded that defines it wins; the computation is kept alive
// here for as long as it is the current one).
void set_computed_variable(std::uint32_t index, std::shared_ptr<const ComputedVariable> var);
// A request's value of a declared variable: set, else computed (and kept),
// else none. `warn` is set when the variable was never given a value.
bool read_declared_variable(const Request& r, std::uint32_t index, std::string_view& out);

// ---- regular expressions ----------------------------------------------------------

// A regular expression of the HTTP configuration, with the declared
// variable of each of its named groups (re.names(), in order).
struct HttpRegex {
  Regex re;
  std::vector<std::uint32_t> names;
};
Result<HttpRegex> compile_http_regex(std::string_view pattern, bool caseless);

// Matches `re` against `subject`; on a match, keeps the groups for $1..$9
// (copying `subject` into the request's memory when the expression has
// groups) and sets the variables of its named groups. 1: matched, 0: not,
// -1: a matching error or no memory (logged here; the caller answers 500).
int match_with_captures(Request& r, const HttpRegex& re, std::string_view subject);
// Group `n` of the last match with captures, or false.
bool capture(const Request& r, int n, std::string_view& out);

}  // namespace vigil::http
