#pragma once
// `expires [modified] time | epoch | max | off;` (nginx's
// ngx_http_headers_filter_module, the expires half): the Expires and
// Cache-Control fields of a location's successful and redirect responses.

#include <cstdint>
#include <ctime>

#include "http/core/variables.h"

namespace vigil::http {

class HttpModule;
class HttpServers;
struct Request;

enum class Expires : std::uint8_t {
  kOff,
  kEpoch,     // "Thu, 01 Jan 1970 00:00:01 GMT", no-cache
  kMax,       // "Thu, 31 Dec 2037 23:55:55 GMT", ten years
  kAccess,    // now + time
  kModified,  // Last-Modified + time (now + time when the response has none)
  kDaily,     // the next time of day `time` (local time)
};

struct ExpiresConf {
  Expires expires = Expires::kOff;
  std::int64_t time = 0;       // seconds; negative: in the past ("no-cache")
  VarTemplate value;           // variables: parsed per request
  bool has_value = false;
};

const HttpModule& expires_module();

// Some location of the configuration sets expires: the filter belongs in the
// header filter chain (modules.cc).
bool uses_expires(const HttpServers& servers);

// Parses one value ("epoch", "max", "off", "@15h30m", "-1h", "2048") into
// `expires`/`time`; `expires` is kModified on entry for "modified time".
// Returns an error text, or nullptr.
const char* parse_expires(std::string_view value, Expires& expires, std::int64_t& time);

}  // namespace vigil::http
