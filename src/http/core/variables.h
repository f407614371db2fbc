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
// Syntax: "$name" or "${name}", the name of [A-Za-z0-9_]. "$http_NAME" is
// the request header NAME ('_' matches '-', case-insensitively; several
// fields of that name are joined with ", ").

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "vigil/core/result.h"

namespace vigil::http {

struct Request;

enum class VarId : std::uint8_t {
  kHost,
  kRemoteAddr,
  kBinaryRemoteAddr,
  kRemotePort,
  kRemoteUser,  // always "not found": there is no auth module
  kServerAddr,
  kServerPort,
  kScheme,
  kRequestUri,
  kUri,
  kArgs,
  kRequestMethod,
  kRequest,
  kStatus,
  kBodyBytesSent,
  kBytesSent,
  kRequestTime,
  kTimeLocal,
  kTimeIso8601,
  kHttpHeader,  // $http_NAME
  kProxyAddXForwardedFor,
  kUpstreamAddr,
  kUpstreamStatus,
  kUpstreamResponseTime,
  kConnection,
  kConnectionRequests,
  kPid,
  kProxyHost,  // proxy_pass's host[:port] (the default Host of a proxied request)
  kSslProtocol,       // "TLSv1.3"; not found on a plain connection
  kSslCipher,         // "TLS_AES_256_GCM_SHA384"
  kSslServerName,     // the SNI name the client sent
  kSslSessionReused,  // "r" when the session was resumed, else "."
};

// How variable values are escaped when written (log_format escape=).
enum class VarEscape : std::uint8_t {
  kNone,     // as they are (header values: a request's fields are already checked)
  kDefault,  // '"', '\\', bytes < 0x20 and > 0x7e as \xHH (nginx's access log)
  kJson,     // '"' and '\\' escaped, control characters as \uXXXX
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
  bool uses(VarId id) const;
  const std::string& source() const { return source_; }

 private:
  struct Part {
    bool literal = true;
    VarId id = VarId::kHost;
    std::string text;  // the literal, or the header name of $http_NAME (lower case, '-')
  };
  std::vector<Part> parts_;
  std::string literal_;  // concatenated literals when there are no variables
  std::string source_;
  std::size_t variables_ = 0;
};

// The value of $http_NAME-style lookups: the request's fields named `name`
// (case-insensitive) joined with ", ", written to `out` (nullptr: only the
// length). Returns the length; `found` false when there is no such field.
std::size_t request_header_value(const Request& r, std::string_view name, char* out, bool& found);

}  // namespace vigil::http
